"""cmharness.proc: pure readers of /proc and the CPUs, and how a page says where things ran."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness import proc  # noqa: E402



class PinningLine(unittest.TestCase):
    def test_apart(self):
        self.assertEqual(proc.pinning_line([0], [1, 2, 3], "cm-server", "cm-load"),
                         "cm-server on CPU 0, cm-load on CPU 1-3")

    def test_one_cpu_shared(self):
        self.assertEqual(proc.pinning_line([0], [0], "cm-server", "slowhttptest"),
                         "one CPU: cm-server and slowhttptest share CPU 0")

    def test_default_names(self):
        self.assertEqual(proc.pinning_line([0, 1], [2]), "the server on CPU 0-1, the load on CPU 2")


STAT = """cpu  300 0 100 1000 50 0 0 10 0 0
cpu0 100 0 50 700 40 0 0 5 0 0
cpu1 200 0 50 300 10 0 0 5 0 0
intr 12345
"""


class CpusBusy(unittest.TestCase):
    def test_everything_but_idle_iowait_and_steal_of_the_cpus_asked(self):
        self.assertAlmostEqual(proc.cpus_busy_seconds([1], STAT), 250 / proc.HZ)
        self.assertAlmostEqual(proc.cpus_busy_seconds([0, 1], STAT), 400 / proc.HZ)

    def test_a_cpu_the_machine_has_not_is_an_error(self):
        with self.assertRaises(ValueError):
            proc.cpus_busy_seconds([2], STAT)

    def test_this_machine(self):
        cpus = proc.allowed_cpus()
        self.assertGreater(proc.cpus_busy_seconds(cpus), 0)


if __name__ == "__main__":
    unittest.main()
