#!/usr/bin/python3
"""Tests of wordcount.py: it counts what a reader sees and fails on a long model page or a long
road to the first exercise. Each case writes a small tree and runs the checker as ctest does.
Run: /usr/bin/python3 docs/tools/test_wordcount.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"

INDEX = """\
# Order

1. [Idea](../README.md)
2. [Model](models/one.md)
3. [Exercises](exercises/README.md)
4. [After](after.md)
"""


class WordCount(unittest.TestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="wordcount-")
        self.write("CMakeLists.txt", "project(x)\n")
        self.write("docs/README.md", INDEX)
        self.write("README.md", "one two three\n")
        self.write("docs/models/one.md", "word " * 10)
        self.write("docs/exercises/README.md", "word " * 5000)
        self.write("docs/after.md", "word " * 5000)

    def tearDown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def write(self, rel: str, text: str) -> None:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def run_tool(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, os.path.join(TOOLS, "wordcount.py"), "--root", self.root, *args],
                              capture_output=True, text=True)

    def test_counts_up_to_the_first_exercise_without_markers_or_link_targets(self) -> None:
        self.write("docs/models/one.md", "seven<!--fig quick x y 1 rps--> [words](../../far/away.md) " * 3)
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("     6  docs/models/one.md", done.stdout)
        # docs/README.md 10 + README.md 3 + the model 6; the exercises and after.md are not counted
        self.assertIn("    19  before the first exercise (docs/exercises/README.md)", done.stdout)

    def test_a_long_model_page_fails(self) -> None:
        self.write("docs/models/one.md", "word " * 1501)
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("docs/models/one.md: 1501 words, more than a model page's 1500", done.stderr)

    def test_a_long_road_to_the_first_exercise_fails(self) -> None:
        done = self.run_tool("--order-limit", "20")
        self.assertEqual(done.returncode, 1)
        self.assertIn("words before the first exercise, more than 20", done.stderr)


if __name__ == "__main__":
    unittest.main()
