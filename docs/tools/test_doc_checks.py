#!/usr/bin/python3
"""Tests of check_quotes.py and check_links.py: each check passes a good tree and fails a bad one.

Every case builds a small repository in a temporary folder and runs the checker on it as ctest
does (a child /usr/bin/python3 with --root), so what is tested is the exit status and the message
a reader gets. Run: /usr/bin/python3 docs/tools/test_doc_checks.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"

SOURCE = """\
#include <variant>

namespace {

/// Picks what a plan does.
bool execute(const Plan& plan) {
  // [plan-visit]
  return std::visit(
      [&](const auto& step) {
        return step.run();  // one line per arm
      },
      plan);
  // [plan-visit]
}

// [outer]
int a = 1;
// [inner]
int b = 2;
// [inner]
// [outer]

}  // namespace
"""

QUOTE = """\
```cpp
// model/src/connection.cpp, [plan-visit]
return std::visit(
    [&](const auto& step) {
      return step.run();  // one line per arm
    },
    plan);
```
"""


class Tree:
    """A throwaway repository: CMakeLists.txt, docs/, a source, optionally under git."""

    def __init__(self, with_git: bool = False):
        self.root = tempfile.mkdtemp(prefix="doc-checks-")
        self.write("CMakeLists.txt", "project(x)\n")
        self.write("model/src/connection.cpp", SOURCE)
        self.write("README.md", "# x\n")
        self.git = with_git and shutil.which("git") is not None
        if self.git:
            self.run_git("init", "-q")

    def run_git(self, *args: str) -> None:
        subprocess.run(["git", "-C", self.root, *args], check=True, capture_output=True)

    def write(self, rel: str, text: str) -> None:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def read(self, rel: str) -> str:
        with open(os.path.join(self.root, rel), encoding="utf-8") as f:
            return f.read()

    def check(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        if self.git:
            self.run_git("add", "-A")
        return subprocess.run(
            [PYTHON, os.path.join(TOOLS, tool), "--root", self.root, *args],
            capture_output=True,
            text=True,
        )

    def remove(self) -> None:
        shutil.rmtree(self.root)


class QuoteTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.remove)

    def quotes(self, *args: str) -> subprocess.CompletedProcess:
        return self.tree.check("check_quotes.py", *args)

    def test_a_faithful_quote_passes_whatever_its_indentation(self):
        indented = textwrap.indent(QUOTE, "   ")  # inside a list item
        self.tree.write("docs/page.md", "# Page\n\n" + QUOTE + "\n- an item:\n\n" + indented)
        r = self.quotes()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 quoted blocks", r.stdout)

    def test_a_changed_source_line_fails_with_page_line_source_marker_and_diff(self):
        self.tree.write("docs/page.md", "# Page\n\nText.\n\n" + QUOTE)
        self.tree.write("model/src/connection.cpp", SOURCE.replace("one line per arm", "one arm"))
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/page.md:5:", r.stderr)
        self.assertIn("model/src/connection.cpp [plan-visit]", r.stderr)
        self.assertIn("@@ docs/page.md:8 / model/src/connection.cpp:9 @@", r.stderr)
        self.assertIn("-      return step.run();  // one line per arm", r.stderr)
        self.assertIn("+      return step.run();  // one arm", r.stderr)
        self.assertIn("--fix", r.stderr)

    def test_fix_rewrites_the_drifted_quote_and_only_it(self):
        prose = "# Page\n\n```sh\nmake test\n```\n\n"
        self.tree.write("docs/page.md", prose + QUOTE + "\nAfter.\n")
        self.tree.write("model/src/connection.cpp", SOURCE.replace("one line per arm", "one arm"))
        r = self.quotes("--fix")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("docs/page.md:7: rewrote", r.stdout)
        page = self.tree.read("docs/page.md")
        self.assertEqual(page, prose + QUOTE.replace("one line per arm", "one arm") + "\nAfter.\n")
        self.assertEqual(self.quotes().returncode, 0)

    def test_fix_keeps_a_quote_inside_a_list_item_indented(self):
        self.tree.write("docs/page.md", "- item\n\n" + textwrap.indent(QUOTE, "  "))
        self.tree.write("model/src/connection.cpp", SOURCE.replace("one line per arm", "one arm"))
        self.assertEqual(self.quotes("--fix").returncode, 0)
        self.assertIn("\n        return step.run();  // one arm\n", self.tree.read("docs/page.md"))

    def test_a_missing_marker_fails(self):
        self.tree.write("docs/page.md", QUOTE.replace("[plan-visit]", "[plan-visit-gone]"))
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no marker line `// [plan-visit-gone]`", r.stderr)

    def test_a_missing_file_fails(self):
        self.tree.write("docs/page.md", QUOTE.replace("model/src/connection.cpp", "model/src/gone.cpp"))
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("model/src/gone.cpp does not exist", r.stderr)

    def test_a_marker_that_does_not_close_or_repeats_fails(self):
        self.tree.write("docs/page.md", QUOTE)
        once = SOURCE.replace("  // [plan-visit]\n}", "}")
        self.tree.write("model/src/connection.cpp", once)
        self.assertIn("a region needs an opening and a closing one", self.quotes().stderr)
        self.tree.write("model/src/connection.cpp", SOURCE + "// [plan-visit]\n")
        self.assertIn("a name marks one region", self.quotes().stderr)

    def test_a_marker_alone_finds_its_file_and_an_ambiguous_one_fails(self):
        self.tree.write("docs/page.md", QUOTE.replace("model/src/connection.cpp, ", ""))
        self.assertEqual(self.quotes().returncode, 0)
        self.tree.write("other/x.cpp", "// [plan-visit]\nint x;\n// [plan-visit]\n")
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("name the file", r.stderr)

    def test_a_whole_file_quote(self):
        self.tree.write("model/small.cmake", "set(A 1)\n")
        self.tree.write("docs/page.md", "```cmake\n# model/small.cmake\nset(A 1)\n```\n")
        self.assertEqual(self.quotes().returncode, 0)
        self.tree.write("model/small.cmake", "set(A 2)\n")
        self.assertEqual(self.quotes().returncode, 1)

    def test_nested_marker_lines_are_left_out_of_the_outer_quote(self):
        self.tree.write("docs/page.md", "```cpp\n// [outer]\nint a = 1;\nint b = 2;\n```\n")
        r = self.quotes()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_source_line_without_a_marker_fails(self):
        self.tree.write("docs/page.md", QUOTE.replace("[plan-visit]", "execute()"))
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("not `, [marker]`", r.stderr)

    def test_an_unnamed_verbatim_excerpt_fails_and_pseudo_code_passes(self):
        excerpt = "```cpp\nreturn std::visit(\n    return step.run();  // one line per arm\n```\n"
        self.tree.write("docs/page.md", excerpt)
        r = self.quotes()
        self.assertEqual(r.returncode, 1)
        self.assertIn("every line of it is in model/src/connection.cpp", r.stderr)
        self.tree.write("docs/page.md", "```\nread bytes -> session.received(bytes)\nexecute the plan\n```\n")
        self.assertEqual(self.quotes().returncode, 0)


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree(with_git=True)
        self.addCleanup(self.tree.remove)
        self.tree.write("results/quick/results.md", "# Quick\n\n## The table\n")
        self.tree.write("docs/other.md", "# Other page\n\n## How `Block` leaves the loop\n\n<a id=\"sqe\"></a>\n")

    def links(self) -> subprocess.CompletedProcess:
        return self.tree.check("check_links.py")

    def page(self, text: str) -> None:
        self.tree.write("docs/page.md", "# Page\n\n" + text + "\n")

    def test_links_to_files_folders_and_headings_that_exist_pass(self):
        self.page(
            "See [the table](../results/quick/results.md#the-table), [quick](../results/quick/),\n"
            "[block](other.md#how-block-leaves-the-loop), [SQE](other.md#sqe), [top](#page),\n"
            "[web](https://example.org/x) and `model/src/connection.cpp`, `model/src/*.cpp`."
        )
        r = self.links()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_link_to_a_missing_results_file_fails_with_page_and_line(self):
        self.page("Intro.\n\nFrom [the run](../results/slow/results.md).")
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/page.md:5: link `../results/slow/results.md`: no such file", r.stderr)

    def test_a_wrong_anchor_fails_and_suggests(self):
        self.page("[block](other.md#how-block-leaves-a-loop)")
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("did you mean #how-block-leaves-the-loop", r.stderr)

    def test_a_folder_link_to_a_file_fails(self):
        self.page("[x](../results/quick/results.md/)")
        self.assertEqual(self.links().returncode, 1)

    def test_a_path_in_a_code_span_that_is_gone_fails(self):
        self.page("| file | what |\n| --- | --- |\n| `model/src/server.cpp` | the server |")
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/page.md:5: `model/src/server.cpp`: names model/src/server.cpp", r.stderr)

    def test_links_in_code_and_placeholders_are_not_followed(self):
        self.page("`[a](gone.md)` and `results/<profile>/`\n\n```\n[b](gone.md) model/gone.cpp\n```")
        r = self.links()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_file_git_ignores_is_not_a_target(self):
        if not self.tree.git:
            self.skipTest("git is not installed")
        self.tree.write(".gitignore", "*.log\n")
        self.tree.write("results/run.log", "x\n")
        self.page("[log](../results/run.log)")
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("git does not know it", r.stderr)

    def order(self, footers: dict[str, str]) -> None:
        self.tree.write(
            "docs/README.md",
            "# Order\n\n1. [Idea](../README.md)\n2. [Page](page.md)\n3. [Other](other.md)\n",
        )
        self.tree.write("README.md", "# x\n\nNext: [Page](docs/page.md)\n")
        self.page("Body.\n\n" + footers.get("page", "Previous: [Idea](../README.md) · Next: [Other](other.md)"))
        self.tree.write("docs/other.md", "# Other page\n\n" + footers.get("other", "Previous: [Page](page.md)") + "\n")

    def test_previous_and_next_that_follow_the_order_pass(self):
        self.order({})
        r = self.links()
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_next_link_to_the_wrong_page_or_a_missing_one_fails(self):
        self.order({"page": "Previous: [Idea](../README.md) · Next: [Idea](../README.md)"})
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/page.md:5: Next: leads to README.md, but docs/README.md puts docs/other.md there", r.stderr)
        self.order({"other": "Nothing."})
        r = self.links()
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/other.md: no `Previous: [..](page.md)`", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
