#!/usr/bin/python3
"""Tests of check_names.py: it passes a page whose names exist and fails, naming the page, on each
kind of name that does not.

Every case builds a small repository in a temporary folder (git, so the checker sees which files
are the sources) and runs the checker as ctest does: a child /usr/bin/python3 with --root, an
empty --include-dir (so only the tree's own names count) and a --bin-dir of fake tools.
Run: /usr/bin/python3 docs/tools/test_check_names.py
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"

SERVER = """\
// [plan-visit-model]
void serve_connection(Session& session) {
  auto [ec, n] = co_await socket.async_read_some(buffer, as_tuple(deferred));
}
// [plan-visit-model]
"""

TESTS = """\
TEST(Conformance, SlowClientIsLetGo) {}
TEST_P(Hostile, NeverReadingClientIsClosed) {}
"""

HELP = """\
#!/usr/bin/python3
print("usage: tool [--rate R] [--out FILE]")
"""

LISTING = """\
#!/bin/sh
echo "Conformance."
echo "  SlowClientIsLetGo"
echo "Every/Hostile."
echo "  NeverReadingClientIsClosed/0  # GetParam() = blocking"
"""

GOOD = """\
# A page

`serve_connection()` takes a `Session`; the read is `as_tuple(deferred)` at the
`[plan-visit-model]` marker. `SlowClientIsLetGo` and `Hostile.NeverReadingClientIsClosed` show it.
Run `make test`, or `harness/tool --rate 5 --out x.json`, or pass `--rate` alone.
`curl --whatever` is not a project tool. `thread` and `time` are words, not names.
nginx calls it `send_timeout`. <!-- names: send_timeout -->

| file | what it holds |
| --- | --- |
| `model/src/server.cpp` | `serve_connection()`, the `[plan-visit-model]` region |
"""


class Tree:
    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="check-names-")
        self.include = os.path.join(self.root, "include")
        self.bin = os.path.join(self.root, "bin")
        os.makedirs(self.include)
        os.makedirs(self.bin)
        self.write("CMakeLists.txt", "project(x)\n")
        self.write("Makefile", "build:\n\ttrue\ntest: build\n\ttrue\n")
        self.write("model/src/server.cpp", SERVER)
        self.write("model/tests/model_test.cpp", TESTS)
        self.write("harness/tool", HELP, executable=True)
        self.write("docs/README.md", GOOD)
        self.write("bin/model_test", LISTING, executable=True)
        self.write(".gitignore", "bin/\ninclude/\n")
        subprocess.run(["git", "-C", self.root, "init", "-q"], check=True, capture_output=True)

    def write(self, rel: str, text: str, executable: bool = False) -> None:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        if executable:
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def page(self, text: str) -> None:
        self.write("docs/README.md", GOOD + "\n" + text + "\n")

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, os.path.join(TOOLS, "check_names.py"), "--root", self.root,
             "--bin-dir", self.bin, "--include-dir", self.include],
            capture_output=True,
            text=True,
        )

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@unittest.skipUnless(shutil.which("git"), "git is needed to tell the sources")
class CheckNames(unittest.TestCase):
    def setUp(self) -> None:
        self.tree = Tree()

    def tearDown(self) -> None:
        self.tree.close()

    def assertFailsWith(self, page: str, *needles: str) -> None:
        self.tree.page(page)
        done = self.tree.check()
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        for needle in needles:
            self.assertIn(needle, done.stderr)

    def test_a_page_whose_names_all_exist_passes(self) -> None:
        done = self.tree.check()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("every one exists", done.stdout)

    def test_a_renamed_test_fails_naming_the_page_and_line(self) -> None:
        self.assertFailsWith("See `SlowClientIsLetGoInTime`.", "docs/README.md:13:", "SlowClientIsLetGoInTime")

    def test_a_renamed_function_fails(self) -> None:
        self.assertFailsWith("Then `serve_one_connection()` returns.", "serve_one_connection")

    def test_a_test_in_the_sources_that_no_binary_lists_fails(self) -> None:
        self.tree.write("model/tests/model_test.cpp", TESTS + "TEST(Conformance, NotBuilt) {}\n")
        self.assertFailsWith("And `NotBuilt`.", "no test binary lists it")

    def test_a_call_with_arguments_the_code_does_not_pass_fails(self) -> None:
        self.assertFailsWith("It reads with `as_tuple(use_awaitable)`.", "never call it with these arguments")

    def test_a_code_map_row_that_points_at_the_wrong_file_fails(self) -> None:
        self.tree.write("model/src/other.cpp", "void helper() {}\n")
        self.assertFailsWith("| `model/src/server.cpp` | `helper()` |", "points at model/src/server.cpp, which has no helper")

    def test_an_unknown_marker_fails(self) -> None:
        self.assertFailsWith("The `[plan-visit-other]` region.", "no source file has the marker")

    def test_a_flag_its_tool_does_not_have_fails(self) -> None:
        self.assertFailsWith("Run `harness/tool --speed 3`.", "harness/tool --help has no --speed")

    def test_a_lone_flag_no_tool_has_fails(self) -> None:
        self.assertFailsWith("Pass `--speed`.", "no project tool's --help has --speed")

    def test_an_unknown_make_target_fails(self) -> None:
        self.assertFailsWith("Run `make bench`.", "no target bench")

    def test_a_commit_hash_fails(self) -> None:
        self.assertFailsWith("Since `4b0477e` it waits.", "a commit hash")

    def test_letting_through_a_name_the_sources_define_fails(self) -> None:
        self.assertFailsWith("<!-- names: serve_connection -->", "lets through a name the sources define")


if __name__ == "__main__":
    unittest.main()
