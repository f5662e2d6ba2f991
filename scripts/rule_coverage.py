#!/usr/bin/env python3
"""Every error rule the code raises is named by a test: a rule id ("area.name", docs/naming.md) in a
string literal of include/, tools/ or examples/ must appear somewhere under tests/ or fuzz/, else
this exits 1 and lists it with the files that raise it. A rule no test can reach on this project's
machines is listed in UNREACHABLE with the reason; one listed there that a test does name, or that
the code no longer raises, is reported too, so that the list stays true.

  scripts/rule_coverage.py [--root DIR]     (ctest: ci_rule_coverage)

Rule areas are those of docs/naming.md (layers and their named parts) and the programs' own
(cli, data, model, example, profile); other dotted literals (tensor names such as "attn.q", file
names such as "index.json") are not rules."""
import argparse
import os
import re
import sys

AREAS = ("core", "sharding", "comm", "optim", "engine", "planner", "io", "ckpt", "plan", "layout", "mesh",
         "group", "factor", "policy", "json", "dtype", "buffer", "tensor", "cuda", "profile", "cli", "data",
         "model", "example")
RULE = re.compile(r'"((?:' + "|".join(AREAS) + r')\.[a-z_]+)"')
CODE = (".hpp", ".cuh", ".cpp", ".cu", ".h")

# Rules no test on this project's machines can reach, with why. Keep it short and true.
UNREACHABLE = {
    "comm.device_world_size": "the threads backend on CUDA device buffers: needs a GPU",
    "cuda.memset": "a failing cudaMemset: needs a GPU",
    "engine.device_control": "the CUDA space's device step control: needs a GPU",
    "optim.cuda_flag": "the CUDA update and norm kernels' flag buffer: needs a GPU",
    "optim.cuda_workspace": "the CUDA norm kernel's workspace: needs a GPU",
    "engine.scratch": "an internal guard of detail::BufferPool: every release pairs an acquire by construction",
    "example.layout": "an internal guard: the trainer always hands the engine the model's own layout",
}


def files(root, folders, suffixes=None):
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if suffixes is None or name.endswith(suffixes):
                    yield os.path.join(dirpath, name)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def raised_rules(root):
    """{rule: [files that raise it]} over the library, the tools and the examples."""
    out = {}
    for path in files(root, ("include", "tools", "examples"), CODE):
        for rule in set(RULE.findall(read(path))):
            out.setdefault(rule, []).append(os.path.relpath(path, root))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    raised = raised_rules(a.root)
    tested_text = "\n".join(read(p) for p in files(a.root, ("tests", "fuzz")))
    problems = []
    for rule, where in sorted(raised.items()):
        named = rule in tested_text
        if not named and rule not in UNREACHABLE:
            problems.append(f"{rule}: raised in {', '.join(sorted(where))}, named by no test under tests/ or fuzz/")
        if named and rule in UNREACHABLE:
            problems.append(f"{rule}: a test names it; take it off UNREACHABLE ({UNREACHABLE[rule]})")
    for rule in sorted(set(UNREACHABLE) - set(raised)):
        problems.append(f"{rule}: on UNREACHABLE but no longer raised; take it off")
    for p in problems:
        print(f"rule_coverage.py: {p}", file=sys.stderr)
    print(f"rule_coverage.py: {len(raised)} rules raised, {len(raised) - len(UNREACHABLE)} named by a test, "
          f"{len(UNREACHABLE)} unreachable here; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
