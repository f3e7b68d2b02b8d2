#!/usr/bin/python3
"""Keeps the classroom exercises (docs/exercises/) alive: runs a short form of each one's command.

An exercise tells a student to run a command and look for something in its output. Two things can
rot: the command (a flag renamed, a tool moved) and what it shows (a model that no longer
stalls, a bug switch that no longer breaks anything). For every exercise page this checker:

1. finds every project tool a student is told to run in its `sh` blocks -- `build/bin/cm-*`,
   `harness/*`, `docs/exercises/tools/*` -- and checks that the tool exists and that every
   `--flag` given to it appears in the tool's own `--help`;
2. runs each check block of the page, an HTML comment the page's reader does not see:

       <!-- check: what it shows
       server blocking: build/bin/cm-server --model blocking --threads 1
       run: harness/burst --port {blocking} --connections 4 --path /delay/200
       expect: burst: 4/4 correct responses
       expect: last answered (?P<one_worker>[\\d.]+) s
       value: one_worker >= 0.8
       -->

   `server NAME: CMD` starts CMD with `--port 0 --port-file F` added, waits until it listens,
   and `{NAME}` in later lines is its port, `{NAME.pid}` its pid (`{tmp}`: a scratch folder of
   the block, removed after it); `run: CMD` runs CMD with bash (from the repository
   root, each bounded by `timeout:` seconds, default 20) and must exit 0; `expect: REGEX` must
   match the last run's output (stdout and stderr), `expect NAME: REGEX` what server NAME has
   printed so far, and the regex's named groups become numbers; `value: A OP B` compares them (A and B: a name, a
   number, or `number * name`; OP one of < <= > >= ==); `needs-model: NAME` skips the block (not
   fails) when cm-server was built without that model; `database NAME: [ROWS]` starts a
   throwaway PostgreSQL (harness/cmharness/database.py, ROWS rows in World, 10,000 by default),
   `{NAME}` in later lines its conninfo, quoted for a shell, `{NAME.pid}` its postmaster's pid
   (the block is skipped where PostgreSQL is not installed). `build/bin/` is the --bin-dir.
   Every process a block starts is stopped when the block ends, pass or fail: servers by pid
   (SIGTERM, then SIGKILL), commands with their whole process group;
3. checks that the index (docs/exercises/README.md) lists every exercise page as a numbered link,
   and that each page ends with `Previous:` / `Next:` links that follow that order;
4. checks each page's answer sheet (`<!-- sheet -->`, its answers in docs/exercises/answers/, as
   docs/tools/sheets.py says) and its
   reference blocks (`<!-- reference: ... -->`, the syntax of a check block, full size): every
   measurement of the sheet is captured by a reference `expect:` group of its name, and the
   committed reference result results/exercises/NN-name.txt answers exactly the sheet's questions
   and is linked from the page.

A student's side, nothing run:

    docs/tools/check_exercises.py --sheet 01 > sheet.txt    # the blank answer sheet
    docs/tools/check_exercises.py --student sheet.txt      # graded: exit 0 when all agree

and the reference results (runs the reference blocks; servers pinned apart):

    docs/tools/check_exercises.py --reference 01           # or `all`

Usage (with Debian's /usr/bin/python3, standard library only; run by ctest as `docs_exercises`):

    docs/tools/check_exercises.py [--bin-dir build/bin] [--only 05] [--list]

Exit 0 when every check passed, 1 when one failed (with the command, its output and what was
missing), 77 (ctest's "skipped") when cm-server has not been built. --student: 0 when every
prediction is right and every measurement agrees, 1 when not, 2 for a sheet it cannot read.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "harness"))
import doclib  # noqa: E402
import sheets  # noqa: E402
from cmharness import database  # noqa: E402
from cmharness.servers import Server  # noqa: E402

EXERCISES = os.path.join("docs", "exercises")
CHECK_BLOCK = re.compile(r"<!--\s*check\b:?(?P<title>[^\n]*)\n(?P<body>.*?)-->", re.S)
REFERENCE_BLOCK = re.compile(r"<!--\s*reference\b:?(?P<title>[^\n]*)\n(?P<body>.*?)-->", re.S)
REFERENCES = os.path.join("results", "exercises")
TOOL = re.compile(r"(?<![\w/.-])(?P<tool>build/bin/cm-[\w-]+|harness/[\w-]+|docs/exercises/tools/[\w.-]+)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
VALUE = re.compile(r"^(?P<a>.+?)\s*(?P<op><=|>=|==|<|>)\s*(?P<b>.+)$")
OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
       ">=": lambda a, b: a >= b, "==": lambda a, b: a == b}
ORDER_ITEM = re.compile(r"^\d+\.\s+\[[^\]]*\]\((?P<target>[^)\s#]+)\)")
FOOTER_LINK = re.compile(r"\b(?P<kind>Previous|Next): \[[^\]]*\]\((?P<target>[^)\s#]+)\)")


@dataclass
class Check:
    page: str
    line: int
    title: str
    steps: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, name, text)
    timeout: float = 20.0
    needs: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)  # what its expect: lines captured
    quotes: dict[str, list[str]] = field(default_factory=dict)  # the output each was read from


def parse_checks(page: str, text: str, block: re.Pattern = CHECK_BLOCK) -> tuple[list[Check], list[str]]:
    checks, problems = [], []
    for m in block.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        check = Check(page, line, m.group("title").strip() or f"line {line}")
        for n, raw in enumerate(m.group("body").split("\n"), start=line + 1):
            raw = raw.strip()
            if not raw:
                continue
            key, sep, rest = raw.partition(":")
            rest = rest.strip()
            words = key.split()
            if not sep or not words:
                problems.append(f"{page}:{n}: `{raw}`: not `key: value`")
            elif words[0] in ("server", "expect", "database") and len(words) == 2:
                check.steps.append((words[0], words[1], rest))
                if words[0] == "database" and rest and not rest.isdigit():
                    problems.append(f"{page}:{n}: database {words[1]}: the rows of World, or nothing, not `{rest}`")
                if words[0] == "expect":
                    try:
                        re.compile(rest)
                    except re.error as e:
                        problems.append(f"{page}:{n}: expect: not a regular expression ({e})")
            elif key in ("run", "expect", "value"):
                check.steps.append((key, "", rest))
                if key == "expect":
                    try:
                        re.compile(rest)
                    except re.error as e:
                        problems.append(f"{page}:{n}: expect: not a regular expression ({e})")
                if key == "value" and not VALUE.match(rest):
                    problems.append(f"{page}:{n}: value: wants `A OP B`, not `{rest}`")
            elif key == "timeout":
                check.timeout = float(rest)
            elif key == "needs-model":
                check.needs += rest.split()
            else:
                problems.append(f"{page}:{n}: unknown key `{key}` (server NAME, database NAME, run, expect, value, "
                                "timeout, needs-model)")
        if not any(kind == "expect" for kind, _, _ in check.steps):
            problems.append(f"{page}:{line}: a check block without `expect:` checks nothing")
        checks.append(check)
    return checks, problems


class Runner:
    """Runs check blocks; remembers every process it started, to stop it whatever happens."""

    def __init__(self, root: str, bin_dir: str):
        self.root = root
        self.bin_dir = bin_dir
        self.servers: list[Server] = []
        self.helps = doclib.ToolHelp(root, bin_dir)
        self._models: list[str] | None = None

    def localise(self, cmd: str) -> str:
        """`build/bin/x` -> the --bin-dir's x (a release, asan or dev build)."""
        return re.sub(r"(?<![\w/.-])build/bin/", self.bin_dir.rstrip("/") + "/", cmd)

    def models(self) -> list[str]:
        if self._models is None:
            out = subprocess.run([os.path.join(self.bin_dir, "cm-server"), "--list-models"],
                                 capture_output=True, text=True, timeout=10).stdout
            self._models = [line.split()[0] for line in out.splitlines() if line.strip()]
        return self._models

    def tool_help(self, tool: str) -> str | None:
        """The tool's --help, or None when it is missing (doclib.ToolHelp, shared with check_names)."""
        return self.helps.help_of(tool)

    def start_server(self, cmd: str, work: str, name: str) -> Server:
        """The page's server command, started as the harness starts one (cmharness.servers:
        --port 0 and a port file, its output in its own log), from the repository's root."""
        try:
            server = Server(name, argv=shlex.split(self.localise(cmd)), workdir=work, cwd=self.root)
        except RuntimeError as e:
            raise RuntimeError(f"server {name} did not start: `{cmd}`\n{e}") from None
        self.servers.append(server)
        return server

    def stop_server(self, server: Server) -> None:
        server.stop(grace=5.0)
        if server in self.servers:
            self.servers.remove(server)

    def stop_all(self) -> None:
        for server in list(self.servers):
            try:
                self.stop_server(server)
            except OSError:
                pass

    def run(self, cmd: str, timeout: float) -> tuple[int | None, str]:
        proc = subprocess.Popen(["bash", "-c", self.localise(cmd)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=self.root, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            code = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # anything the command left behind
            except (ProcessLookupError, PermissionError):
                pass
        return code, out

    def check(self, check: Check) -> tuple[str, str]:
        """('ok' | 'skip' | 'fail', the transcript or the reason)."""
        missing = [m for m in check.needs if m not in self.models()]
        if missing:
            return "skip", f"cm-server was built without {', '.join(missing)}"
        if any(kind == "database" for kind, _, _ in check.steps) and not database.bin_dir():
            return "skip", "PostgreSQL is not installed (scripts/install-deps installs it)"
        ports: dict[str, str] = {}
        values = check.values
        values.clear()
        check.quotes.clear()
        transcript: list[str] = []
        servers: list[tuple[str, subprocess.Popen, str]] = []
        clusters: list[database.Cluster] = []
        output = ""

        pids: dict[str, str] = {}

        with tempfile.TemporaryDirectory(prefix="cm-exercise-") as work:

            def fill(text: str) -> str:  # {NAME}: server NAME's port; {NAME.pid}: its pid; {tmp}
                text = re.sub(r"\{(\w+)\.pid\}", lambda m: pids.get(m.group(1), m.group(0)), text)
                text = text.replace("{tmp}", work)
                return re.sub(r"\{(\w+)\}", lambda m: ports.get(m.group(1), m.group(0)), text)

            try:
                for kind, name, text in check.steps:
                    if kind == "database":
                        if text and not text.isdigit():
                            raise RuntimeError(f"database {name}: the rows of World, or nothing, not `{text}`")
                        cluster = database.Cluster(rows=int(text or database.WORLD_ROWS))
                        clusters.append(cluster)
                        cluster.start()
                        ports[name], pids[name] = shlex.quote(cluster.conninfo), str(cluster.running())
                        transcript.append(f"$ harness/db-cluster start    # {name}: {cluster.conninfo}")
                    elif kind == "server":
                        server = self.start_server(fill(text), work, name)
                        port = str(server.port)
                        ports[name], pids[name] = port, str(server.pid)
                        servers.append((name, server, server.log_path))
                        transcript.append(f"$ {fill(text)} --port 0 &    # port {port}")
                    elif kind == "run":
                        cmd = fill(text)
                        start = time.monotonic()
                        code, out = self.run(cmd, check.timeout)
                        transcript.append(f"$ {cmd}\n{out.rstrip()}")
                        output = out
                        if code != 0:
                            why = f"did not end within {check.timeout:g} s" if code is None else f"exited {code}"
                            return "fail", "\n".join(transcript) + f"\n-> the command {why} ({time.monotonic() - start:.1f} s)"
                    else:
                        if kind == "expect":
                            # `expect:` reads the last run's output; `expect NAME:` server NAME's.
                            if name:
                                logs = [log for n, _, log in servers if n == name]
                                if not logs:
                                    raise RuntimeError(f"expect {name}: no server {name} started before it")
                                with open(logs[0]) as f:
                                    seen, where = f.read(), f"server {name}'s output"
                            else:
                                seen, where = output, "the last command's output"
                            m = re.search(text, seen, re.M)
                            if not m:
                                return "fail", "\n".join(transcript) + f"\n-> nothing in {where} matches /{text}/"
                            for key, val in m.groupdict().items():
                                check.quotes[key] = quoted_lines(seen, m)
                                try:
                                    values[key] = float(val.replace(",", ""))
                                except (TypeError, ValueError):
                                    return "fail", "\n".join(transcript) + f"\n-> /{text}/: {key} = {val!r} is not a number"
                        else:
                            ok, shown = self.compare(text, values)
                            if not ok:
                                return "fail", "\n".join(transcript) + f"\n-> value: {text} is false ({shown})"
                            transcript.append(f"   value: {text}  ({shown})")
            except (RuntimeError, OSError) as e:
                return "fail", "\n".join(transcript) + f"\n-> {e}"
            finally:
                for _, proc, _ in servers:
                    self.stop_server(proc)
                for cluster in clusters:
                    cluster.stop()
        return "ok", "\n".join(transcript)

    @staticmethod
    def compare(text: str, values: dict[str, float]) -> tuple[bool, str]:
        m = VALUE.match(text)

        def term(t: str) -> float:
            t = t.strip()
            factor, star, name = t.partition("*")
            if star:
                return float(factor) * term(name)
            if re.fullmatch(r"[\d.]+", t):
                return float(t)
            if t not in values:
                raise KeyError(t)
            return values[t]

        try:
            a, b = term(m.group("a")), term(m.group("b"))
        except KeyError as e:
            return False, f"{e.args[0]} was not captured by an expect: before it"
        return OPS[m.group("op")](a, b), f"{a:g} {m.group('op')} {b:g}"


#: The lines of a cm-load report a sheet quotes besides the one a value was read from.
REPORT_HEAD = re.compile(r"^\s*cm-load http")
REPORT_LINES = re.compile(r"^\s*(?:\d+/\d+ connections,|requests \d+|errors \d+|fairness )")


def quoted_lines(output: str, m: re.Match) -> list[str]:
    """What a sheet quotes for a value `m` read from `output`: the line(s) it was read from and,
    in a cm-load report, the report's connections, requests, errors and fairness lines."""
    lines = output.split("\n")
    first = output.count("\n", 0, m.start())
    last = output.count("\n", 0, max(m.end() - 1, m.start()))
    start = next((i for i in range(first, -1, -1) if REPORT_HEAD.match(lines[i])), None)
    report = []
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if REPORT_HEAD.match(lines[i])), len(lines))
        report = [i for i in range(start, end) if REPORT_LINES.match(lines[i])]
    keep = sorted(set(report) | set(range(first, last + 1)))
    return [lines[i].strip() for i in keep]


def student_commands(lines: list[str]) -> list[tuple[int, str]]:
    """(line, command) for every command in the page's sh blocks, continuation lines joined."""
    found = []
    for block in doclib.fences(lines):
        if block.info.split()[:1] not in (["sh"], ["bash"], ["console"]):
            continue
        pending, start = "", 0
        for offset, text in enumerate(block.body):
            text = re.sub(r"^\s*\$ ", "", text)
            if not pending:
                start = block.open_line + 1 + offset
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            found.append((start, pending + text))
            pending = ""
    return found


def check_flags(runner: Runner, page: str, lines: list[str]) -> tuple[list[str], int]:
    """Every project tool a student runs exists, and every --flag given to it is in its --help."""
    problems, count = [], 0
    for n, command in student_commands(lines):
        command = re.sub(r"#.*$", "", command)  # a comment after the command
        for segment in re.split(r"\|\||&&|[|;&]|\$\(|\)", command):
            m = TOOL.search(segment)
            if not m:
                continue
            tool = m.group("tool")
            help_text = runner.tool_help(tool)
            if help_text is None:
                problems.append(f"{page}:{n}: `{tool}` does not exist (or is not executable)")
                continue
            for flag in FLAG.findall(segment[m.end():]):
                count += 1
                if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text):
                    problems.append(f"{page}:{n}: `{tool} {flag}`: {tool} --help does not know {flag}")
    return problems, count


def check_order(root: str, pages: list[str]) -> list[str]:
    """The index lists every exercise; each one's Previous/Next follow the index's order."""
    index = os.path.join(EXERCISES, "README.md")
    problems, order = [], []
    for _, text in doclib.prose_lines(doclib.read_lines(os.path.join(root, index))):
        m = ORDER_ITEM.match(text)
        if m:
            order.append(os.path.normpath(os.path.join(EXERCISES, m.group("target"))))
    for page in pages:
        if page not in order:
            problems.append(f"{index}: does not list {page} in its numbered list")
    for i, page in enumerate(order):
        if not os.path.isfile(os.path.join(root, page)):
            problems.append(f"{index}: lists {page}, which does not exist")
            continue
        found = {}
        for n, text in doclib.prose_lines(doclib.read_lines(os.path.join(root, page))):
            for m in FOOTER_LINK.finditer(text):
                found[m.group("kind")] = (n, os.path.normpath(os.path.join(EXERCISES, m.group("target"))))
        for kind, want in (("Previous", order[i - 1] if i > 0 else None),
                           ("Next", order[i + 1] if i + 1 < len(order) else None)):
            have = found.get(kind)
            if want and (not have or have[1] != want):
                problems.append(f"{page}: its `{kind}:` link should lead to {want} (the index's order)"
                                + (f", not {have[1]}" if have else ""))
            elif not want and have:
                problems.append(f"{page}:{have[0]}: `{kind}:` leads to {have[1]}, but the index has no page there")
    return problems


def reference_path(root: str, page: str) -> str:
    return os.path.join(root, REFERENCES, os.path.basename(page)[: -len(".md")] + ".txt")


def check_reference(root: str, page: str, text: str, items: list[sheets.Item]) -> list[str]:
    """The page's reference blocks measure every measurement of its sheet, and the committed
    reference sheet answers exactly the sheet's questions (else it is from another version)."""
    refs, problems = parse_checks(page, text, REFERENCE_BLOCK)
    if not items:
        return problems
    if not refs:
        return problems + [f"{page}: no <!-- reference --> block: the sheet has no reference result"]
    captured = {g for r in refs for kind, _, t in r.steps if kind == "expect" for g in re.compile(t).groupindex}
    measured = {i.key for i in items if i.kind == "measure"}
    for key in sorted(measured - captured):
        problems.append(f"{page}: no expect: of its reference blocks captures (?P<{key}>...)")
    path = reference_path(root, page)
    rel = os.path.relpath(path, root)
    if not os.path.isfile(path):
        return problems + [f"{page}: no {rel}: run docs/tools/check_exercises.py --reference "
                           f"{os.path.basename(page)[:2]}"]
    with open(path, encoding="utf-8") as f:
        sheet = f.read()
    _, values, bad = sheets.read_student(sheet)
    keys = {i.key for i in items}
    rerun = f"run docs/tools/check_exercises.py --reference {os.path.basename(page)[:2]}"
    if bad or set(values) != keys:
        problems.append(f"{rel} answers {sorted(set(values) ^ keys)} that the sheet of {page} does not ask "
                        f"(or misses them): {rerun}")
    elif any(i.rule == "answer" for i in items):  # graded against the page's answers as they are now
        g = sheets.grade(items, values, sheets.read_quotes(sheet))
        if g.wrong or g.disagree or g.not_run or g.missing:
            bad_lines = [l.strip() for l in g.lines if re.search(r"WRONG|DISAGREES|INCONSISTENT|NOT |ABOVE|BELOW|not filled", l)]
            problems.append(f"{rel} does not grade clean against {page} ({g.wrong} wrong, {g.disagree} disagree, "
                            f"{g.not_run} not from a run): fix the prediction or the method, then {rerun}: "
                            + " | ".join(bad_lines))
    if rel not in text and os.path.basename(path) not in text:
        problems.append(f"{page}: does not link its reference result {rel}")
    return problems


def write_references(root: str, bin_dir: str, pages: list[str], which: str) -> int:
    """Runs each chosen page's reference blocks and writes its sheet, filled with the answers the
    page gives and what was measured, then graded, to results/exercises/NN-name.txt."""
    chosen = pages if which == "all" else [p for p in pages if os.path.basename(p).startswith(which)]
    if not chosen:
        print(f"check_exercises: no exercise page starts with {which!r}", file=sys.stderr)
        return 2
    runner = Runner(root, bin_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    failed = 0
    try:
        for page in chosen:
            with open(os.path.join(root, page), encoding="utf-8") as f:
                text = f.read()
            items, bad = sheets.parse_sheet(page, text, read_answers(root, page))
            refs, bad2 = parse_checks(page, text, REFERENCE_BLOCK)
            if bad or bad2 or not items or not refs:
                print("\n".join(bad + bad2) or f"{page}: no sheet or no reference block", file=sys.stderr)
                failed += 1
                continue
            values: dict[str, float] = {}
            quotes: dict[str, list[str]] = {}
            transcript = []
            for ref in refs:
                t0 = time.monotonic()
                status, log = runner.check(ref)
                print(f"{status:4}  {page}:{ref.line}  {ref.title}  ({time.monotonic() - t0:.1f} s)", flush=True)
                transcript.append(log)
                if status != "ok":
                    print(log, file=sys.stderr)
                    failed += 1
                    break
                values.update(ref.values)
                quotes.update(ref.quotes)
            else:
                write_reference(root, page, text, items, values, quotes, transcript)
    finally:
        runner.stop_all()
    return 1 if failed else 0


def write_reference(root: str, page: str, text: str, items: list[sheets.Item], values: dict[str, float],
                    quotes: dict[str, list[str]], transcript: list[str]) -> None:
    answers = {i.key: i.value for i in items if i.kind == "predict" and i.rule == "answer"}
    for i in items:
        if i.kind == "predict" and i.rule != "answer":  # no single answer: what this run measured
            answers[i.key] = next((f"{values[m.key]:g}" for m in items if m.kind == "measure"
                                   and m.rule == "tests" and m.value == i.key and m.key in values), "")
        if i.kind == "measure" and i.key in values:
            answers[i.key] = f"{values[i.key]:g}"
    title = text.split("\n", 1)[0].lstrip("# ").strip()
    blank = sheets.blank_sheet(page, title, items)
    lines = []
    for line in blank.split("\n"):
        key = line[:-1] if line.endswith(":") else None
        lines.append(f"{key}: {answers.get(key, '')}" if key else line)
        lines += [f"> {q}" for q in quotes.get(key, [])] if key else []
    graded = sheets.grade(items, {k: v for k, v in answers.items() if v}, quotes)
    head = [f"# Reference result of {page}, written by docs/tools/check_exercises.py --reference "
            f"{os.path.basename(page)[:2]}",
            f"# on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs "
            f"({platform_line()}); predictions: the page's answers (where a question has none: "
            "what this run measured)",
            "#", "# Graded:"] + ["#" + line for line in graded.lines] + ["#", "# Commands and their output:"]
    for log in transcript:
        head += ["#   " + line for line in log.splitlines()]
    path = reference_path(root, page)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(head + [""] + lines).rstrip("\n") + "\n")
    print(f"wrote {os.path.relpath(path, root)}")


def platform_line() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        model = ""
    return f"{os.uname().sysname} {os.uname().release}, {model}".strip(", ")


def answer_sheet(root: str, pages: list[str], number: str | None, student: str | None) -> int:
    """--sheet NN: the blank sheet of that exercise; --student FILE: that sheet, graded."""
    if student:
        try:
            with open(student, encoding="utf-8") as f:
                sheet = f.read()
            exercise, values, problems = sheets.read_student(sheet)
            quotes = sheets.read_quotes(sheet)
        except OSError as e:
            print(f"check_exercises: cannot read {student}: {e.strerror}", file=sys.stderr)
            return 2
        number = exercise
    else:
        values, problems, quotes = {}, [], {}
    found = [p for p in pages if number and os.path.basename(p).startswith(number)]
    if problems or len(found) != 1:
        for p in problems:
            print(f"{student}: {p}", file=sys.stderr)
        if not problems:
            print(f"check_exercises: no single exercise page starts with {number!r}", file=sys.stderr)
        return 2
    page = found[0]
    with open(os.path.join(root, page), encoding="utf-8") as f:
        text = f.read()
    items, bad = sheets.parse_sheet(page, text, read_answers(root, page))
    if bad or not items:
        print("\n".join(bad) or f"{page} has no answer sheet", file=sys.stderr)
        return 2
    title = text.split("\n", 1)[0].lstrip("# ").strip()
    if not student:
        print(sheets.blank_sheet(page, title, items))
        return 0
    unknown = sorted(set(values) - {i.key for i in items})
    g = sheets.grade(items, values, quotes)
    print(f"{title} ({page})")
    print("\n".join(g.lines))
    for key in unknown:
        print(f"  {key}: not a question of this sheet (a typo?)")
    print(f"predictions: {g.right} right, {g.wrong} wrong; measurements: {g.agree} agree with your "
          f"predictions, {g.disagree} disagree, {g.not_run} not from a run; {g.missing} not filled in")
    if g.unquoted:
        print(f"{g.quoted} measurements checked against the output quoted under them; {g.unquoted} quote "
              "nothing (paste the lines you read each from, after a `> `, to have them checked)")
    return 0 if g.wrong == g.disagree == g.missing == g.not_run == 0 and not unknown else 1


def read_answers(root: str, page: str) -> str | None:
    """The text of a page's answers file (sheets.answers_path), or None when it has none."""
    try:
        with open(os.path.join(root, sheets.answers_path(page)), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def parse_pages(root: str, pages: list[str], problems: list[str]) -> dict:
    """page -> (its text, its check blocks); what is wrong with a page goes to problems."""
    parsed = {}
    for page in pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        checks, bad = parse_checks(page, text)
        problems += bad
        items, bad = sheets.parse_sheet(page, text, read_answers(root, page))
        problems += bad
        if not items:
            problems.append(f"{page}: no <!-- sheet --> block: a student cannot grade their predictions")
        problems += check_reference(root, page, text, items)
        if not checks:
            problems.append(f"{page}: no <!-- check --> block: nothing keeps this exercise alive")
        parsed[page] = (text, checks)
    return parsed


def list_checks(parsed: dict) -> None:
    """--list: every check and reference block with its steps."""
    for page, (text, checks) in parsed.items():
        for c in checks + parse_checks(page, text, REFERENCE_BLOCK)[0]:
            print(f"{page}:{c.line}: {c.title}")
            for kind, name, step in c.steps:
                print(f"    {kind}{' ' + name if name else ''}: {step}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="the repository root (default: found above this script)")
    parser.add_argument("--bin-dir", help="where cm-server and cm-load are (default: <root>/build/bin)")
    parser.add_argument("--only", help="only the exercise pages whose name contains this")
    parser.add_argument("--list", action="store_true", help="print each check's steps, run nothing")
    parser.add_argument("--verbose", action="store_true", help="print the transcript of passing checks too")
    parser.add_argument("--sheet", metavar="NN", help="print the blank answer sheet of exercise NN, run nothing")
    parser.add_argument("--student", metavar="FILE", help="grade a filled-in answer sheet, run nothing")
    parser.add_argument("--reference", metavar="NN", help="run exercise NN's full-size commands (its "
                        "<!-- reference --> blocks; 'all': every exercise) and write the measured answer "
                        "sheet to results/exercises/")
    args = parser.parse_args()
    root = os.path.abspath(args.root) if args.root else doclib.find_root(os.path.dirname(__file__))
    bin_dir = os.path.abspath(args.bin_dir) if args.bin_dir else os.path.join(root, "build", "bin")

    folder = os.path.join(root, EXERCISES)
    pages = sorted(os.path.join(EXERCISES, f) for f in os.listdir(folder)
                   if f.endswith(".md") and f != "README.md")
    if args.sheet or args.student:
        return answer_sheet(root, pages, args.sheet, args.student)
    if args.reference:
        return write_references(root, bin_dir, pages, args.reference)
    problems = check_order(root, pages)
    if args.only:
        pages = [p for p in pages if args.only in os.path.basename(p)]
    parsed = parse_pages(root, pages, problems)
    if args.list:
        list_checks(parsed)
        return 0
    if not os.access(os.path.join(bin_dir, "cm-server"), os.X_OK):
        print(f"skipped: {bin_dir}/cm-server is missing; build first (make build)")
        return 77

    runner = Runner(root, bin_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: stop what we started
    started = time.monotonic()
    flags = ran = skipped = 0
    try:
        for page, (text, checks) in parsed.items():
            flag_problems, n = check_flags(runner, page, text.split("\n"))
            flags += n
            problems += flag_problems
            for check in checks:
                t0 = time.monotonic()
                status, transcript = runner.check(check)
                took = time.monotonic() - t0
                print(f"{status:4}  {page}:{check.line}  {check.title}  ({took:.1f} s)", flush=True)
                if status == "skip":
                    skipped += 1
                    print(f"      {transcript}")
                    continue
                ran += 1
                if status == "fail":
                    problems.append(f"{page}:{check.line}: check `{check.title}` failed:\n"
                                    + "\n".join("    " + line for line in transcript.splitlines()))
                elif args.verbose:
                    print("\n".join("      " + line for line in transcript.splitlines()))
    finally:
        runner.stop_all()
    took = time.monotonic() - started
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"check_exercises: {len(problems)} problem(s) in {len(parsed)} exercises ({took:.1f} s)", file=sys.stderr)
        return 1
    print(f"check_exercises: {len(parsed)} exercises, {ran} checks passed"
          + (f", {skipped} skipped" if skipped else "")
          + f", {flags} flags of the students' commands found in their tools' --help, in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
