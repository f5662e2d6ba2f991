"""The programs the cluster check and the scripts beside it run (scripts/cluster.sh, amsp-train,
amsp-profile, amsp-cluster-predict under a build folder) and how they run them: a command's output,
a failed program's report and exit code, a SIGTERM that still takes the cluster down."""
import os
import re
import signal
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")


def unbuilt(build, programs):
    """The message for the programs under `build` (paths relative to it) that are not built, or None:
    the scripts stop on it before bringing a cluster up, not with a traceback from mpirun."""
    missing = [os.path.join(build, p) for p in programs if not os.access(os.path.join(build, p), os.X_OK)]
    if not missing:
        return None
    return (f"{', '.join(missing)} not built: run `cmake --preset default && cmake --build {build}` "
            "or point --build at a build folder that has them (rule cli.value)")


TRAIN = os.path.join("examples", "amsp_train", "amsp-train")
PROFILE = os.path.join("tools", "amsp_profile", "amsp-profile")
PREDICT = os.path.join("tests", "cluster", "amsp-cluster-predict")


def words_of(stderr):
    """What a failed program said: the project's own errors (`amsp: ... [rule R]`, once each, however
    many ranks printed them between mpirun's lines), else its last five lines."""
    ruled = list(dict.fromkeys(re.findall(r"amsp: [^\n]*?\[rule [^\]]+\]", stderr)))
    return "\n".join(ruled[:3] or stderr.strip().splitlines()[-5:])


def program_failure(e):
    """For a program of the scripts that failed under sh() (a CalledProcessError or TimeoutExpired):
    the report (the command, how it ended, its own words) and the exit code to leave with, 2 where
    the program refused its input (exit 2: amsp-train's rule for a global batch, a plan it cannot
    parse), else 1."""
    refused = isinstance(e, subprocess.CalledProcessError)
    said = words_of(e.stderr if isinstance(e.stderr, str) else "")
    ended = f"exited {e.returncode}" if refused else "timed out"
    return f"`{' '.join(map(str, e.cmd))}` {ended}\n{said}".rstrip(), 2 if refused and e.returncode == 2 else 1


def leave_through_finally_on_sigterm():
    """A SIGTERM (a timeout, a cancelled CI job) raises SystemExit(143), so that the caller's
    finally takes its cluster down; Python's default would end the process where it stands."""
    def leave(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, leave)


def sh(cmd, timeout):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
