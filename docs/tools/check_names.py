#!/usr/bin/python3
"""Every name the docs write in a code span exists: a test, a function or type, a flag, a target.

The quote check keeps quoted code equal to its source and the link check keeps paths real; this
check reads the names in the prose -- `Session`, `Ring::cancel_all()`, `as_tuple(deferred)`,
`--write-timeout`, `AClientThatNeverReadsIsLetGoAtTheWriteDeadline` -- and fails, naming the page
and line, when one of them does not exist:

- an identifier (a name with `_`, `::`, `.`, `->` or `()`, an inner capital, or one capitalised
  word) must occur in the project's sources -- every tracked file but the Markdown, results/ and
  docs/tools/ (the checkers, whose examples would keep a name alive) --
  or in the headers of the libraries the project links (Boost.Asio, libuv, liburing, llhttp,
  libstdc++, glibc and Linux); each part of `a::b` or `a.b` is looked up;
- a call written with arguments, `f(x, y)`, must occur as written (up to spaces and a cut after
  the arguments shown) in the sources or those headers: `as_tuple(use_awaitable)` is not the code
  when the code says `as_tuple(deferred)`;
- a test -- the second argument of a TEST, TEST_F or TEST_P in the sources -- must also be in the
  list its test binary prints (`--gtest_list_tests`) when the binaries are built;
- in a code map row (`| path | ... |`) every identifier must occur in that row's file;
- a `[marker]` must mark a region of a source file;
- a flag `--name` must be in the `--help` of the tool its span starts with (`cm-load ... --rate`),
  or of some project tool when the span holds the flag alone; `make target` must be a target of
  the Makefile;
- a commit hash is not a name: a page teaches the current code, and its history is in git.

A page lets through a name that is not code of this project -- an nginx directive, a name the
student is to write -- with a line `<!-- names: name1 name2 -->`; such a name that the sources
define after all is reported too, so the list cannot hide a real one.

Standard library only (Debian's /usr/bin/python3).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doclib  # noqa: E402
from check_links import CODE_SPAN, paragraphs  # noqa: E402

IDENT = r"[A-Za-z_~][A-Za-z0-9_]*"
QUALIFIED = rf"{IDENT}(?:(?:::|\.|->){IDENT})*"
NAME = re.compile(rf"^(?P<name>{QUALIFIED})(?P<call>\((?P<args>.*)\))?$", re.S)
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEST_MACRO = re.compile(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")
MARKER_SPAN = re.compile(r"^\[[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)+\]$")  # [plan-visit-blocking]
HASH = re.compile(r"^[0-9a-f]{7,40}$")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
ALLOW = re.compile(r"<!--\s*names:(?P<names>[^>]*)-->")
MAKE_TARGET = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)\s*:", re.M)

# The headers of what the project links, relative to /usr/include: the names a page may use
# that are not the project's own (io_uring_prep_timeout, uv_timer_start, co_spawn, std::jthread).
SYSTEM_HEADERS = (
    "boost/asio",
    "boost/asio.hpp",
    "boost/system",
    "c++",
    "liburing",
    "liburing.h",
    "uv",
    "uv.h",
    "llhttp.h",
    "linux",
    "asm-generic",
    "x86_64-linux-gnu/sys",
    "x86_64-linux-gnu/bits",
    "x86_64-linux-gnu/asm",
    "sys",
    "netinet",
    "arpa",
    "unistd.h",
    "signal.h",
    "fcntl.h",
    "errno.h",
    "time.h",
    "pthread.h",
    "stdlib.h",
    "malloc.h",
    "string.h",
    "gtest",
    "benchmark",
    "CLI",
    "nlohmann",
)

TOOLS_DIR = os.path.join("docs", "tools") + os.sep
# Commands whose flags are the project's own; everything else (curl, wrk, taskset) is not checked.
BIN_TOOLS = doclib.BIN_TOOLS


def is_code_like(name: str, call: bool) -> bool:
    """Whether a bare word is a name to look up, not an English word set in code type."""
    if call or any(sep in name for sep in ("::", ".", "->", "_")):
        return True
    return name[0].isupper() or any(c.isupper() for c in name[1:])


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


class Sources:
    """The project's tokens, its calls as written, its tests, its markers and the libraries' names."""

    def __init__(self, root: str, include_dir: str):
        self.root = root
        self.tokens: set[str] = set()
        self.text = ""  # every source file, squashed, for calls written with arguments
        self.file_tokens: dict[str, set[str]] = {}
        self.tests: set[str] = set()  # test names (TEST's second argument)
        self.suites: set[str] = set()
        self.markers: set[str] = set()
        squashed: list[str] = []
        for rel in sorted(doclib.tracked_files(root) or ()):
            if rel.endswith(".md") or rel.startswith("results" + os.sep) or rel.startswith(TOOLS_DIR):
                continue  # the docs, the results, and these checkers (whose examples name things)
            path = os.path.join(root, rel)
            try:
                with open(path, encoding="utf-8") as f:
                    content = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            found = set(TOKEN.findall(content))
            self.file_tokens[rel] = found
            self.tokens |= found
            squashed.append(squash(content))
            for suite, test in TEST_MACRO.findall(content):
                self.suites.add(suite)
                self.tests.add(test)
            self.markers.update(re.findall(r"(?://|#)\s*(\[[A-Za-z0-9_.-]+\])\s*$", content, re.M))
        self.system_tokens: set[str] = set()
        system_text: list[str] = []
        for entry in SYSTEM_HEADERS:
            path = os.path.join(include_dir, entry)
            files = [path] if os.path.isfile(path) else []
            for dirpath, _, names in os.walk(path):
                files.extend(os.path.join(dirpath, n) for n in names)
            for name in files:
                try:
                    with open(name, encoding="utf-8", errors="replace") as f:
                        content = f.read()
                except OSError:
                    continue
                self.system_tokens.update(TOKEN.findall(content))
                system_text.append(squash(content))
        self.text = "\n".join(squashed)
        self.system_text = "\n".join(system_text)

    def knows(self, token: str) -> bool:
        return token in self.tokens or token in self.system_tokens


def gtest_list(bin_dir: str) -> set[str] | None:
    """Every test name the built test binaries list; None when none is built."""
    if not bin_dir or not os.path.isdir(bin_dir):
        return None
    names: set[str] = set()
    ran = False
    for entry in sorted(os.listdir(bin_dir)):
        path = os.path.join(bin_dir, entry)
        if not entry.endswith("_test") or not os.access(path, os.X_OK):
            continue
        try:
            out = subprocess.run(
                [path, "--gtest_list_tests"], capture_output=True, text=True, timeout=60, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        ran = True
        for line in out.splitlines():
            if line.startswith(" "):
                names.add(line.split()[0].split("/")[0])
    return names if ran else None


class Helps(doclib.ToolHelp):
    """Each project tool's --help (doclib.ToolHelp), and every flag they have between them."""

    def every_flag(self) -> set[str] | None:
        """Every flag of every project tool; None when the binaries are not built (nothing to ask)."""
        if not os.path.isdir(self.bin_dir):
            return None
        words = [os.path.join("build/bin", t) for t in BIN_TOOLS]
        for folder in ("harness", "docs/tools"):
            if not os.path.isdir(os.path.join(self.root, folder)):
                continue
            for name in sorted(os.listdir(os.path.join(self.root, folder))):
                rel = f"{folder}/{name}"
                full = os.path.join(self.root, rel)
                if os.path.isfile(full) and os.access(full, os.X_OK) and not name.startswith("test_"):
                    words.append(rel)
        helps = [self.help_of(w) for w in words]
        if all(h is None for h in helps):
            return None
        return {f for h in helps if h for f in FLAG.findall(h)}


class Checker:
    def __init__(self, root: str, bin_dir: str, include_dir: str):
        self.root = root
        self.sources = Sources(root, include_dir)
        self.listed = gtest_list(bin_dir)
        self.helps = Helps(root, bin_dir)
        self.all_flags = self.helps.every_flag()
        try:
            with open(os.path.join(root, "Makefile"), encoding="utf-8") as f:
                self.make_targets = set(MAKE_TARGET.findall(f.read()))
        except OSError:
            self.make_targets = set()
        self.failures: list[str] = []
        self.checked = 0

    def fail(self, where: str, message: str) -> None:
        self.failures.append(f"{where}: {message}")

    def check_identifier(self, where: str, code: str, allowed: set[str], row_file: str | None) -> None:
        m = NAME.match(code.strip())
        if not m:
            return
        name, call, args = m.group("name"), m.group("call"), m.group("args")
        if not is_code_like(name, call is not None) or code.strip() in allowed or name in allowed:
            return
        self.checked += 1
        parts = [p for p in re.split(r"::|\.|->", name) if p and p != "~"]
        unknown = [p.lstrip("~") for p in parts if not self.sources.knows(p.lstrip("~"))]
        if unknown:
            self.fail(where, f"`{code}`: no {', '.join(unknown)} in the sources or the linked libraries' headers")
            return
        last = parts[-1].lstrip("~")
        if last in self.sources.tests and self.listed is not None and last not in self.listed:
            self.fail(where, f"`{code}`: a TEST in the sources, but no test binary lists it (--gtest_list_tests)")
        if call is not None and args.strip() and args.strip() != "...":
            written = squash(code)[:-1]  # up to the last argument shown: `f(a` matches `f(a, b)`
            if written not in self.sources.text and written not in self.sources.system_text:
                self.fail(where, f"`{code}`: the sources never call it with these arguments")
        if row_file is not None and last not in self.sources.file_tokens.get(row_file, set()):
            self.fail(where, f"`{code}`: the code map row points at {row_file}, which has no {last}")

    def check_command(self, where: str, code: str) -> None:
        words = code.split()
        if not words:
            return
        if words[0] == "make" and len(words) > 1 and re.match(r"^[a-z][\w-]*$", words[1]):
            self.checked += 1
            if words[1] not in self.make_targets:
                self.fail(where, f"`{code}`: the Makefile has no target {words[1]}")
            return
        flags = [w.split("=")[0] for w in words if FLAG.fullmatch(w.split("=")[0])]
        if not flags:
            return
        if words[0].startswith("--"):
            if self.all_flags is None:
                return
            self.checked += 1
            missing = [f for f in flags if f not in self.all_flags]
            if missing:
                self.fail(where, f"`{code}`: no project tool's --help has {', '.join(missing)}")
            return
        text = self.helps.help_of(words[0])
        if text is None:
            return  # not a project tool (curl, taskset, wrk), or not built here
        if len(words) > 1 and re.match(r"^[a-z][\w-]*$", words[1]):
            text += self.helps.help_of(words[0], words[1]) or ""
        have = set(FLAG.findall(text))
        self.checked += 1
        missing = [f for f in flags if f not in have]
        if missing:
            self.fail(where, f"`{code}`: {words[0]} --help has no {', '.join(missing)}")

    def check_span(self, where: str, code: str, allowed: set[str], row_file: str | None) -> None:
        stripped = code.strip()
        if stripped in allowed:
            return
        if HASH.match(stripped) and re.search(r"[a-f]", stripped) and re.search(r"[0-9]", stripped):
            self.fail(where, f"`{code}`: a commit hash; a page teaches the current code (its history is in git)")
            return
        if MARKER_SPAN.match(stripped):
            self.checked += 1
            if stripped not in self.sources.markers:
                self.fail(where, f"`{code}`: no source file has the marker {stripped}")
            return
        if " " in stripped or stripped.startswith("--"):
            self.check_command(where, stripped)
            return
        self.check_identifier(where, stripped, allowed, row_file)

    def check_doc(self, doc: str) -> None:
        lines = doclib.read_lines(os.path.join(self.root, doc))
        allowed: set[str] = set()
        for _, text in doclib.prose_lines(lines):
            for m in ALLOW.finditer(text):
                allowed.update(m.group("names").split())
        for name in sorted(allowed):
            if name in self.sources.tokens or name in self.sources.markers:
                self.fail(f"{doc}", f"`<!-- names: {name} -->` lets through a name the sources define: drop it from the list")
        for start, text in paragraphs(lines):
            for m in CODE_SPAN.finditer(text):
                line = start + text.count("\n", 0, m.start())
                row = text.split("\n")[line - start]
                row_file = self.row_file(row)
                self.check_span(f"{doc}:{line}", m.group("code"), allowed, row_file)

    def row_file(self, row: str) -> str | None:
        """The source file a code map row is about: its first cell is a path in a code span."""
        if not row.lstrip().startswith("|"):
            return None
        cells = row.strip().strip("|").split("|")
        first = re.fullmatch(r"\s*`([^`]+)`\s*", cells[0]) if cells else None
        if not first:
            return None
        rel = os.path.normpath(first.group(1))
        return rel if rel in self.sources.file_tokens else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="the repository root (default: found above this script)")
    parser.add_argument("--bin-dir", help="the built binaries (default: ROOT/build/bin)")
    parser.add_argument("--include-dir", default="/usr/include", help="the system headers")
    args = parser.parse_args()
    root = os.path.abspath(args.root) if args.root else doclib.find_root(os.path.dirname(__file__))
    bin_dir = args.bin_dir or os.path.join(root, "build", "bin")
    checker = Checker(root, bin_dir, args.include_dir)
    docs = doclib.doc_files(root)
    for doc in docs:
        checker.check_doc(doc)
    if checker.listed is None or checker.all_flags is None:
        print(f"check_names: no test binaries or tools in {bin_dir}: tests and flags checked against the sources only")
    if checker.failures:
        for message in checker.failures:
            print(message, file=sys.stderr)
        print(f"check_names: {len(checker.failures)} name(s) in {len(docs)} pages do not exist", file=sys.stderr)
        return 1
    print(f"check_names: {checker.checked} names in {len(docs)} pages, every one exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
