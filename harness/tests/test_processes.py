"""cmharness.processes.run: a child run to its end, its output captured, stopped when too slow."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness import processes  # noqa: E402


class Run(unittest.TestCase):
    def test_output_status_and_cpu(self):
        done = processes.run(["sh", "-c", "echo out; echo err >&2; i=0; "
                              "while [ $i -lt 20000 ]; do i=$((i+1)); done"])
        self.assertEqual(done.returncode, 0)
        self.assertEqual(done.stdout, "out\n")
        self.assertEqual(done.stderr, "err\n")
        self.assertGreater(done.wall_s, 0)
        self.assertGreater(done.cpu_s, 0)  # the loop used some CPU, however little
        self.assertNotIn(done.argv, [p.args for p in processes._STARTED.values()])

    def test_failure_names_the_command_and_its_stderr(self):
        with self.assertRaises(RuntimeError) as e:
            processes.run(["sh", "-c", "echo broken >&2; exit 3"])
        self.assertIn("exit 3", str(e.exception))
        self.assertIn("broken", str(e.exception))

    def test_failure_allowed_without_check(self):
        self.assertEqual(processes.run(["sh", "-c", "exit 2"], check=False).returncode, 2)

    def test_pinned(self):
        cpu = sorted(os.sched_getaffinity(0))[-1]
        done = processes.run(["sh", "-c", "grep Cpus_allowed_list /proc/self/status"], [cpu])
        self.assertEqual(done.stdout.split()[-1], str(cpu))

    def test_timeout_stops_the_child(self):
        with self.assertRaises(RuntimeError) as e:
            processes.run(["sleep", "30"], timeout=0.2)
        self.assertIn("still running after 0.2 s", str(e.exception))
        self.assertNotIn(["sleep", "30"], [p.args for p in processes._STARTED.values()])


if __name__ == "__main__":
    unittest.main()


class Shown(unittest.TestCase):
    def test_a_command_as_a_reader_types_it(self):
        from cmharness import ROOT
        argv = [os.path.join(ROOT, "build", "bin", "cm-load"), "http://127.0.0.1:40123/delay/100",
                "--json", "/tmp/x y/out.json"]
        self.assertEqual(processes.shown(argv, cpus=(1,), replace=[("127.0.0.1:40123", "127.0.0.1:PORT"),
                                                                  ("/tmp/x y/out.json", "out.json")]),
                         "taskset -c 1 build/bin/cm-load http://127.0.0.1:PORT/delay/100 --json out.json")

    def test_unpinned_and_outside_the_repository_left_as_is(self):
        self.assertEqual(processes.shown(["/usr/bin/wrk", "-t1", 2]), "/usr/bin/wrk -t1 2")
