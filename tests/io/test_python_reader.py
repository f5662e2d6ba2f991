"""Someone else's reader: Python's `safetensors` and `numpy` (from PyPI) read amsp's shard files and
the amsp-ckpt export, and get the values amsp wrote.

usage: test_python_reader.py CHECKPOINT_WRITER AMSP_CKPT WORKDIR (tests/io/checkpoint_writer.cpp)
Exit 77 (skipped) only when the packages cannot be imported or installed.
"""
import importlib
import json
import os
import subprocess
import sys


def import_or_install(workdir):
    target = os.path.join(workdir, "pydeps")
    sys.path.insert(0, target)
    try:
        import numpy, safetensors  # noqa: F401
        return
    except ImportError:
        pass
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", target, "safetensors", "numpy"])
    if r.returncode != 0:
        print("SKIP: pip could not install safetensors and numpy")
        sys.exit(77)
    importlib.invalidate_caches()  # the directory was empty when the path was added


def bf16_round(values, np):
    """fp32 -> bf16 bits, round to nearest even (finite inputs): an implementation independent of amsp's."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def main():
    checkpoint_writer, amsp_ckpt, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    import_or_install(workdir)
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file

    subprocess.run([checkpoint_writer, "sample", workdir], check=True)
    ckpt = os.path.join(workdir, "ckpt")
    index = json.load(open(os.path.join(ckpt, "index.json")))
    rows = len(index["rows"])
    failures = 0
    checked_pieces = 0
    expected = {}
    for t in index["tensors"]:
        name, shape = t["name"], t["shape"]
        numel = int(np.prod(shape)) if shape else 1
        want = np.fromfile(os.path.join(workdir, "expected", name + ".f32"), dtype="<f4").reshape(rows, numel)
        expected[name] = want
        got = np.full((rows, numel), np.nan, dtype=np.float32)
        for p in t["pieces"]:
            path = os.path.join(ckpt, index["files"][p["file"]]["name"])
            key = "%s/%d" % (name, p["begin"])
            with safe_open(path, framework="numpy") as f:
                piece = f.get_tensor(key)
            assert piece.shape == (rows, p["count"]), (key, piece.shape)
            # The index's byte offset points at the same bytes safetensors found.
            raw = np.fromfile(path, dtype="<f4", count=rows * p["count"], offset=p["offset"]).reshape(rows, p["count"])
            if not np.array_equal(raw, piece):
                print("FAILED: index offset of %s does not hold the safetensors entry" % key)
                failures += 1
            got[:, p["begin"]:p["begin"] + p["count"]] = piece
            checked_pieces += 1
        if not np.array_equal(got, want):
            print("FAILED: shard files hold other values for %s" % name)
            failures += 1

    # The export, fp32 through safetensors.numpy; bf16 through the header and raw bits (numpy has no bf16).
    for dtype in ("fp32", "bf16"):
        out = os.path.join(workdir, "export-%s.safetensors" % dtype)
        subprocess.run([amsp_ckpt, "export", ckpt, out, "--dtype", dtype], check=True)
        if dtype == "fp32":
            tensors = load_file(out)
            for t in index["tensors"]:
                want = expected[t["name"]][0].reshape(t["shape"])
                if not np.array_equal(tensors[t["name"]], want):
                    print("FAILED: fp32 export of %s" % t["name"])
                    failures += 1
        else:
            blob = open(out, "rb").read()
            n = int.from_bytes(blob[:8], "little")
            header = json.loads(blob[8:8 + n])
            for t in index["tensors"]:
                e = header[t["name"]]
                assert e["dtype"] == "BF16" and e["shape"] == t["shape"], e
                b, end = e["data_offsets"]
                bits = np.frombuffer(blob[8 + n + b:8 + n + end], dtype="<u2")
                if not np.array_equal(bits, bf16_round(expected[t["name"]][0], np)):
                    print("FAILED: bf16 export of %s" % t["name"])
                    failures += 1
    # amsp-ckpt's exit status: 0 verified, 1 damaged (rule printed), 2 bad usage.
    r = subprocess.run([amsp_ckpt, "verify", ckpt], capture_output=True, text=True)
    failures += r.returncode != 0
    damaged = os.path.join(workdir, "damaged")
    subprocess.run(["rm", "-rf", damaged], check=True)
    subprocess.run(["cp", "-r", ckpt, damaged], check=True)
    piece = index["tensors"][0]["pieces"][0]
    path = os.path.join(damaged, index["files"][piece["file"]]["name"])
    data = bytearray(open(path, "rb").read())
    data[piece["offset"] + 3] ^= 0x01
    open(path, "wb").write(bytes(data))
    r = subprocess.run([amsp_ckpt, "verify", damaged], capture_output=True, text=True)
    if r.returncode != 1 or "ckpt.checksum" not in r.stderr:
        print("FAILED: verify of a damaged checkpoint: %d %s" % (r.returncode, r.stderr))
        failures += 1
    r = subprocess.run([amsp_ckpt, "export", ckpt, "x", "--dtype", "fp16"], capture_output=True, text=True)
    if r.returncode != 2 or "--dtype 'fp16'" not in r.stderr:
        print("FAILED: a bad --dtype must exit 2 naming the option: %d %s" % (r.returncode, r.stderr))
        failures += 1
    print("python reader: %d pieces of %d tensors checked, %d failures" % (checked_pieces, len(index["tensors"]), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
