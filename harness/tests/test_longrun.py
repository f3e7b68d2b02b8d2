"""cmharness.longrun: cm-load's progress lines, the watch on a server's /proc (called, or on its
own thread) and its end when the server is gone, the page's skeleton and its CSV. No server is
started here."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

from cmharness import longrun  # noqa: E402
from cmharness.servers import Readings  # noqa: E402


class ParseProgress(unittest.TestCase):
    def test_a_progress_line(self):
        p = longrun.parse_progress("cm-load  12s run      rps     50895  open 10000/10000  errors 3")
        self.assertEqual(p, longrun.Progress(phase="run", rps=50895, open=10000, errors=3))

    def test_the_connect_phase_with_its_count(self):
        p = longrun.parse_progress("cm-load   1s connect  rps         0  open 412/10000  errors 0"
                                   "  connected 412/10000")
        self.assertEqual((p.phase, p.open), ("connect", 412))

    def test_another_line(self):
        self.assertIsNone(longrun.parse_progress("cm-load: opened 50 of 50 connections in 0.00 s"))


class FakeServer:
    pid = os.getpid()  # open_fds() reads this process's descriptors

    def __init__(self):
        self.alive = True

    def readings(self):
        if not self.alive:
            raise RuntimeError("asio_coro exited (killed by signal 9)")
        return Readings(1.5, 4096, 4096, 3, 0, 0)


class Watch(unittest.TestCase):
    def test_once_a_second_when_called(self):
        watch = longrun.Watch(FakeServer(), t0=10.0)
        self.assertIsNone(watch(10.5))
        s = watch(11.25)
        self.assertIsNone(watch(11.9))  # the same second
        self.assertEqual((s.t_s, s.readings.rss_kib), (1.25, 4096))
        self.assertGreater(s.fds, 0)
        self.assertEqual(watch.samples, [s])

    def test_a_server_gone_ends_the_watch(self):
        server = FakeServer()
        watch = longrun.Watch(server, t0=0.0)
        watch(1.0)
        server.alive = False
        self.assertIsNone(watch(2.0))
        self.assertTrue(watch.died)
        server.alive = True
        self.assertIsNone(watch(3.0))
        self.assertEqual(len(watch.samples), 1)

    def test_on_its_own_thread(self):
        watch = longrun.Watch(FakeServer()).start()
        time.sleep(1.3)
        elapsed = watch.stop()
        self.assertGreaterEqual(elapsed, 1.3)
        self.assertEqual(len(watch.samples), 1)
        self.assertEqual(round(watch.samples[0].t_s), 1)


class Page(unittest.TestCase):
    def test_with_and_without_a_note(self):
        path = os.path.join(tempfile.mkdtemp(), "summary.md")
        longrun.write_page(path, "T", "n", ["| a |"], "![c](c.png)", "Read.", ["## Conditions"])
        with open(path) as f:
            self.assertEqual(f.read(), "# T\n\n> n\n\n| a |\n\n![c](c.png)\n\nRead.\n\n"
                                       "## Conditions\n")
        longrun.write_page(path, "T", "", [], "c", "r", [])
        with open(path) as f:
            self.assertEqual(f.read(), "# T\n\n\nc\n\nr\n\n")

    def test_csv(self):
        path = os.path.join(tempfile.mkdtemp(), "x.csv")
        longrun.write_csv(path, ["t", "n"], [(1, 2.5), (2, "x")])
        with open(path) as f:
            self.assertEqual(f.read(), "t,n\n1,2.5\n2,x\n")


if __name__ == "__main__":
    unittest.main()
