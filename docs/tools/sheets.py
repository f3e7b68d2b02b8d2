"""Answer sheets for the classroom exercises: a blank sheet from a page, and a filled one graded.

An exercise page holds its sheet in an HTML comment the reader does not see:

    <!-- sheet
    predict thread_ceiling: the blocking model's thread ceiling with 64 workers, in rps | answer 640
    predict binds: which ceiling binds the blocking model (connections, threads or cpu) | answer threads
    predict served: of 200 connections, how many the blocking model answers at all | answer 64
    measure blocking_rps: the blocking model's rps at -c 200 (cm-load's rps line) | tests thread_ceiling
    measure starved: its starved connections at -c 200 (the fairness line) | tests 200 - served
    -->

`predict KEY: QUESTION` is written before anything is run. `measure KEY: WHAT` is read from the
student's own run, and its rules say what it must show:

- `| tests EXPR [within N%]`: the prediction it checks, an expression over the prediction keys
  (+ - * / and numbers); the measurement agrees with it within 10% unless told. A measurement with
  no rule records a value only.
- `| with EXPR [within N%]`: what it must show beside the sheet's other measurements, whatever the
  machine (EXPR may name measurements too: `| with 10 * async_rps within 25%`, the rps of ten
  times the connections on the same server).
- `| below EXPR`: a ceiling -- a run cannot measure more than EXPR (plus half a percent), so a value
  above it is wrong, not fast; `| above EXPR`: a floor, the same the other way (a burst of 8 x 50
  ms of CPU on one core cannot end before 0.4 s, however fast the machine).

A value may be written as people write them: `640 rps`, `20k`, `1.5M`, `~64`, `about 8 MiB` (a
unit is read and dropped; `k` and `M` right after the digits multiply). A sheet is checked for
having been run at all: a measurement of 0 where its prediction is not 0, or a sheet whose every
tested measurement equals its prediction exactly, is not a measurement.

The answers are not in the page a student reads: they are in `answers/NN-name.md` beside it, one
line each, `- **KEY**: A (within 10%) -- the question`, which the page links at its end. A page
whose sheet carries `| answer` itself, or does not link its answers, is refused.

A student's sheet is a text file of `key: value` lines (`#` starts a comment) with an
`exercise: NN-name` line; `check_exercises.py --sheet NN` prints a blank one, `--student FILE`
grades it: each prediction against its answer, and each measurement against the prediction it
tests -- where they disagree and by how much.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass

SHEET_BLOCK = re.compile(r"<!--\s*sheet\b[^\n]*\n(?P<body>.*?)-->", re.S)
LINE = re.compile(r"^(?P<kind>predict|measure)\s+(?P<key>[a-z][a-z0-9_]*)\s*:\s*(?P<text>[^|]+?)\s*"
                  r"(?P<rules>(?:\|[^|]*)*)$")
RULE = re.compile(r"^(?P<rule>answer|tests|with|below|above)\s+(?P<value>.+?)"
                  r"(?:\s+within\s+(?P<tol>[\d.]+)%)?$")
NUMBER = re.compile(r"^[-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?$", re.I)
#: A line of an answers file: "- **thread_ceiling**: 640 -- question 1: ...", "(within 10%)" after
#: the answer where 2% is too strict.
ANSWER = re.compile(r"^- \*\*(?P<key>[a-z][a-z0-9_]*)\*\*: (?P<value>.+?)"
                    r"(?: \(within (?P<tol>[\d.]+)%\))?(?: -- .*)?$")
#: A number as people write one: "~64", "about 640 rps", "20k", "1.5M", "8 MiB", "99%".
WRITTEN = re.compile(r"^(?:~|≈|about\s+|around\s+|approx(?:imately|\.)?\s+)?\s*"
                     r"(?P<digits>[-+]?[\d,_]*\.?\d+(?:e[-+]?\d+)?)"
                     r"\s*(?P<mult>[kKM](?![A-Za-z]))?\s*"
                     r"(?P<unit>%|[A-Za-zµ/]+(?:\s*/\s*[A-Za-z]+)?(?:\s+[A-Za-z]+)?)?\s*$")
MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6}
#: A measurement is read no nearer its ceiling than this (a window's edges).
CEILING_SLACK = 0.005


@dataclass
class Item:
    kind: str  # predict | measure
    key: str
    text: str
    rule: str = ""  # answer | tests | ""
    value: str = ""
    tolerance: float = 0.0  # a fraction
    below: str = ""  # a measurement's ceiling, an expression over the predictions
    above: str = ""  # a measurement's floor, the same
    with_: str = ""  # what it must show beside the other measurements (an expression)
    with_tolerance: float = 0.10


def parse_item(m: re.Match) -> Item | None:
    """A sheet line's item, from LINE's match; None when one of its rules is malformed."""
    item = Item(m.group("kind"), m.group("key"), m.group("text"))
    for piece in m.group("rules").split("|")[1:]:
        r = RULE.match(piece.strip())
        if not r:
            return None
        rule, value = r.group("rule"), r.group("value").strip()
        tol = float(r.group("tol")) / 100 if r.group("tol") else None
        if rule in ("answer", "tests"):
            item.rule, item.value = rule, value
            item.tolerance = tol if tol is not None else (0.02 if rule == "answer" else 0.10)
        elif rule == "with":
            item.with_, item.with_tolerance = value, tol if tol is not None else 0.10
        elif tol is not None:
            return None  # a ceiling or a floor has no tolerance
        else:
            setattr(item, rule, value)
    return item


def answers_path(page: str) -> str:
    """docs/exercises/answers/01-ceilings.md for docs/exercises/01-ceilings.md."""
    folder, _, name = page.rpartition("/")
    return f"{folder}/answers/{name}" if folder else f"answers/{name}"


def apply_answers(page: str, text: str, items: list[Item], answers: str | None) -> list[str]:
    """Sets each prediction's answer from its answers file (None: there is none); what is wrong."""
    if any(i.rule == "answer" for i in items):
        return [f"{page}: its sheet carries `| answer` itself: answers go in "
                f"{answers_path(page)}, out of the page a student reads"]
    if answers is None:
        return [f"{page}: no {answers_path(page)}: the predictions have no answers to be graded by"]
    name = answers_path(page).rsplit("/", 1)[-1]
    problems = [] if f"(answers/{name})" in text else \
        [f"{page}: does not link its answers (answers/{name})"]
    by_key = {i.key: i for i in items if i.kind == "predict"}
    for n, line in enumerate(answers.split("\n"), start=1):
        m = ANSWER.match(line.strip())
        if not m:
            continue
        item = by_key.get(m.group("key"))
        if item is None:
            problems.append(f"{answers_path(page)}:{n}: {m.group('key')} is no prediction of the sheet")
            continue
        item.rule, item.value = "answer", m.group("value").strip()
        item.tolerance = float(m.group("tol")) / 100 if m.group("tol") else 0.02
    return problems


def parse_sheet(page: str, text: str, answers: str | None = "") -> tuple[list[Item], list[str]]:
    """The sheet of an exercise page, its answers set from `answers` (the text of its answers file;
    "" to leave them unset, None when the file is missing), and what is wrong (page:line: ...)."""
    items: list[Item] = []
    problems: list[str] = []
    for m in SHEET_BLOCK.finditer(text):
        first = text.count("\n", 0, m.start()) + 2
        for n, raw in enumerate(m.group("body").split("\n"), start=first):
            raw = raw.strip()
            if not raw:
                continue
            lm = LINE.match(raw)
            item = parse_item(lm) if lm else None
            if item is None:
                problems.append(f"{page}:{n}: `{raw}`: not `predict|measure KEY: TEXT [| tests EXPR] "
                                "[| with EXPR] [| below EXPR] [| above EXPR]`")
                continue
            if (item.below or item.above or item.with_) and item.kind != "measure":
                problems.append(f"{page}:{n}: `| below`, `| above` and `| with` are a measurement's rules")
            if (item.kind, item.rule) in (("predict", "tests"), ("measure", "answer")):
                problems.append(f"{page}:{n}: a {item.kind} takes `| {'answer' if item.kind == 'predict' else 'tests'}`")
            items.append(item)
    keys = [i.key for i in items]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        problems.append(f"{page}: the sheet has {key} twice")
    predictions = {i.key for i in items if i.kind == "predict"}
    measurements = {i.key for i in items if i.kind == "measure"}
    for item in items:
        for rule, expr in (("tests", item.value if item.rule == "tests" else ""), ("below", item.below),
                           ("above", item.above), ("with", item.with_)):
            if not expr:
                continue
            try:
                names = expression_names(expr)
            except ValueError as e:
                problems.append(f"{page}: {item.key}: `{rule} {expr}`: {e}")
                continue
            known = predictions | (measurements - {item.key}) if rule == "with" else predictions
            unknown = names - known
            if unknown:
                what = "a key of the sheet" if rule == "with" else "a prediction of the sheet"
                problems.append(f"{page}: {item.key} {rule} {', '.join(sorted(unknown))}, not {what}")
        if item.rule == "answer" and not item.value.strip():
            problems.append(f"{page}: {item.key}: an empty answer")
    if items and not any(i.kind == "measure" and i.rule == "tests" for i in items):
        problems.append(f"{page}: the sheet's measurements test no prediction")
    if items and answers != "":
        problems += apply_answers(page, text, items, answers)
    return items, problems


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _walk(node: ast.AST, names: dict[str, float] | None) -> float:
    if isinstance(node, ast.Expression):
        return _walk(node.body, names)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        if names is None:
            return 1.0
        if node.id not in names:
            raise KeyError(node.id)
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _walk(node.left, names), _walk(node.right, names)
        if isinstance(node.op, ast.Div) and b == 0:
            raise ZeroDivisionError("division by zero")
        return _OPS[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_walk(node.operand, names)
    raise ValueError("only numbers, prediction keys, + - * / and brackets")


def expression_names(expr: str) -> set[str]:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not an expression ({e.msg})") from None
    _walk(tree, None)  # raises on anything but arithmetic
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def evaluate(expr: str, names: dict[str, float]) -> float:
    return _walk(ast.parse(expr, mode="eval"), names)


def number(text: str) -> float | None:
    """The number in a value as people write it ("640 rps", "20k", "~64"), or None for a word."""
    m = WRITTEN.match(text.strip())
    if not m:
        return None
    value = float(m.group("digits").replace(",", "").replace("_", ""))
    return value * MULTIPLIERS.get(m.group("mult") or "", 1.0)


def blank_sheet(page: str, title: str, items: list[Item]) -> str:
    name = page.rsplit("/", 1)[-1].removesuffix(".md")
    out = [f"# {title} -- answer sheet",
           "# Write each prediction before you run anything; then run the page's commands and",
           "# write what you measured. A number, or a word where the question asks for one.",
           "# Grade it: docs/tools/check_exercises.py --student THIS_FILE",
           f"exercise: {name}", ""]
    for kind, heading in (("predict", "predictions"), ("measure", "measurements")):
        out.append(f"## {heading}")
        if kind == "measure":
            out += ["# Under each measurement, paste the lines of output you read it from, each after",
                    "# a `> `: cm-load's `connections`, `requests`, `errors` and `fairness` lines, or the",
                    "# line of burst or curl. The grader checks the value against them."]
        for item in items:
            if item.kind == kind:
                out += [f"# {item.text}", f"{item.key}:"]
        out.append("")
    return "\n".join(out)


def read_student(text: str) -> tuple[str, dict[str, str], list[str]]:
    """(exercise, key -> value as written, problems) of a filled-in sheet (quotes: read_quotes)."""
    exercise, values, problems = "", {}, []
    for n, raw in enumerate(text.split("\n"), start=1):
        if raw.lstrip().startswith(">"):
            continue  # a quoted line of output
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            problems.append(f"line {n}: `{raw.strip()}`: not `key: value`")
            continue
        key = key.strip()
        if key == "exercise":
            exercise = value.strip()
        else:
            values[key] = value.strip()
    if not exercise:
        problems.append("no `exercise: NN-name` line: which exercise is this sheet for?")
    return exercise, values, problems


def read_quotes(text: str) -> dict[str, list[str]]:
    """The lines of output quoted under each measurement: `> ` lines after its `key: value` line."""
    quotes: dict[str, list[str]] = {}
    key = ""
    for raw in text.split("\n"):
        stripped = raw.strip()
        if stripped.startswith(">"):
            if key:
                quotes.setdefault(key, []).append(stripped[1:].strip())
            continue
        line = raw.split("#", 1)[0].strip()
        if line:
            key = line.partition(":")[0].strip()
    return quotes


#: What the quoted lines of a cm-load report say (cm-load's summary, harness/cm-load).
QUOTED = {
    "connections": re.compile(r"(?P<open>\d+)/(?P<asked>\d+) connections,.*?(?P<seconds>[\d.]+) s measured"),
    "requests": re.compile(r"requests (?P<requests>\d+)\s+rps (?P<rps>[\d.]+)"),
    "errors": re.compile(r"errors (?P<errors>\d+) \("),
}
CONNECTIONS_ASKED = re.compile(r"-c\s+(?P<n>[\d,]+)")


def check_quote(item: Item, have: float, lines: list[str]) -> list[str]:
    """What is wrong with the lines a measurement quotes as its source (empty: they hold up): the
    value must be in them; a cm-load report's requests and seconds must give its rps; a report of
    a run with errors, or with another connection count than the measurement's, is not its run."""
    text = "\n".join(lines)
    numbers = [float(x.replace(",", "")) for x in re.findall(r"(?<![\w.])\d[\d,]*\.?\d*", text)]
    problems = []
    if not any(abs(x - have) <= max(abs(have) * CEILING_SLACK, 1e-9) for x in numbers):
        problems.append(f"{have:g} is nowhere in the lines quoted under it")
    found = {name: rx.search(text) for name, rx in QUOTED.items()}
    c, r, e = found["connections"], found["requests"], found["errors"]
    if c and r:
        rps = int(r.group("requests")) / float(c.group("seconds"))
        if abs(rps - float(r.group("rps"))) > 0.01 * rps + 0.1:
            problems.append(f"the quoted report does not add up: {r.group('requests')} requests in "
                            f"{c.group('seconds')} s are {rps:.1f} rps, not {r.group('rps')}")
    counts_errors = "error" in item.text.lower() or (e and int(e.group("errors")) == have)
    if e and int(e.group("errors")) > 0 and not counts_errors:
        problems.append(f"the quoted run had {e.group('errors')} errors: its rps counts correct answers only")
    asked = CONNECTIONS_ASKED.search(item.text)
    if c and asked and int(asked.group("n").replace(",", "")) != int(c.group("asked")):
        problems.append(f"the quoted run had {c.group('asked')} connections; this measurement is at "
                        f"{asked.group('n')}")
    return problems


def differs(have: float, want: float, tolerance: float) -> tuple[bool, str]:
    """Whether `have` is within `tolerance` (a fraction) of `want`, and by how much it is off."""
    gap = have - want
    if want == 0:
        ok = abs(gap) <= tolerance
        return ok, f"{gap:+g}"
    rel = gap / abs(want)
    return abs(rel) <= tolerance, f"{rel:+.1%}"


@dataclass
class Grade:
    lines: list[str]
    right: int = 0
    wrong: int = 0
    agree: int = 0
    disagree: int = 0
    missing: int = 0
    not_run: int = 0  # measurements that cannot have come from a run (0; copied; past a bound)
    quoted: int = 0  # measurements whose quoted output holds up
    unquoted: int = 0  # measurements with no output quoted under them


def grade(items: list[Item], values: dict[str, str], quotes: dict[str, list[str]] | None = None) -> Grade:
    """Each prediction against its answer; each measurement against its rules, and against the
    output quoted under it (read_quotes) where there is some."""
    g = Grade([])
    predictions: dict[str, float] = {}
    for item in items:
        written = values.get(item.key, "")
        if not written:
            g.missing += 1
            g.lines.append(f"  {item.key}: not filled in -- {item.text}")
            continue
        have = number(written)
        if item.kind == "predict":
            if have is not None:
                predictions[item.key] = have
            if item.rule != "answer":
                g.lines.append(f"  {item.key} = {written}: your prediction (no single answer; your measurement says)")
                continue
            want = number(item.value)
            if want is None or have is None:
                ok = written.lower().rstrip("s") == item.value.lower().rstrip("s")
                off = "" if ok else f"; the answer is {item.value}"
            else:
                ok, rel = differs(have, want, item.tolerance)
                off = "" if ok else f"; the answer is {item.value} (yours is {rel} off)"
            g.right += ok
            g.wrong += not ok
            g.lines.append(f"  {item.key} = {written}: {'right' if ok else 'WRONG'}{off}")
    tested = []
    for item in items:
        if item.kind != "measure" or not values.get(item.key):
            continue
        written = values[item.key]
        have = number(written)
        if have is not None and quotes is not None:
            _check_quote(g, item, written, have, quotes.get(item.key, []))
        if item.rule != "tests" and not (item.below or item.above or item.with_):
            g.lines.append(f"  {item.key} = {written}: measured (recorded, tests no prediction)")
            continue
        if have is None:
            g.disagree += 1
            g.lines.append(f"  {item.key} = {written}: not a number")
            continue
        if item.below or item.above:
            _check_bounds(g, item, written, have, predictions)
        if item.with_:
            _check_with(g, item, written, have, predictions, values)
        if item.rule != "tests":
            continue
        try:
            want = evaluate(item.value, predictions)
        except KeyError as e:
            g.lines.append(f"  {item.key} = {written}: tests {item.value}, but your {e.args[0]} is not a number")
            continue
        except ZeroDivisionError:
            g.lines.append(f"  {item.key} = {written}: tests {item.value}, which divides by zero with your predictions")
            continue
        tested.append((have, want))
        if have == 0 and want != 0:
            g.not_run += 1
            g.lines.append(f"  {item.key} = {written}: NOT A MEASUREMENT: a run that measured nothing "
                           f"(0, where you predicted {want:g}); run the page's command and copy what it printed")
            continue
        ok, rel = differs(have, want, item.tolerance)
        what = item.value if item.value in predictions else f"{item.value} = {want:g}"
        if ok:
            g.agree += 1
            g.lines.append(f"  {item.key} = {written}: agrees with your {what} ({rel}, within {item.tolerance:.0%})")
        else:
            g.disagree += 1
            g.lines.append(f"  {item.key} = {written}: DISAGREES with your {what}: {rel} "
                           f"(more than {item.tolerance:.0%}) -- which is wrong, the prediction or the run?")
    copied = [(h, w) for h, w in tested if w != 0]
    if len(copied) >= 2 and all(h == w for h, w in copied):
        g.not_run += 1
        g.lines.append("  NOT MEASURED: every measurement equals its prediction exactly, as no run "
                       "does; the measurements must be what the commands printed")
    return g


def _check_bounds(g: Grade, item: Item, written: str, have: float,
                  predictions: dict[str, float]) -> None:
    """A measurement above the ceiling, or below the floor, the student predicted for it: no run
    can measure that."""
    for expr, sign in ((item.below, 1), (item.above, -1)):
        if not expr:
            continue
        try:
            bound = evaluate(expr, predictions)
        except (KeyError, ZeroDivisionError):
            continue  # the tests rule says what is missing
        if sign * have > sign * bound * (1 + sign * CEILING_SLACK):
            g.not_run += 1
            what, why = (("ABOVE THE CEILING", "answer more than its ceiling") if sign > 0
                         else ("BELOW THE FLOOR", "do better than its floor"))
            g.lines.append(f"  {item.key} = {written}: {what} you predicted for it, {expr} = {bound:g}: "
                           f"a run cannot {why} (a wrong bound, or a value not from this run)")


def _check_with(g: Grade, item: Item, written: str, have: float, predictions: dict[str, float],
                values: dict[str, str]) -> None:
    """A measurement against the sheet's others: what any run on any machine must show."""
    names = {**predictions, **{k: v for k, raw in values.items() if (v := number(raw)) is not None}}
    try:
        want = evaluate(item.with_, names)
    except (KeyError, ZeroDivisionError) as e:
        g.lines.append(f"  {item.key} = {written}: with {item.with_}, which your sheet cannot give ({e})")
        return
    ok, rel = differs(have, want, item.with_tolerance)
    if ok:
        g.agree += 1
        g.lines.append(f"  {item.key} = {written}: consistent with {item.with_} = {want:g} ({rel}, "
                       f"within {item.with_tolerance:.0%})")
    else:
        g.disagree += 1
        g.lines.append(f"  {item.key} = {written}: INCONSISTENT with {item.with_} = {want:g}: {rel} "
                       f"(more than {item.with_tolerance:.0%}) -- two runs of the same page disagree; "
                       "run both again")


def _check_quote(g: Grade, item: Item, written: str, have: float, lines: list[str]) -> None:
    if not lines:
        g.unquoted += 1
        return
    problems = check_quote(item, have, lines)
    if problems:
        g.not_run += 1
        g.lines.append(f"  {item.key} = {written}: THE QUOTED OUTPUT DOES NOT HOLD IT UP: " + "; ".join(problems))
    else:
        g.quoted += 1
