#!/usr/bin/env python3
"""scripts/cluster/check.py's command line (check_args.py) and its reading of saved runs: every bad
value exits 2 naming the value and its rule before anything is measured or a cluster comes up, a
file that is not a saved run exits 2 naming it, and a program of the check that refuses its input
(a stand-in amsp-train here) is reported in its own words, not as a traceback. No build: a folder
of stand-in programs plays it; no cluster but with --cluster (as root: the live check's refusal
and a SIGTERM on a 4x2 cluster). Exit 0 on success, 1 with the failures listed, 77 to skip."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import time

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster")
CHECK = [sys.executable, os.path.join(SCRIPTS, "check.py")]
failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def refused(args, named):
    """check.py with `args` exits 2 and its error names `named`."""
    r = subprocess.run(CHECK + args, capture_output=True, text=True, timeout=60)
    expect(f"{args} exits 2", r.returncode, 2)
    expect(f"{args} names '{named}'", named in r.stderr, True)
    expect(f"{args} is not a traceback", "Traceback" in r.stderr, False)


def stand_in(path, script):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


with tempfile.TemporaryDirectory() as d:
    # Values the check reads itself; --reanalyze makes the live-only values irrelevant, so the
    # ones below use a saved file that does not exist: their own rule must stop them first.
    refused(["--profile-passes", "0", "--reanalyze", "nothing.json"], "--profile-passes must be at least 1, got 0")
    refused(["--update-turns", "0", "--reanalyze", "nothing.json"], "--update-turns must be at least 1, got 0")
    for option in ("--repeats", "--steps"):  # before a cluster comes up (it did: 2026-12-05)
        refused([option, "0", "--reanalyze", "nothing.json"], f"{option} must be at least 1, got 0")
    refused(["--update-seconds", "-0.001", "--reanalyze", "nothing.json"],
            "--update-seconds must be at least 0 seconds, got -0.001")
    refused(["--update-seconds", "0.001", "--compute", "line", "--reanalyze", "nothing.json"],
            "--compute line fits its own")

    # Values only a live check reads (2026-12-06: each started a cluster or a traceback before).
    out = ["--out", os.path.join(d, "run.json")]
    refused(["--meshes", "3x3"] + out, "--meshes 3x3: the check calibrates on 4x2 and 2x4 only")
    refused(["--rates", "1gbit,5parsecs"] + out, "--rates 5parsecs: cluster.sh: RATE must be a tc rate")
    refused(["--modes", "overlap,foo"] + out, "--modes foo: each mode must be one of overlap, serial")
    refused(["--global-batch", "0"] + out, "--global-batch must be at least 1, got 0")
    refused(["--profile-gap-us", "-1"] + out, "--profile-gap-us must be at least 0, got -1")
    refused(["--out", os.path.join(d, "no-such-folder", "run.json")],
            f"the folder {os.path.join(d, 'no-such-folder')} must exist and be writable")

    # A build folder without the predictor: exit 2 naming the missing program, not a traceback (a
    # fresh checkout's --reanalyze hit that on 2026-12-06).
    refused(["--build", "/nonexistent-build", "--reanalyze", "nothing.json"],
            "/nonexistent-build/tests/cluster/amsp-cluster-predict not built")

    # Stand-ins for the three programs: the predictor refuses the plan 'bogus' as the real one does
    # (its rule plan.parse), amsp-train refuses every run as a bad global batch.
    build = os.path.join(d, "build")
    stand_in(os.path.join(build, "tests", "cluster", "amsp-cluster-predict"),
             'case "$*" in *bogus*) echo "amsp-cluster-predict: amsp: unknown plan \'bogus\' [rule plan.parse]" >&2; '
             'exit 2;; esac\necho "{}"\n')
    stand_in(os.path.join(build, "tools", "amsp_profile", "amsp-profile"), "exit 0\n")
    refused(["--build", build] + out, f"{build}/examples/amsp_train/amsp-train not built")
    stand_in(os.path.join(build, "examples", "amsp_train", "amsp-train"),
             'echo "amsp-train: amsp: a global batch of 3 sequences does not split [rule data.batch_split]" >&2\n'
             'exit 2\n')
    refused(["--build", build, "--meshes", "4x2", "--plans", "ddp;bogus"] + out,
            "--plans on 4x2: amsp-cluster-predict: amsp: unknown plan 'bogus' [rule plan.parse]")

    # Files that are not saved runs: missing, not JSON, JSON of another shape.
    corrupt, other = os.path.join(d, "corrupt.json"), os.path.join(d, "other.json")
    with open(corrupt, "w") as f:
        f.write('[{"mesh": "4x2"')
    with open(other, "w") as f:
        json.dump([{"mesh": "4x2", "rate": "1gbit"}], f)
    for path in (os.path.join(d, "missing.json"), corrupt, other):
        refused(["--build", build, "--reanalyze", path], f"check.py: {path}: not a saved cluster check")
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "compare_runs.py"), other, other],
                       capture_output=True, text=True, timeout=60)
    expect("compare_runs on another shape exits 2", r.returncode, 2)
    expect("compare_runs names the file", f"compare_runs.py: {other}: not a saved cluster check" in r.stderr, True)

    # check.py's report of a program that refused its input: the project's error once, however many
    # ranks printed it between mpirun's lines.
    sys.path.insert(0, SCRIPTS)
    import check_measure  # noqa: E402
    said = ("amsp-train: amsp-trainamsp: a global batch of 3 sequences does not split [rule data.batch_split]\n"
            "----\nPrimary job terminated\n"
            "amsp-train: amsp: a global batch of 3 sequences does not split [rule data.batch_split]\n"
            "  Exit code:    2\n")
    expect("the refusal once", check_measure.words_of(said),
           "amsp: a global batch of 3 sequences does not split [rule data.batch_split]")
    expect("no rule: the last five lines", check_measure.words_of("a\nb\nc\nd\ne\nf\n"), "b\nc\nd\ne\nf")

    # --cluster (as root, label cluster): the live check on a 4x2 cluster of its own name with the
    # stand-ins. amsp-train's refusal ends it with exit 2 and the rule, once; a SIGTERM while a
    # program runs ends it too; neither leaves a namespace of the cluster behind.
    if sys.argv[1:] == ["--cluster"]:
        if os.geteuid() != 0:
            print("test_check_args.py: SKIP: needs root")
            sys.exit(77)
        env = dict(os.environ, AMSP_CLUSTER_NAME="amspntargs", AMSP_CLUSTER_STATE="/run/amspntargs")
        live = CHECK + ["--build", build, "--meshes", "4x2", "--rates", "1gbit"] + out
        r = subprocess.run(live, capture_output=True, text=True, timeout=120, env=env)
        expect("a refused run exits 2", r.returncode, 2)
        expect("the refusal in its own words, once", r.stderr.count("[rule data.batch_split]"), 1)
        expect("the refused command named", "amsp-train --mesh 4x2" in r.stderr and "exited 2" in r.stderr, True)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        expect("no namespace left after the refusal", "amspntargs" in left, False)
        stand_in(os.path.join(build, "examples", "amsp_train", "amsp-train"), "touch " + d + "/started\nsleep 60\n")
        p = subprocess.Popen(live, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(600):  # the cluster is up and amsp-train runs: then the signal
            if os.path.exists(os.path.join(d, "started")) or p.poll() is not None:
                break
            time.sleep(0.1)
        p.terminate()
        expect("SIGTERM ends the check", p.wait(timeout=60), 128 + 15)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        expect("no namespace left after SIGTERM", "amspntargs" in left, False)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("check.py's command line and saved runs: all checks passed")
