"""scripts/budgets.py: each budget fails on a made-up repository that exceeds it, naming the file
and the figure; what is owed passes while it does not grow and fails once it shrank; the squeezed
check tells a statement doing two things from the commas and braces of ordinary C++."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import budgets  # noqa: E402


def lines(n, indent="    "):
    return "".join(f"{indent}x{i} = {i}\n" for i in range(n))


class Repo:
    """A made-up repository in a temporary folder, with the folders the budgets read."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for folder in ("harness/cmharness/tools", "common/src", "servers/src") + \
                tuple(f"{m}/src" for m in budgets.MODELS):
            os.makedirs(os.path.join(self.root, folder))

    def write(self, path, text):
        with open(os.path.join(self.root, path), "w") as f:
            f.write(text)

    def run(self, owed=None):
        out = io.StringIO()
        saved = budgets.OWED
        budgets.OWED = owed or {}
        try:
            with contextlib.redirect_stdout(out):
                status = budgets.main(["--root", self.root])
        finally:
            budgets.OWED = saved
        return status, out.getvalue()


class Budgets(unittest.TestCase):
    def setUp(self):
        self.repo = Repo()
        self.addCleanup(self.repo.tmp.cleanup)

    def test_an_empty_repository_holds_every_budget(self):
        self.assertEqual(self.repo.run()[0], 0)

    def test_a_model_over_400_lines_fails_with_its_figure(self):
        self.repo.write("libuv_callbacks/src/connection.cpp", "int x;\n" * 300)
        self.repo.write("libuv_callbacks/src/server.cpp", "int y;\n" * 101)
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("libuv_callbacks/src: model-lines 401, over budget 400", out)

    def test_the_database_files_count_apart_each_within_150_lines(self):
        self.repo.write("uring_coro/src/connection.cpp", "int x;\n" * 400)
        self.repo.write("uring_coro/src/db.cpp", "int y;\n" * 150)
        self.repo.write("uring_coro/src/db.hpp", "int z;\n" * 150)
        self.assertEqual(self.repo.run()[0], 0, "400 + two database files of 150 each hold")
        self.repo.write("uring_coro/src/db.cpp", "int y;\n" * 151)
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("uring_coro/src/db.cpp: db-lines 151, over budget 150", out)

    def test_a_tool_over_300_lines_fails(self):
        self.repo.write("harness/cmharness/tools/cost.py", "x = 1\n" * 301)
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("harness/cmharness/tools/cost.py: tool-lines 301, over budget 300", out)

    def test_the_harness_over_8500_lines_fails_its_tests_left_out(self):
        os.makedirs(os.path.join(self.repo.root, "harness/tests"))
        self.repo.write("harness/cmharness/core.py", "x = 1\n" * 5000)
        self.repo.write("harness/cmharness/tools/a.py", "x = 1\n" * 200)
        self.repo.write("harness/tool", "#!/usr/bin/python3\n" + "x = 1\n" * 3299)
        self.repo.write("harness/tests/test_core.py", "x = 1\n" * 9000)
        self.assertEqual(self.repo.run()[0], 0, "8,500 lines hold; the tests are not counted")
        self.repo.write("harness/tool", "#!/usr/bin/python3\n" + "x = 1\n" * 3300)
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("harness: harness-lines 8501, over budget 8500", out)

    def test_a_python_function_over_80_lines_fails_and_one_of_80_passes(self):
        self.repo.write("harness/cmharness/ok.py", "def fine():\n" + lines(79))
        self.assertEqual(self.repo.run()[0], 0)
        self.repo.write("harness/cmharness/long.py", "def long_one():\n" + lines(80))
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("harness/cmharness/long.py:long_one: function 81, over budget 80", out)

    def test_a_cxx_function_over_80_lines_fails_inside_a_namespace_and_a_class(self):
        body = "".join(f"  int v{i} = {i};\n" for i in range(78))
        self.repo.write("common/src/a.cpp", "namespace cm {\nvoid Loop::fine() {\n" + body + "}\n}\n")
        self.assertEqual(self.repo.run()[0], 0)
        self.repo.write("common/src/b.cpp", "namespace cm {\nstruct S {\n  int run(int a) const {\n"
                        + body + "  if (a) { return 1; }\n  return 0;\n}\n};\n}\n")
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("common/src/b.cpp:run: function 82, over budget 80", out)

    def test_owed_passes_unchanged_fails_grown_and_asks_to_be_lowered_when_shrunk(self):
        self.repo.write("uring_coro/src/server.cpp", "int x;\n" * 409)
        owed = {("model-lines", "uring_coro/src"): 409}
        self.assertEqual(self.repo.run(owed), (0, self.repo.run(owed)[1]))
        self.repo.write("uring_coro/src/server.cpp", "int x;\n" * 410)
        self.assertIn("it grew", self.repo.run(owed)[1])
        self.repo.write("uring_coro/src/server.cpp", "int x;\n" * 399)
        status, out = self.repo.run(owed)
        self.assertEqual(status, 1)
        self.assertIn("lower the entry in OWED to 399 (or remove it: within budget)", out)

    def test_an_owed_entry_nothing_measures_fails(self):
        status, out = self.repo.run({("function", "servers/src/gone.cpp:main"): 145})
        self.assertEqual(status, 1)
        self.assertIn("not measured: remove the entry", out)

    def test_a_squeezed_statement_fails_with_its_line(self):
        self.repo.write("libuv_callbacks/src/c.cpp",
                        "namespace cm {\nbool C::f(int n) {\n  if (n < 0) return close(), false;\n"
                        "  return true;\n}\n}\n")
        status, out = self.repo.run()
        self.assertEqual(status, 1)
        self.assertIn("libuv_callbacks: squeezed 1, over budget 0", out)
        self.assertIn("libuv_callbacks/src/c.cpp:3: if (n < 0) return close(), false", out)

    def test_tests_are_not_held_to_the_squeezed_budget(self):
        os.makedirs(os.path.join(self.repo.root, "common/tests"))
        self.repo.write("common/tests/t.cpp", "void t() {\n  a(), b();\n}\n")
        self.assertEqual(self.repo.run()[0], 0)


class Squeezed(unittest.TestCase):
    def hits(self, body):
        src = budgets.without_comments_and_strings("void f() {\n" + body + "\n}\n")
        found = budgets.cxx_functions(src)
        self.assertEqual(len(found), 1)
        at = found[0][3]
        inner = src[at + 1:budgets.matching_brace(src, at)]
        return [text for _, text in budgets.statements(inner) if budgets.squeezed(text)]

    def test_each_squeezed_form_is_found(self):
        for body in ("a(), b();", "x = 1, y();", "return outcome_ = o, true;", "return (void)stop(&t);",
                     "if (!w) return (void)stop(&t);", "ok ? serve() : linger();",
                     "done ? void() : on_deadline(&t);", "post([&] { out = o, c.cancel(); });",
                     "case 1: return a = b, true;"):
            with self.subTest(body=body):
                self.assertEqual(len(self.hits(body)), 1, body)

    def test_ordinary_commas_braces_and_conditionals_are_not_squeezed(self):
        for body in ("int a = 1, b = 2;", "std::map<int, int> m;", "auto [a, b] = pair();",
                     "std::vector<int> v{1, 2, 3};", "f(a, b);", "return {a, b};",
                     "for (int i = 0, j = 1; i < j; ++i, --j) g(i, j);", "x = ok ? a : b;",
                     "return ok ? serve() : linger();", "const auto v = T{1, 2};",
                     "for (auto e : {EMFILE, ENFILE}) EXPECT_GT(backoff(e), 0) << e;",
                     "// a(), b();\n\"a(), b();\";"):
            with self.subTest(body=body):
                self.assertEqual(self.hits(body), [], body)


class TheRepository(unittest.TestCase):
    def test_every_budget_holds_or_is_owed_here(self):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = budgets.main(["--root", root])
        self.assertEqual(status, 0, out.getvalue())


if __name__ == "__main__":
    unittest.main()
