#!/usr/bin/python3
"""The size budgets that keep each part readable in one sitting, held by `make test`.

    scripts/budgets.py --root .        exit 0 when every budget holds (or is owed, see below), 1 if not
    scripts/budgets.py --root . --list every figure measured, within budget or not

The budgets (docs/design-notes.md says why each is what it is):

    model-lines   a model's src/ (its .cpp and .hpp) at most 400 lines: one sitting's reading;
                  its wait on the database (src/db.cpp, src/db.hpp) is counted apart:
    db-lines      each of a model's database files at most 150 lines (issue 37)
    tool-lines    a harness tool (harness/cmharness/tools/*.py) at most 300 lines: a thin shell
    harness-lines the harness's Python, its core and its tools with their launchers (its tests
                  left out), at most 8,500 lines in all: the measuring engine stays smaller than
                  what it measures would let it grow (issue 36)
    function      a function at most 80 lines, in harness/, common/, servers/ and every model
                  (Python functions from the ast; C++ function bodies by their braces)
    squeezed      no squeezed statement in the code (not the tests) of a model, common/ or servers/:
                  a comma expression used
                  as a statement (`a(), b();`, `return x = y, true;`), `return (void)f();`, or a
                  conditional used as a statement (`ok ? serve() : close();`)

OWED lists what exceeded a budget when the budget was set, each with its figure then: an owed
figure passes while it does not grow, and fails once it shrank (lower the entry, or remove it once
within budget), so the list only ever gets shorter. A figure over budget that is not owed fails.

Standard library only (Debian's /usr/bin/python3). Exit 2 on a usage error.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from dataclasses import dataclass

MODELS = ("blocking", "asio_coro", "libuv_callbacks", "uring_coro")
MODEL_LINES = 400
DB_LINES = 150
DB_FILES = ("db.cpp", "db.hpp")
TOOL_LINES = 300
HARNESS_LINES = 8_500
FUNCTION_LINES = 80
FUNCTION_FOLDERS = ("harness", "common", "servers") + MODELS
SQUEEZE_FOLDERS = ("common", "servers") + MODELS
CXX = (".cpp", ".hpp", ".h", ".cc")

# (budget, what) -> the figure when the budget was set (issue 36). Lower an entry as the debt is
# paid; remove it once the figure is within budget.
OWED = {
    # Raised once, by issues 35 and 37 (474, 435, 409 before): the Venue::database case and the
    # loop's pool in each model (their waits are in db.cpp, counted apart), and libuv's deferred
    # accept out of descriptors (+14). Issue 36 pays these down with the rest.
    ("model-lines", "asio_coro/src"): 484,
    # libuv_callbacks raised once more (471 -> 501), by issue 36's own rule: the 471 counted 17
    # squeezed statements, which the squeezed budget made plain lines (+37 at 561da8d, nothing else
    # changed); then a request read late at its deadline (+11) and a write deadline counted from
    # the last write that progressed (+9); paid back 27 (one write_reply per step, execute() giving
    # its outcome, the Query's step in db.cpp, one count from libuv's clock).
    ("model-lines", "libuv_callbacks/src"): 501,
    ("model-lines", "uring_coro/src"): 420,
    ("function", "harness/load/tests/test_server.cpp:TestServer::serve"): 97,
    # Set when this budget was (stop 55): issue 36 asks for 8,500 by removing what is written
    # twice and what no result or test uses. Until then no change may add to the total without
    # taking as much out elsewhere. 12,915 then; 12,909 after the ceiling's shape (+26) was paid
    # with validate's steps as a list, one ordering of disjoint pairs, one count / delay text.
    ("harness-lines", "harness"): 12_909,
}


@dataclass
class Finding:
    budget: str
    what: str  # a folder, a file, or file:function
    figure: int
    limit: int
    detail: str = ""

    def over(self) -> bool:
        return self.figure > self.limit


# -- reading sources ------------------------------------------------------------------------------

def files_under(root: str, folder: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files under root/folder with one of the suffixes (Python also by its #! line), sorted,
    leaving out build trees and tests' fixtures."""
    found = []
    for path, dirs, names in os.walk(os.path.join(root, folder)):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build", "__pycache__")))
        for name in sorted(names):
            full = os.path.join(path, name)
            if name.endswith(suffixes) or (".py" in suffixes and is_python_script(full)):
                found.append(full)
    return found


def is_python_script(path: str) -> bool:
    """A file without a suffix whose #! line names python (a tool's launcher)."""
    if "." in os.path.basename(path):
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def line_count(path: str) -> int:
    with open(path, errors="replace") as f:
        return sum(1 for _ in f)


def without_comments_and_strings(src: str) -> str:
    """C++ source with comments and string/char literals blanked, newlines kept (lines stay)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    pattern = r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, blank, src, flags=re.S)


# -- C++ functions and statements -----------------------------------------------------------------

CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{}()]*$|extern\s+\"C\"\s*$")
FUNCTION_HEAD = re.compile(r"\)\s*(const|noexcept|override|final|mutable|&|&&|\s)*"
                           r"(->\s*[\w:<>,\s*&]+)?\s*(:[^;{}]*)?$", re.S)


def cxx_functions(src: str) -> list[tuple[str, int, int, int]]:
    """(name, first line, last line, body start offset) of each function defined at namespace or
    class level in comment-free source: a `{` after a parameter list opens a body, its matching
    `}` closes it; lambdas and blocks inside belong to the function."""
    out = []
    depth_kinds = []  # for each open brace: "container" (namespace, class) or "other"
    start = 0  # where the text before the next brace begins
    i = 0
    while i < len(src):
        ch = src[i]
        if ch == "{":
            head = src[start:i]
            if all(k == "container" for k in depth_kinds) and FUNCTION_HEAD.search(head) \
                    and not CONTAINER.search(head):
                end = matching_brace(src, i)
                name = function_name(head)
                first = src.count("\n", 0, head_start(src, start, i)) + 1
                out.append((name, first, src.count("\n", 0, end) + 1, i))
                i = end + 1
                start = i
                continue
            if CONTAINER.search(head):
                depth_kinds.append("container")
            else:
                depth_kinds.append("other")
            start = i + 1
        elif ch == "}":
            if depth_kinds:
                depth_kinds.pop()
            start = i + 1
        elif ch == ";":
            start = i + 1
        i += 1
    return out


def matching_brace(src: str, at: int) -> int:
    depth = 0
    for j in range(at, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(src) - 1


def head_start(src: str, start: int, brace: int) -> int:
    """Where a function's declaration begins: its first non-blank character after `start`."""
    text = src[start:brace]
    return start + len(text) - len(text.lstrip())


def function_name(head: str) -> str:
    paren = head_params_open(head)
    words = re.findall(r"[~\w:]+(?:<[^<>]*>)?", head[:paren])
    return words[-1] if words else "?"


def head_params_open(head: str) -> int:
    """The `(` that opens the parameter list: the first top-level one after the name."""
    depth = 0
    for j, ch in enumerate(head):
        if ch == "(" and depth == 0:
            return j
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
    return len(head)


def statements(body: str) -> list[tuple[int, str]]:
    """(offset, text) of each `;`-ended statement in a function body, at bracket depth 0 of the
    block it is in (a lambda's body is a block: its statements are yielded too)."""
    out = []
    start = 0
    depth = 0
    saved = []  # the bracket depth outside each open brace
    for j, ch in enumerate(body):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "{" and opens_block(body, j):
            saved.append(depth)
            depth = 0
            start = j + 1
        elif ch == "{":
            saved.append(None)  # an initializer: its commas are inside brackets
            depth += 1
        elif ch == "}":
            outer = saved.pop() if saved else 0
            if outer is None:
                depth -= 1
            else:
                depth = outer
                start = j + 1
        elif ch == ";" and depth == 0:
            text = body[start:j]
            out.append((start + len(text) - len(text.lstrip()), text.strip()))
            start = j + 1
    return out


def opens_block(src: str, at: int) -> bool:
    """Whether the `{` at `at` opens a block (after `)`, `;`, a brace, `else`, `do`, `try`,
    `mutable`, a lambda's `]`, or at the start) rather than an initializer (`T{...}`, `= {...}`, `f({...})`)."""
    before = src[:at].rstrip()
    if not before or before[-1] in ");{}]":
        return True
    return re.search(r"\b(else|do|try|mutable|noexcept)$", before) is not None


def top_level(text: str, sep: str) -> int:
    """How many times `sep` occurs outside brackets and template arguments."""
    text = re.sub(r"<[\w:\s,*&<>]*>", "", text)
    depth, n = 0, 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            n += 1
    return n


DECLARATION = re.compile(r"^(?:(?:const|static|constexpr|inline|thread_local)\s+)*"
                         r"[\w:]+(?:<.*>)?[\s*&]+\w+\s*(?:=|\{|\(|,|\[|$)", re.S)
LABEL = re.compile(r"^(?:case\s+[^:]+|default)\s*:(?!:)\s*")


def squeezed(statement: str) -> bool:
    """A statement doing two things in one: `return (void)f()`, a conditional used as a statement,
    or a comma expression (not a declaration of several names, not a for loop's header)."""
    s = LABEL.sub("", statement)
    if s.startswith(("for", "using", "typedef", "template", "#", "friend", "static_assert")):
        return False
    if re.search(r"\breturn\s*\(void\)", s):
        return True
    if "?" in s and not re.match(r"(return|co_return|co_yield)\b", s) and "=" not in s.split("?")[0] \
            and top_level(s, "?") == 1 and re.search(r"\)\s*$", s):
        return True
    if top_level(s, ",") == 0:
        return False
    if re.match(r"(return|co_return)\b", s):
        return True
    return not DECLARATION.match(s) and bool(re.search(r"[=(]", s.split(",")[0]))


# -- the budgets ----------------------------------------------------------------------------------

def model_lines(root: str) -> list[Finding]:
    out = []
    for model in MODELS:
        files = [f for f in files_under(root, f"{model}/src", CXX)
                 if os.path.basename(f) not in DB_FILES]
        if files:
            out.append(Finding("model-lines", f"{model}/src", sum(map(line_count, files)), MODEL_LINES))
    return out


def db_lines(root: str) -> list[Finding]:
    return [Finding("db-lines", os.path.relpath(f, root), line_count(f), DB_LINES)
            for model in MODELS for f in files_under(root, f"{model}/src", CXX)
            if os.path.basename(f) in DB_FILES]


def tool_lines(root: str) -> list[Finding]:
    tools = os.path.join(root, "harness", "cmharness", "tools")
    return [Finding("tool-lines", os.path.relpath(p, root), line_count(p), TOOL_LINES)
            for p in files_under(root, os.path.relpath(tools, root), (".py",))
            if os.path.basename(p) != "__init__.py"]


def harness_lines(root: str) -> list[Finding]:
    files = [p for p in files_under(root, "harness", (".py",))
             if "tests" not in os.path.relpath(p, root).split(os.sep)]
    return [Finding("harness-lines", "harness", sum(map(line_count, files)), HARNESS_LINES)]


def python_functions(path: str) -> list[tuple[str, int, int]]:
    with open(path, errors="replace") as f:
        tree = ast.parse(f.read(), path)
    return [(node.name, node.lineno, node.end_lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def function_lengths(root: str) -> list[Finding]:
    out = []
    for folder in FUNCTION_FOLDERS:
        for path in files_under(root, folder, (".py",) + CXX):
            rel = os.path.relpath(path, root)
            if path.endswith(CXX):
                with open(path, errors="replace") as f:
                    found = [(n, a, b) for n, a, b, _ in cxx_functions(without_comments_and_strings(f.read()))]
            else:
                found = python_functions(path)
            out += [Finding("function", f"{rel}:{name}", last - first + 1, FUNCTION_LINES, f"line {first}")
                    for name, first, last in found]
    return out


def squeezed_statements(root: str) -> list[Finding]:
    """Per folder, the squeezed statements of its code (its tests and fuzz targets left out)."""
    out = []
    for folder in SQUEEZE_FOLDERS:
        hits = []
        for path in files_under(root, folder, CXX):
            if re.search(r"/(tests|fuzz)/", os.path.relpath(path, root)):
                continue
            with open(path, errors="replace") as f:
                src = without_comments_and_strings(f.read())
            for _, _, _, body_at in cxx_functions(src):
                body = src[body_at + 1:matching_brace(src, body_at)]
                for offset, text in statements(body):
                    if squeezed(text):
                        line = src.count("\n", 0, body_at + 1 + offset) + 1
                        hits.append(f"{os.path.relpath(path, root)}:{line}: {' '.join(text.split())}")
        out.append(Finding("squeezed", folder, len(hits), 0, "\n".join(hits)))
    return out


def measure(root: str) -> list[Finding]:
    return (model_lines(root) + db_lines(root) + tool_lines(root) + harness_lines(root)
            + function_lengths(root) + squeezed_statements(root))


def verdicts(findings: list[Finding], owed: dict) -> tuple[list[str], list[str]]:
    """(failures, owed lines): each figure over its budget and not owed, each owed figure that
    grew or shrank, and each owed entry nothing measured any more."""
    failures, owing = [], []
    seen = set()
    for f in findings:
        key = (f.budget, f.what)
        was = owed.get(key)
        if was is not None:
            seen.add(key)
            if f.figure > was:
                failures.append(f"{f.what}: {f.budget} {f.figure}, owed {was} and over budget {f.limit}: it grew")
            elif f.figure < was:
                failures.append(f"{f.what}: {f.budget} {f.figure}, owed {was}: lower the entry in OWED "
                                f"to {f.figure}" + (" (or remove it: within budget)" if not f.over() else ""))
            else:
                owing.append(f"{f.what}: {f.budget} {f.figure} (budget {f.limit}), owed")
        elif f.over():
            failures.append(f"{f.what}: {f.budget} {f.figure}, over budget {f.limit}"
                            + (f" ({f.detail.splitlines()[0]})" if f.detail else ""))
        if f.budget == "squeezed" and f.over() and f.figure != was:
            failures += [f"  {hit}" for hit in f.detail.splitlines()]
    failures += [f"{what}: {budget} owed in OWED but not measured: remove the entry"
                 for budget, what in owed if (budget, what) not in seen]
    return failures, owing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--list", action="store_true", help="every figure measured, within budget or not")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.root, "harness")):
        print(f"budgets: {args.root} is not the repository (no harness/)", file=sys.stderr)
        return 2
    findings = measure(args.root)
    if args.list:
        for f in findings:
            if f.budget != "function" or f.over():
                print(f"{f.budget:<12} {f.figure:>5} / {f.limit:<4} {f.what}")
    failures, owing = verdicts(findings, OWED)
    for line in owing:
        print(f"budgets: {line}")
    for line in failures:
        print(f"budgets: FAIL {line}")
    print(f"budgets: {len(findings)} figures, {len(owing)} owed, {len(failures)} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
