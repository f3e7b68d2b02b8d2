#!/usr/bin/python3
"""Tests of check_exercises.py: it passes a working exercise and fails each way one can break.

Every case builds a small repository in a temporary folder -- docs/exercises/ with an index and
one page, a fake `build/bin/cm-server` (a Python script that listens on --port 0 and writes
--port-file), a fake tool under harness/ -- and runs the checker on it as ctest does (a child
/usr/bin/python3 with --root and --bin-dir), so what is tested is the exit status and the message
a reader gets. No real server is started. Run: /usr/bin/python3 docs/tools/test_check_exercises.py
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"

FAKE_SERVER = f"""\
#!{PYTHON}
# A stand-in for cm-server: --list-models, --help, and a listener on --port 0 that answers
# nothing, writes its port and its pid, and runs until SIGTERM.
import os, socket, sys, time
args = sys.argv[1:]
if "--list-models" in args:
    print("blocking           fake")
    sys.exit(0)
if "--help" in args:
    print("--model --port --port-file --threads")
    sys.exit(0)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("fake cm-server listening", flush=True)
open(args[args.index("--port-file") + 1], "w").write(str(s.getsockname()[1]) + chr(10))
open(os.environ.get("FAKE_PID_FILE", "/dev/null"), "w").write(str(os.getpid()))
while True:
    time.sleep(1)
"""

FAKE_TOOL = f"""\
#!{PYTHON}
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--port")
ap.add_argument("--connections")
args = ap.parse_args()
print(f"tool: {{args.connections}} connections to {{args.port}}")
"""

INDEX = """\
# Exercises

1. [First](01-first.md) -- the only one.

---

Previous: [x](../x.md)
"""


GOOD_SHEET = """\
The answers: [answers/01-first.md](answers/01-first.md).

<!-- sheet
predict ceiling: the thread ceiling of 4 workers on /delay/100
measure rps: the rps you measured | tests ceiling
-->

<!-- reference: the page's command, full size
server srv: build/bin/cm-server --model blocking
run: harness/tool --port {srv} --connections 40
expect: tool: (?P<rps>\\d+) connections
-->

This project's run: [results/exercises/01-first.txt](../../results/exercises/01-first.txt)."""

ANSWERS = """\
# Exercise 1: the answers

- **ceiling**: 40 -- the thread ceiling of 4 workers on /delay/100
"""

REFERENCE = """\
# a reference result
exercise: 01-first
ceiling: 40
rps: 40
"""


def page(check: str, commands: str = "harness/tool --port 8080 --connections 2", sheet: str = GOOD_SHEET) -> str:
    return textwrap.dedent(
        """\
        # Exercise 1

        ```sh
        {commands}
        ```

        {sheet}

        {check}

        ---

        [All exercises](README.md)
        """
    ).format(commands=commands, check=check, sheet=sheet)


GOOD_CHECK = """\
<!-- check: the tool answers
server srv: build/bin/cm-server --model blocking
run: harness/tool --port {srv} --connections 3
expect: tool: (?P<n>\\d+) connections to (?P<port>\\d+)
value: n == 3
value: port > 0
expect srv: fake cm-server listening
-->"""


def running(pid: int) -> bool:
    """Whether the process is alive (not gone, not a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read()
    except OSError:
        return False


class Tree:
    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="exercise-checks-")
        self.write("CMakeLists.txt", "project(x)\n")
        self.write("docs/exercises/README.md", INDEX)
        self.write("build/bin/cm-server", FAKE_SERVER, executable=True)
        self.write("harness/tool", FAKE_TOOL, executable=True)
        self.write("results/exercises/01-first.txt", REFERENCE)
        self.write("docs/exercises/answers/01-first.md", ANSWERS)
        self.pid_file = os.path.join(self.root, "server.pid")

    def write(self, rel: str, text: str, executable: bool = False) -> None:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        if executable:
            os.chmod(path, 0o755)

    def check(self) -> tuple[int, str]:
        done = subprocess.run(
            [PYTHON, os.path.join(TOOLS, "check_exercises.py"), "--root", self.root,
             "--bin-dir", os.path.join(self.root, "build", "bin")],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "FAKE_PID_FILE": self.pid_file},
        )
        return done.returncode, done.stdout + done.stderr

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class CheckExercisesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tree = Tree()

    def tearDown(self) -> None:
        self.tree.remove()

    def expect_fail(self, check: str, message: str, commands: str | None = None) -> None:
        self.tree.write("docs/exercises/01-first.md",
                        page(check) if commands is None else page(check, commands))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn(message, out)

    def test_a_working_exercise_passes_and_its_server_is_stopped(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        code, out = self.tree.check()
        self.assertEqual(code, 0, out)
        self.assertIn("1 checks passed", out)
        with open(self.tree.pid_file) as f:
            pid = int(f.read())
        self.assertFalse(running(pid), "the checker left its server running")

    def test_output_that_does_not_show_what_the_page_says_fails(self) -> None:
        self.expect_fail(GOOD_CHECK.replace("connections to", "connexions to"), "matches /tool: (?P<n>")

    def test_a_comparison_that_does_not_hold_fails(self) -> None:
        self.expect_fail(GOOD_CHECK.replace("value: n == 3", "value: n >= 4"), "value: n >= 4 is false (3 >= 4)")

    def test_a_command_that_fails_fails(self) -> None:
        self.expect_fail(GOOD_CHECK.replace("--connections 3", "--conections 3"), "exited 2")

    def test_a_command_that_never_ends_is_stopped_and_fails(self) -> None:
        slow = GOOD_CHECK.replace("run: harness/tool", "timeout: 0.5\nrun: sleep 30; harness/tool")
        started = time.monotonic()
        self.expect_fail(slow, "did not end within 0.5 s")
        self.assertLess(time.monotonic() - started, 20)

    def test_a_flag_the_student_is_told_to_type_must_exist(self) -> None:
        self.expect_fail(GOOD_CHECK, "harness/tool --help does not know --delay",
                         commands="harness/tool --port 8080 --delay 5")
        self.expect_fail(GOOD_CHECK, "`harness/gone` does not exist", commands="harness/gone --port 8080")

    @unittest.skipUnless(glob.glob("/usr/lib/postgresql/*/bin/psql"), "PostgreSQL is not installed")
    def test_a_block_with_a_database_gets_its_conninfo_and_leaves_nothing_running(self) -> None:
        psql = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1]
        saved = os.path.join(self.tree.root, "conninfo")
        check = GOOD_CHECK.replace("<!-- check: the tool answers\n", f"""<!-- check: the tool answers
database db: 20
run: echo {{db}} > {saved}; {psql} {{db}} -XAtc 'SELECT count(*) FROM world'
expect: ^(?P<rows>\\d+)$
value: rows == 20
""")
        self.tree.write("docs/exercises/01-first.md", page(check))
        code, out = self.tree.check()
        self.assertEqual(code, 0, out)
        with open(saved) as f:
            host = f.read().split()[0].partition("=")[2]  # host=/tmp/cm-pg-XXXX/socket
        self.assertTrue(host.endswith("/socket"), host)
        self.assertFalse(os.path.exists(os.path.dirname(host)), "the checker left its database")

    def test_a_database_line_takes_a_row_count_or_nothing(self) -> None:
        self.expect_fail(GOOD_CHECK.replace("run:", "database db: many\nrun:", 1),
                         "database db: the rows of World, or nothing, not `many`")

    def test_a_page_without_a_check_fails(self) -> None:
        self.expect_fail("No check here.", "nothing keeps this exercise alive")

    def test_a_page_the_index_does_not_list_fails(self) -> None:
        self.tree.write("docs/exercises/02-second.md", page(GOOD_CHECK))
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("does not list docs/exercises/02-second.md", out)

    def test_a_page_without_an_answer_sheet_fails(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK, sheet=""))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("no <!-- sheet --> block", out)

    def test_a_sheet_that_tests_no_prediction_of_its_own_fails(self) -> None:
        sheet = GOOD_SHEET.replace("tests ceiling", "tests ceiling_of_threads")
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK, sheet=sheet))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("tests ceiling_of_threads, not a prediction of the sheet", out)

    def test_answers_in_the_page_a_student_reads_fail(self) -> None:
        sheet = GOOD_SHEET.replace("on /delay/100\n", "on /delay/100 | answer 40\n")
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK, sheet=sheet))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("answers go in docs/exercises/answers/01-first.md", out)

    def test_a_page_without_its_answers_file_or_its_link_fails(self) -> None:
        self.tree.write("docs/exercises/01-first.md",
                        page(GOOD_CHECK, sheet=GOOD_SHEET.replace("(answers/01-first.md)", "")))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("does not link its answers", out)
        os.unlink(os.path.join(self.tree.root, "docs/exercises/answers/01-first.md"))
        code, out = self.tree.check()
        self.assertIn("no docs/exercises/answers/01-first.md", out)

    def test_a_malformed_sheet_line_fails(self) -> None:
        sheet = GOOD_SHEET.replace("predict ceiling:", "guess ceiling:")
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK, sheet=sheet))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("not `predict|measure KEY", out)

    def test_a_missing_reference_result_fails(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        os.remove(os.path.join(self.tree.root, "results", "exercises", "01-first.txt"))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("no results/exercises/01-first.txt: run docs/tools/check_exercises.py --reference 01", out)

    def test_a_reference_result_of_another_sheet_fails(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        self.tree.write("results/exercises/01-first.txt", REFERENCE.replace("rps: 40", "speed: 40"))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("that the sheet of docs/exercises/01-first.md does not ask", out)

    def test_a_reference_that_does_not_grade_clean_fails(self) -> None:
        """A committed reference whose measurement disagrees with the page's answers: the page's
        prediction or its method is wrong, and the test says to fix one and run it again."""
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        self.tree.write("results/exercises/01-first.txt", REFERENCE.replace("rps: 40", "rps: 20"))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("results/exercises/01-first.txt does not grade clean against docs/exercises/01-first.md "
                      "(0 wrong, 1 disagree, 0 not from a run)", out)
        self.assertIn("rps = 20: DISAGREES with your ceiling", out)

    def test_a_reference_block_that_measures_no_sheet_key_fails(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK, sheet=GOOD_SHEET.replace("?P<rps>", "?P<speed>")))
        code, out = self.tree.check()
        self.assertEqual(code, 1, out)
        self.assertIn("no expect: of its reference blocks captures (?P<rps>...)", out)

    def test_reference_runs_the_full_size_block_and_writes_the_graded_sheet(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        os.remove(os.path.join(self.tree.root, "results", "exercises", "01-first.txt"))
        done = subprocess.run(
            [PYTHON, os.path.join(TOOLS, "check_exercises.py"), "--root", self.tree.root,
             "--bin-dir", os.path.join(self.tree.root, "build", "bin"), "--reference", "01"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        with open(os.path.join(self.tree.root, "results", "exercises", "01-first.txt")) as f:
            written = f.read()
        self.assertIn("exercise: 01-first", written)
        self.assertIn("\nceiling: 40\n", written)
        self.assertIn("\nrps: 40\n", written)
        self.assertIn("#  rps = 40: agrees with your ceiling", written)
        self.assertIn("\nrps: 40\n> tool: 40 connections to ", written, "the line it was read from, quoted")

    def test_a_missing_build_is_skipped_not_failed(self) -> None:
        self.tree.write("docs/exercises/01-first.md", page(GOOD_CHECK))
        os.remove(os.path.join(self.tree.root, "build", "bin", "cm-server"))
        code, out = self.tree.check()
        self.assertEqual(code, 77, out)


def fill(blank: str, answers: dict[str, str], quotes: dict[str, list[str]] | None = None) -> str:
    """A blank sheet with each `key:` line given its answer, and the `> ` lines quoted under it."""
    lines = []
    for line in blank.split("\n"):
        key = line[:-1] if line.endswith(":") else None
        lines.append(f"{key}: {answers[key]}" if key in answers else line)
        lines += [f"> {q}" for q in (quotes or {}).get(key, [])]
    return "\n".join(lines)


def report(connections: int, requests: int, rps: str, errors: int = 0, seconds: int = 5) -> list[str]:
    """The summary lines of a cm-load report, as a student pastes them."""
    return [f"{connections}/{connections} connections, 1 threads, no stagger, 2 s warm-up, {seconds} s measured",
            f"requests {requests}   rps {rps}   client CPU 0.59 s (0.06 s of it polling idle)",
            f"errors {errors} (connect 0, reset 0, timeout {errors}, status 0, body 0, early 0)",
            f"fairness  starved 0 of {connections}   Jain 1.000   max gap 140.6 ms"]


# Filled-in sheets of the real exercises 1, 2 and 4: a student's right predictions, with what
# a run on two cores measured, and the same with the mistakes students make.
GOOD_SHEETS = {
    "01": {"connection_ceiling": "2000", "thread_ceiling": "640", "binds_blocking": "threads",
           "binds_async": "connections", "thread_ceiling_128": "1280", "connection_ceiling_2000": "20,000",
           "plaintext": "60000", "binds_tiny_delay": "cpu", "served_blocking": "64",
           "blocking_rps": "612", "blocking_starved": "136", "async_rps": "1985",
           "plaintext_rps": "71000", "blocking_rps_2000": "633", "async_rps_2000": "19650"},
    "02": {"sequential": "2", "steps_blocking": "32", "per_step": "64", "last_blocking": "16",
           "last_async": "0.6", "steps_async": "1", "last_one_worker": "2.03", "last_pool": "16.1",
           "steps_pool": "32", "last_loop": "0.75", "steps_loop": "1"},
    "07": {"last_one_loop": "0.4", "ceiling_50ms": "20", "ceiling_one_loop": "50", "last_two_cores": "0.2",
           "ceiling_two_cores": "100", "last_one_core": "0.4", "ceiling_one_core": "50", "same_loop_s": "0.9",
           "other_loop_s": "0", "one_loop_last": "0.52", "one_loop_rps": "44.1", "two_cores_last": "0.31",
           "two_cores_rps": "86.0", "one_core_last": "0.47", "one_core_rps": "45.2",
           "slowest_plaintext": "0.95", "fastest_plaintext": "0.0004"},
    "04": {"last_timer": "0.1", "last_sleep": "2", "plaintext_sleep": "0.5", "speedup_two_loops": "2",
           "timer_last": "0.12", "sleep_last": "2.02", "plaintext_after": "0.52", "two_loops_last": "1.2"},
}
WRONG_SHEETS = {
    "01": ({"served_blocking": "200", "binds_blocking": "connections"},
           ["served_blocking = 200: WRONG; the answer is 64 (yours is +212.5% off)",
            "binds_blocking = connections: WRONG; the answer is threads",
            "blocking_starved = 136: DISAGREES with your 200 - served_blocking = 0"]),
    "02": ({"last_blocking": "0.5", "steps_blocking": "1"},
           ["last_pool = 16.1: DISAGREES with your last_blocking: +3120.0%",
            "steps_pool = 32: DISAGREES with your steps_blocking"]),
    "04": ({"last_sleep": "0.1"},
           ["last_sleep = 0.1: WRONG; the answer is 2", "sleep_last = 2.02: DISAGREES with your last_sleep"]),
}


class StudentSheetTest(unittest.TestCase):
    """`--sheet NN` prints exercise NN's blank sheet; `--student FILE` grades it, on the real pages."""

    def run_tool(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, os.path.join(TOOLS, "check_exercises.py"), *args],
                              capture_output=True, text=True, timeout=60)

    def graded(self, number: str, answers: dict[str, str],
               quotes: dict[str, list[str]] | None = None) -> subprocess.CompletedProcess:
        blank = self.run_tool("--sheet", number)
        self.assertEqual(blank.returncode, 0, blank.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(fill(blank.stdout, answers, quotes))
        try:
            return self.run_tool("--student", f.name)
        finally:
            os.unlink(f.name)

    def test_a_sheet_whose_predictions_and_measurements_agree_passes(self) -> None:
        for number, answers in GOOD_SHEETS.items():
            with self.subTest(exercise=number):
                done = self.graded(number, answers)
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                self.assertIn(" wrong; measurements: ", done.stdout)
                self.assertNotIn("WRONG", done.stdout)
                self.assertNotIn("DISAGREES", done.stdout)
                self.assertNotIn("not filled in --", done.stdout)

    def test_a_wrong_prediction_is_named_with_the_answer_and_how_far_off(self) -> None:
        for number, (mistakes, messages) in WRONG_SHEETS.items():
            with self.subTest(exercise=number):
                done = self.graded(number, {**GOOD_SHEETS[number], **mistakes})
                self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
                for message in messages:
                    self.assertIn(message, done.stdout)

    def test_an_unfilled_sheet_says_what_is_missing(self) -> None:
        done = self.graded("04", {})
        self.assertEqual(done.returncode, 1)
        self.assertIn("8 not filled in", done.stdout)

    def test_values_as_people_write_them_are_numbers(self) -> None:
        done = self.graded("01", {**GOOD_SHEETS["01"], "thread_ceiling": "640 rps",
                                  "connection_ceiling_2000": "20k", "served_blocking": "~64",
                                  "connection_ceiling": "about 2,000 rps"})
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("thread_ceiling = 640 rps: right", done.stdout)
        self.assertIn("connection_ceiling_2000 = 20k: right", done.stdout)

    def test_a_sheet_never_run_fails(self) -> None:
        """Measurements copied from the predictions, or zeros, are not measurements."""
        copied = {**GOOD_SHEETS["01"], "blocking_rps": "640", "blocking_starved": "136",
                  "async_rps": "2000", "plaintext_rps": "60000", "blocking_rps_2000": "640",
                  "async_rps_2000": "20000"}
        done = self.graded("01", copied)
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("NOT MEASURED: every measurement equals its prediction exactly", done.stdout)
        zeros = {**GOOD_SHEETS["01"], "plaintext": "0", "plaintext_rps": "0", "async_rps": "0"}
        done = self.graded("01", zeros)
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("async_rps = 0: NOT A MEASUREMENT", done.stdout)

    def test_a_measurement_above_its_predicted_ceiling_fails(self) -> None:
        done = self.graded("01", {**GOOD_SHEETS["01"], "blocking_rps": "690"})
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("blocking_rps = 690: ABOVE THE CEILING you predicted for it, thread_ceiling = 640",
                      done.stdout)

    def test_a_measurement_below_its_predicted_floor_fails(self) -> None:
        done = self.graded("07", {**GOOD_SHEETS["07"], "one_loop_last": "0.31"})
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("one_loop_last = 0.31: BELOW THE FLOOR you predicted for it, last_one_loop = 0.4",
                      done.stdout)

    def test_measurements_that_contradict_each_other_fail(self) -> None:
        """Ten times the connections on an async server is ten times the rps, whatever the machine;
        the blocking model's rps does not move with the connections."""
        done = self.graded("01", {**GOOD_SHEETS["01"], "async_rps_2000": "19650", "async_rps": "1200"})
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("async_rps_2000 = 19650: INCONSISTENT with 10 * async_rps = 12000", done.stdout)
        done = self.graded("01", {**GOOD_SHEETS["01"], "blocking_rps_2000": "520"})
        self.assertIn("blocking_rps_2000 = 520: INCONSISTENT with blocking_rps = 612", done.stdout)

    def test_quoted_output_that_holds_the_value_up_passes(self) -> None:
        quotes = {"async_rps": report(200, 9925, "1985.0"), "async_rps_2000": report(2000, 98250, "19650.0")}
        done = self.graded("01", GOOD_SHEETS["01"], quotes)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("2 measurements checked against the output quoted under them; 4 quote nothing", done.stdout)

    def test_quoted_output_that_does_not_hold_the_value_up_fails(self) -> None:
        cases = {
            "1985 is nowhere in the lines quoted under it": report(200, 9000, "1800.0"),
            "9000 requests in 5 s are 1800.0 rps, not 1985.0": report(200, 9000, "1985.0"),
            "the quoted run had 3 errors": report(200, 9925, "1985.0", errors=3),
            "the quoted run had 2000 connections; this measurement is at 200": report(2000, 9925, "1985.0"),
        }
        for message, lines in cases.items():
            with self.subTest(message=message):
                done = self.graded("01", GOOD_SHEETS["01"], {"async_rps": lines})
                self.assertEqual(done.returncode, 1, done.stdout)
                self.assertIn("async_rps = 1985: THE QUOTED OUTPUT DOES NOT HOLD IT UP", done.stdout)
                self.assertIn(message, done.stdout)

    def test_every_committed_reference_grades_clean(self) -> None:
        """What --student says of each committed reference sheet: 0 wrong, 0 disagree, nothing
        past a bound, every measurement held up by the output quoted under it."""
        folder = os.path.join(TOOLS, "..", "..", "results", "exercises")
        for name in sorted(os.listdir(folder)):
            with self.subTest(reference=name):
                done = self.run_tool("--student", os.path.join(folder, name))
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                self.assertIn(" 0 wrong; ", done.stdout)
                self.assertIn(" 0 disagree, 0 not from a run; 0 not filled in", done.stdout)
                self.assertNotIn("quote nothing", done.stdout)

    def test_a_sheet_without_its_exercise_line_is_refused(self) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("served_blocking: 64\n")
        try:
            done = self.run_tool("--student", f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(done.returncode, 2)
        self.assertIn("which exercise is this sheet for?", done.stderr)


if __name__ == "__main__":
    unittest.main()
