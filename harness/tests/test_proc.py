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


if __name__ == "__main__":
    unittest.main()
