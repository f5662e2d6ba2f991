#!/usr/bin/env python3
"""scripts/rule_coverage.py on small trees made here: a rule no test names is reported, a tensor
name is not a rule, a named rule passes, and its list of unreachable rules is kept true."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'rule_coverage.py')
sys.path.insert(0, os.path.dirname(SCRIPT))
import rule_coverage  # noqa: E402


def tree(code, tests):
    """A repository of one header (`code`, plus a raise of every rule the script lists as
    unreachable) and one test file (`tests`)."""
    root = tempfile.mkdtemp(prefix='amsp-rule-coverage-')
    atexit.register(shutil.rmtree, root, True)
    os.makedirs(os.path.join(root, 'include', 'amsp'))
    os.makedirs(os.path.join(root, 'tests'))
    unreachable = ''.join(f'  check(x, "{r}", "why");\n' for r in rule_coverage.UNREACHABLE)
    with open(os.path.join(root, 'include', 'amsp', 'a.hpp'), 'w') as f:
        f.write(code + unreachable)
    with open(os.path.join(root, 'tests', 'test_a.cpp'), 'w') as f:
        f.write(tests)
    return root


def run(root):
    p = subprocess.run([sys.executable, SCRIPT, '--root', root], capture_output=True, text=True)
    return p.returncode, p.stderr


CODE = 'check(n > 0, "comm.new_rule", "n must be positive");\nconst char* t = "attn.q";\n'


class Coverage(unittest.TestCase):
    def test_a_rule_no_test_names_is_reported_with_where_it_is_raised(self):
        rc, err = run(tree(CODE, '// nothing\n'))
        self.assertEqual(rc, 1)
        self.assertIn('comm.new_rule: raised in include/amsp/a.hpp, named by no test', err)
        self.assertNotIn('attn.q', err)  # a tensor name, not a rule

    def test_a_rule_a_test_names_passes(self):
        rc, err = run(tree(CODE, 'CHECK(rule == "comm.new_rule");\n'))
        self.assertEqual((rc, err), (0, ''))

    def test_an_unreachable_rule_a_test_names_must_leave_the_list(self):
        rule = next(iter(rule_coverage.UNREACHABLE))
        rc, err = run(tree(CODE, f'"comm.new_rule" "{rule}"\n'))
        self.assertEqual(rc, 1)
        self.assertIn(f'{rule}: a test names it; take it off UNREACHABLE', err)

    def test_an_unreachable_rule_no_longer_raised_must_leave_the_list(self):
        root = tree(CODE, '"comm.new_rule"\n')
        rule = next(iter(rule_coverage.UNREACHABLE))
        path = os.path.join(root, 'include', 'amsp', 'a.hpp')
        with open(path) as f:
            text = f.read().replace(f'"{rule}"', '"comm.other"')
        with open(path, 'w') as f:
            f.write(text)
        rc, err = run(root)
        self.assertEqual(rc, 1)
        self.assertIn(f'{rule}: on UNREACHABLE but no longer raised', err)


if __name__ == '__main__':
    unittest.main()
