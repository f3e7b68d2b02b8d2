"""Unit tests of harness/trace-scene: the folder's README.md, written from README.json (the command,
its provenance and each model's check) with made-up data. Nothing is started here (the scene itself
runs in docs/exercises/12-where-does-it-wait.md's checks).

    cd harness/tests && /usr/bin/python3 -m unittest test_trace_scene -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness.tools import trace_scene as ts  # noqa: E402

DOC = {"tool": "harness/trace-scene", "command": "harness/trace-scene",
       "provenance": {"recorded_utc": "2026-12-04 17:41:00 UTC",
                      "commit": {"head": "653d965aaaabbbbcccc", "dirty": True,
                                 "changed_paths": 2}},
       "scene": list(ts.SCENE), "checks": {"blocking": "", "asio_coro": "answers [200, 0]"}}


class TheIndex(unittest.TestCase):
    def test_a_row_per_model_with_its_files_and_its_check(self):
        text = ts.index(DOC)
        self.assertIn("| blocking | [blocking.png](blocking.png) | [blocking.md](blocking.md) | "
                      "[blocking.json](blocking.json) | as expected |\n", text)
        self.assertTrue(text.endswith("| asio_coro | [asio_coro.png](asio_coro.png) | "
                                      "[asio_coro.md](asio_coro.md) | [asio_coro.json]"
                                      "(asio_coro.json) | FAILED: answers [200, 0] |\n"))

    def test_where_it_comes_from(self):
        text = ts.index(DOC)
        self.assertTrue(text.startswith("# One scene, traced inside every model\n\nWritten by "
                                        "`harness/trace-scene` on 2026-12-04 17:41:00 UTC at "
                                        "commit 653d965aaaab (with uncommitted changes: 2 paths "
                                        "outside results/): six connections"), text[:300])
        self.assertIn("[`README.json`](README.json)", text)


if __name__ == "__main__":
    unittest.main()
