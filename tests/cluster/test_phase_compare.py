#!/usr/bin/env python3
"""scripts/cluster/phase_compare.py (the model's phases of the overlapped step next to traced ones,
each minus DDP's) on hand-made predictions and one-rank traces, against differences worked by
hand; its bad input, and trace_plans.py's (exit 2 naming the value). With `--cluster BUILD_DIR`
(label cluster, root): trace_plans.py records one plan of a hand-made run on a 2x2 cluster, with
overlap and without (--mode serial), and trace_phases reads the trace. Exit 0 on success, 1 with
the failed checks listed."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster")
sys.path.insert(0, SCRIPTS)
import phase_compare  # noqa: E402

failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def exits(fn, *args):
    """fn's exit code and what it printed to stderr (None: it returned)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            fn(*args)
    except SystemExit as e:
        return e.code, err.getvalue()
    return None, err.getvalue()


def one_rank_trace(path, first_forward_ms, forward_ms, backward_end_ms):
    """Five steps of 100 ms: forward of bucket 0 from `first_forward_ms` (1 ms) and of bucket 1
    ending `forward_ms` later, backward 1 then backward 0 ending at `backward_end_ms`."""
    events = []
    for k in range(6):
        t0 = 100000 * k
        events.append({"name": "start_micro_batch", "cat": "wait", "ph": "X", "ts": t0, "dur": 0, "tid": 0})
        if k == 5:
            break
        f = t0 + int(first_forward_ms * 1000)
        b = t0 + int(backward_end_ms * 1000)
        events += [{"name": "forward", "cat": "device", "ph": "X", "ts": f, "dur": 1000, "tid": 0, "args": {"bucket": 0}},
                   {"name": "forward", "cat": "device", "ph": "X", "ts": f + 1000, "dur": int(forward_ms * 1000) - 1000, "tid": 0,
                    "args": {"bucket": 1}},
                   {"name": "backward", "cat": "device", "ph": "X", "ts": b - 20000, "dur": 10000, "tid": 0,
                    "args": {"bucket": 1}},
                   {"name": "backward", "cat": "device", "ph": "X", "ts": b - 10000, "dur": 10000, "tid": 0,
                    "args": {"bucket": 0}}]
    json.dump({"traceEvents": events}, open(path + ".rank0.json", "w"))


# phase_rows by hand: zero1's model phases minus ddp's 1, 2, 2, 3 ms; traced 0, 1, 1, 0.5; model
# minus traced 1, 1, 1, 2.5. hsdp has no trace: no row.
model = {"ddp": [0.0, 10.0, 30.0, 33.0], "zero1": [1.0, 12.0, 32.0, 36.0], "hsdp": [0.0, 10.0, 31.0, 33.5]}
traced = {"ddp": [1.0, 11.0, 34.0, 35.0], "zero1": [1.0, 12.0, 35.0, 35.5]}
rows = phase_compare.phase_rows(model, traced)
expect("rows", [r[0] for r in rows], ["ddp", "zero1"])
expect("zero1 model", rows[1][1], [1.0, 2.0, 2.0, 3.0])
expect("zero1 traced", rows[1][2], [0.0, 1.0, 1.0, 0.5])
expect("zero1 model - traced", rows[1][3], [1.0, 1.0, 1.0, 2.5])
code, err = exits(phase_compare.phase_rows, model, {"zero1": traced["zero1"]})
expect("no reference trace exits 2", code, 2)
expect("names the reference", "reference plan ddp" in err, True)
code, err = exits(phase_compare.model_phases, {"name": "zero1", "overlapped": 0.036})
expect("a prediction without phases exits 2", code, 2)
expect("names the plan", "zero1" in err, True)

with tempfile.TemporaryDirectory() as d:
    # compare(): the traces on disk (ddp's forward from 1 ms for 10 ms, backward ending at 90;
    # zero1's from 1.5 for 11 ms, ending at 92: next step 100 in both), the predictions in seconds
    # as amsp-cluster-predict prints them. zero1 - ddp: model +1.00, +1.00, +3.00, +4.00; traced
    # +0.50, +1.50, +2.00, +0.00.
    one_rank_trace(os.path.join(d, "2x2-1gbit-ddp"), 1.0, 10.0, 90.0)
    one_rank_trace(os.path.join(d, "2x2-1gbit-zero1"), 1.5, 11.0, 92.0)
    config = {"mesh": "2x2", "rate": "1gbit", "plans": ["ddp", "zero1", "hsdp"]}
    predictions = {"ddp": {"phases": [0.0, 0.010, 0.030, 0.033]}, "zero1": {"phases": [0.001, 0.011, 0.033, 0.037]},
                   "hsdp": {"phases": [0.0, 0.010, 0.030, 0.033]}}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        phase_compare.compare(config, predictions, os.path.join(d, "{mesh}-{rate}-{plan}"), skip=2)
    expect("zero1's row", "| zero1 | +1.00 / +0.50 (+0.50) | +1.00 / +1.50 (-0.50) | +3.00 / +2.00 (+1.00) | "
                          "+4.00 / +0.00 (+4.00) |" in out.getvalue(), True)
    expect("no row without a trace", "| hsdp |" in out.getvalue(), False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # no ddp trace under this pattern: nothing printed
        phase_compare.compare(config, predictions, os.path.join(d, "none-{plan}"))
    expect("no table without the reference's trace", out.getvalue(), "")

    # trace_plans.py's bad input, before it needs root or a cluster.
    run_file = os.path.join(d, "run.json")
    json.dump([{"mesh": "2x2", "rate": "1gbit", "plans": ["ddp"], "global_batch": 4,
                "model_args": "--context 16 --width 32 --heads 2 --layers 1",
                "train_args": "--device-ms-per-sequence 1"}], open(run_file, "w"))
    trace_plans = [sys.executable, os.path.join(SCRIPTS, "trace_plans.py")]
    for args, named in ((["--steps", "3"], "--steps must be at least 4 (trace_phases skips 2 and needs a next step), got 3"),
                        (["--configs", "9x9/1gbit"], "--configs 9x9/1gbit: the run has 2x2/1gbit"),
                        (["--build", "/nonexistent-build"],
                         "/nonexistent-build/examples/amsp_train/amsp-train not built")):
        r = subprocess.run(trace_plans + [run_file, "--out-dir", os.path.join(d, "t"), *args],
                           capture_output=True, text=True)
        expect(f"trace_plans {args} exits 2", r.returncode, 2)
        expect(f"trace_plans {args} names the value", named in r.stderr, True)

    if len(sys.argv) == 3 and sys.argv[1] == "--cluster":
        if os.geteuid() != 0:
            print("test_phase_compare.py: SKIP: needs root")
            sys.exit(77)
        r = subprocess.run(trace_plans + [run_file, "--out-dir", os.path.join(d, "refused"), "--steps", "5",
                                          "--plans", "bogus", "--build", sys.argv[2]], capture_output=True, text=True)
        expect("trace_plans with a plan amsp-train refuses exits 2 with its rule",
               (r.returncode, "[rule plan.parse]" in r.stderr, "Traceback" in r.stderr), (2, True, False))
        r = subprocess.run(trace_plans + [run_file, "--out-dir", os.path.join(d, "t"), "--steps", "5",
                                          "--build", sys.argv[2]], capture_output=True, text=True)
        expect("trace_plans on a 2x2 cluster exits 0", r.returncode, 0)
        prefix = os.path.join(d, "t", "2x2-1gbit-ddp")
        expect("one trace per rank", sorted(os.listdir(os.path.join(d, "t"))),
               [f"2x2-1gbit-ddp.rank{k}.json" for k in range(4)])
        r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "trace_phases.py"), prefix, "--skip", "1"],
                           capture_output=True, text=True)
        expect("trace_phases reads it", (r.returncode, "first forward starts" in r.stdout), (0, True))
        # --mode serial traces the check's step without overlap: DDP's gradient AllReduces (more than
        # the 8 bytes of the loss and the norm) run on the main thread (tid 0), where the overlapped
        # step runs them on the engine's communication thread.
        r = subprocess.run(trace_plans + [run_file, "--out-dir", os.path.join(d, "s"), "--steps", "5",
                                          "--mode", "serial", "--build", sys.argv[2]], capture_output=True, text=True)
        expect("trace_plans --mode serial exits 0", r.returncode, 0)

        def gradient_threads(path):
            with open(path) as f:
                return {e["tid"] for e in json.load(f)["traceEvents"]
                        if e.get("cat") == "collective" and e["name"] == "all_reduce" and e["args"]["bytes"] > 8}
        expect("serial: gradient AllReduces on the main thread",
               gradient_threads(os.path.join(d, "s", "2x2-1gbit-ddp.rank0.json")), {0})
        expect("overlap: gradient AllReduces off the main thread",
               0 in gradient_threads(prefix + ".rank0.json"), False)
        # check_measure.traced_entry_skew, as the check's calibration runs it: one value per plan,
        # within a step (steps of about 2 ms here), and no trace left behind.
        import check_measure  # noqa: E402
        work = os.path.join(d, "skew")
        os.makedirs(work)
        settings = SimpleNamespace(train=os.path.join(sys.argv[2], check_measure.TRAIN),
                                   global_batch=4, mpi_check_calls="off", work=work,
                                   model_args="--context 16 --width 32 --heads 2 --layers 1".split(),
                                   train_args=["--device-ms-per-sequence", "1"])
        try:
            subprocess.run([check_measure.CLUSTER, "up", "2", "2", "1gbit"], check=True, capture_output=True,
                           timeout=120)
            skew = check_measure.traced_entry_skew(settings, "2x2", [check_measure.CLUSTER, "run", "--", "-np", "4"],
                                                   ["ddp"], steps=6)
        finally:
            subprocess.run([check_measure.CLUSTER, "down"], capture_output=True)
        expect("entry skew traced for the plan", list(skew), ["ddp"])
        expect("entry skew within a step", 0 <= skew["ddp"] < 0.05, True)
        expect("entry traces removed", os.listdir(work), [])
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        expect("the cluster is down", "amspn-" in left, False)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("phase_compare.py, trace_plans.py: all checks passed")
