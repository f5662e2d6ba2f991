#!/usr/bin/env python3
"""Replays a clean build's schedule as Ninja 1.11 runs it, to compare build orders without a build.

Ninja 1.11 (Debian 12's) starts the ready build steps lowest edge first, an edge's number being
its position in build.ninja, `-j` at a time; phony edges take no time and no job slot. Given a
build.ninja (any configuration of the same targets) and a .ninja_log with each step's duration
(a clean build's, e.g. a clean-clone CI run's build/<preset>/.ninja_log), this prints the wall time
that order takes, the summed step time, and the steps that start last:

  scripts/ninja_schedule.py build/default/build.ninja /tmp/ci7/build/default/.ninja_log
  scripts/ninja_schedule.py build/tsan/build.ninja old/tsan/.ninja_log --target amsp_label_tsan \
      --set tests/io/CMakeFiles/test_io.dir/Unity/unity_0_cxx.cxx.o=20

A step missing from the log counts 0 s (e.g. a unit the logged build did not have: give it with
--set OUTPUT=SECONDS). docs/testing.md ("CI time, seventh session") uses it.
"""
import argparse
import heapq
import os
import sys


def logical_lines(text):
    """build.ninja's lines with `$`-continuations joined."""
    pending = ''
    for line in text.split('\n'):
        body = line.rstrip('$')
        trailing = len(line) - len(body)
        if trailing % 2 == 1:  # an odd number of `$` at the end: a continuation
            pending += line[:-1]
            continue
        yield pending + line
        pending = ''
    if pending:
        yield pending


def split_paths(text):
    """Space-separated ninja paths, with `$ `, `$:` and `$$` unescaped."""
    paths, current, i = [], '', 0
    while i < len(text):
        c = text[i]
        if c == '$' and i + 1 < len(text):
            current += text[i + 1]
            i += 2
            continue
        if c == ' ':
            if current:
                paths.append(current)
            current = ''
        else:
            current += c
        i += 1
    if current:
        paths.append(current)
    return paths


def unescaped_colon(text):
    i = 0
    while True:
        j = text.index(':', i)
        dollars = len(text[:j]) - len(text[:j].rstrip('$'))
        if dollars % 2 == 0:
            return j
        i = j + 1


def parse_manifest(text):
    """[(outputs, rule, inputs)] in manifest order, and the `default` targets."""
    edges, defaults = [], []
    for line in logical_lines(text):
        if line.startswith('build '):
            body = line[len('build '):]
            colon = unescaped_colon(body)
            outputs = [p for p in split_paths(body[:colon]) if p != '|']
            rest = split_paths(body[colon + 1:])
            inputs = [p for p in rest[1:] if p not in ('|', '||')]
            edges.append((outputs, rest[0], inputs))
        elif line.startswith('default '):
            defaults += split_paths(line[len('default '):])
    return edges, defaults


def parse_log(text):
    """Output -> seconds, from a .ninja_log (v5: start, end, mtime, output, hash; ms)."""
    durations = {}
    for line in text.split('\n')[1:]:
        fields = line.split('\t')
        if len(fields) >= 4:
            durations[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    return durations


def simulate(edges, durations, jobs, targets, build_dir=''):
    """Returns (wall seconds, summed seconds, {edge: start})."""
    producer = {out: i for i, (outs, _, _) in enumerate(edges) for out in outs}
    needed, stack = set(), [producer[t] for t in targets if t in producer]
    while stack:
        e = stack.pop()
        if e not in needed:
            needed.add(e)
            stack += [producer[p] for p in edges[e][2] if p in producer]
    users = {e: [] for e in needed}
    waiting = {}
    for e in needed:
        deps = {producer[p] for p in edges[e][2] if p in producer}
        waiting[e] = len(deps)
        for d in deps:
            users[d].append(e)

    def seconds(e):
        outputs, rule, _ = edges[e]
        if rule == 'phony':
            return None
        for out in outputs:
            for key in (out, os.path.join(build_dir, out), os.path.relpath(out, build_dir) if build_dir else out):
                if key in durations:
                    return durations[key]
        return 0.0

    ready = [e for e in needed if waiting[e] == 0]
    heapq.heapify(ready)
    running, now, total, starts = [], 0.0, 0.0, {}

    def finish(e):
        for u in users[e]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)

    while ready or running:
        while ready and len(running) < jobs:
            e = heapq.heappop(ready)
            s = seconds(e)
            if s is None:
                finish(e)
                continue
            starts[e] = now
            total += s
            heapq.heappush(running, (now + s, e))
        if running:
            now, e = heapq.heappop(running)
            finish(e)
    return now, total, starts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('manifest', help='build.ninja')
    parser.add_argument('log', help='.ninja_log with the steps\' durations')
    parser.add_argument('-j', '--jobs', type=int, default=2)
    parser.add_argument('--target', action='append', help='what to build (default: the manifest\'s default)')
    parser.add_argument('--set', action='append', default=[], metavar='OUTPUT=SECONDS',
                        help='a step\'s duration, instead of (or missing from) the log')
    parser.add_argument('--last', type=int, default=5, help='how many of the last-starting steps to list')
    args = parser.parse_args(argv)
    with open(args.manifest) as f:
        edges, defaults = parse_manifest(f.read())
    with open(args.log) as f:
        durations = parse_log(f.read())
    for item in args.set:
        output, _, value = item.rpartition('=')
        durations[output] = float(value)
    build_dir = os.path.dirname(os.path.abspath(args.manifest))
    wall, total, starts = simulate(edges, durations, args.jobs, args.target or defaults, build_dir)
    print(f'wall {wall:.1f} s, steps {total:.1f} s in all, {total / args.jobs:.1f} s if -j {args.jobs} never idled')
    for start, e in sorted(((s, e) for e, s in starts.items()), reverse=True)[:args.last]:
        print(f'  starts at {start:7.1f} s: {edges[e][0][0]}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
