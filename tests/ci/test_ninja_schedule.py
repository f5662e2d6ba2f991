#!/usr/bin/env python3
"""scripts/ninja_schedule.py against schedules worked out by hand (two jobs)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts'))
import ninja_schedule  # noqa: E402

LOG = 'ninja log v5\n' + ''.join(
    f'0\t{ms}\t0\t{out}\th\n' for out, ms in [('x1.o', 1000), ('x2.o', 1000), ('x3.o', 1000), ('long.o', 5000),
                                              ('app', 500), ('dir/with space.o', 2000)])


def manifest(order):
    """Four independent compiles in `order`, an app linking them, a phony default."""
    lines = ['rule cc', '  command = cc $in -o $out']
    lines += [f'build {o}.o: cc {o}.cpp' for o in order]
    lines += ['build app: cc x1.o x2.o $', '    x3.o long.o || order_only.stamp',
              'build order_only.stamp: phony', 'build all: phony app', 'default all']
    return '\n'.join(lines) + '\n'


def run(order, jobs=2, durations=None):
    edges, defaults = ninja_schedule.parse_manifest(manifest(order))
    return ninja_schedule.simulate(edges, durations or ninja_schedule.parse_log(LOG), jobs, defaults)


class Schedule(unittest.TestCase):
    def test_the_long_step_last_leaves_a_core_idle(self):
        # 0-1 x1, x2; 1-2 x3 and 1-6 long; app 6-6.5
        wall, total, _ = run(['x1', 'x2', 'x3', 'long'])
        self.assertAlmostEqual(wall, 6.5)
        self.assertAlmostEqual(total, 8.5)

    def test_the_long_step_first_fills_both_cores(self):
        # long 0-5; x1 0-1, x2 1-2, x3 2-3; app 5-5.5
        wall, total, starts = run(['long', 'x1', 'x2', 'x3'])
        self.assertAlmostEqual(wall, 5.5)
        self.assertAlmostEqual(total, 8.5)
        self.assertEqual(sorted(starts.values()), [0.0, 0.0, 1.0, 2.0, 5.0])

    def test_one_job_is_the_sum(self):
        wall, total, _ = run(['x1', 'long', 'x2', 'x3'], jobs=1)
        self.assertAlmostEqual(wall, 8.5)
        self.assertAlmostEqual(total, 8.5)

    def test_a_step_missing_from_the_log_counts_zero(self):
        durations = ninja_schedule.parse_log(LOG)
        del durations['long.o']
        wall, total, _ = run(['x1', 'x2', 'x3', 'long'], durations=durations)
        self.assertAlmostEqual(wall, 2.5)  # x1, x2 0-1; x3, long 1-2; app 2-2.5
        self.assertAlmostEqual(total, 3.5)

    def test_escaped_paths_and_continuations(self):
        edges, _ = ninja_schedule.parse_manifest('build dir/with$ space.o: cc a$:b.cpp $\n    c.h\n')
        self.assertEqual(edges, [(['dir/with space.o'], 'cc', ['a:b.cpp', 'c.h'])])
        self.assertEqual(ninja_schedule.parse_log(LOG)['dir/with space.o'], 2.0)


if __name__ == '__main__':
    unittest.main()
