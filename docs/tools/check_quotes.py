#!/usr/bin/python3
"""Checks that every code block in the docs that names its source quotes that source exactly.

A fenced block names its source on its first line, as a comment (`//` or `#`), in one of three forms:

    // asio_coro/src/connection.cpp, [plan-visit-asio_coro]   the region between the two marker lines
    // [plan-visit-asio_coro]                                  the same, the file found by the marker
    // uring_coro/src/runtime/task.cpp                         the whole file (keep it to small ones)

A region is everything between two lines that read `// [name]` (or `# [name]`) and nothing else; a
name marks exactly one region in one file. Marker lines of other regions nested inside are left out
of the quote. The rest of the block must equal the region byte for byte, once the indentation
common to its lines is stripped from each side (a blank line counts as empty).

A block without such a first line is prose or pseudo-code and is not compared -- unless every line
of it appears in one source file, in which case it is reported as an unnamed quote: name its source
(so it is checked) or rewrite it as pseudo-code.

Usage (from anywhere in the repository; with Debian's /usr/bin/python3, standard library only):

    docs/tools/check_quotes.py            check; exit 1 with doc:line, source, marker and a diff
    docs/tools/check_quotes.py --fix      rewrite every drifted quote from its source
    docs/tools/check_quotes.py --list     print every quote and the region it comes from

The docs checked: README.md, docs/**/*.md, results/README.md (doclib.DOC_GLOBS).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doclib  # noqa: E402

NAME = r"[A-Za-z0-9_.:+-]+"
COMMENT = re.compile(r"^\s*(?://|#)\s*(?P<ref>\S.*?)\s*$")
MARKER_ONLY = re.compile(r"^\[(?P<name>" + NAME + r")\]$")
PATH_REF = re.compile(r"^(?P<path>[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*)(?P<rest>(?:,.*)?)$")
PATH_MARKER = re.compile(r"^,\s*\[(?P<name>" + NAME + r")\]$")
MARKER_LINE = re.compile(r"^\s*(?://|#)\s*\[(?P<name>" + NAME + r")\]\s*$")

# Source files an unnamed block is compared against; docs and results are not sources.
SOURCE_SKIP_TOP = {"docs", "results"}
MAX_DIFF_LINES = 40
FIX_HINT = "/usr/bin/python3 docs/tools/check_quotes.py --fix"


@dataclass
class Claim:
    """What a block's first line says it quotes."""

    path: str | None  # relative to the root; None: find the file by the marker
    name: str | None  # the marker; None: the whole file


@dataclass
class Region:
    path: str
    name: str | None
    first_line: int  # 1-based, the region's first line in the source (after the opening marker)
    last_line: int
    lines: list[str]


class QuoteError(Exception):
    pass


def parse_claim(first: str) -> Claim | str | None:
    """The claim of a block's first line; None if it names no source; a message if it is malformed."""
    m = COMMENT.match(first)
    if not m:
        return None
    ref = m.group("ref")
    marker = MARKER_ONLY.match(ref)
    if marker:
        return Claim(None, marker.group("name"))
    p = PATH_REF.match(ref)
    if not p:
        return None
    path, rest = p.group("path"), p.group("rest")
    if "/" not in path and not re.search(r"\.[A-Za-z0-9]+$", path):
        return None  # `# build` or `// note`: a comment, not a file
    if not rest:
        return Claim(path, None)
    named = PATH_MARKER.match(rest)
    if named:
        return Claim(path, named.group("name"))
    return (
        f"the first line names {path} but then `{rest.strip()}`, not `, [marker]`: "
        "quote a marked region (add `// [name]` lines around it in the source) or drop the "
        "source line and make the block prose or pseudo-code"
    )


def read_source(root: str, rel: str) -> list[str]:
    full = os.path.join(root, rel)
    if not os.path.isfile(full):
        raise QuoteError(f"{rel} does not exist (named by the block's first line)")
    lines = doclib.read_lines(full)
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    return lines


def region_of(root: str, rel: str, name: str | None) -> Region:
    lines = read_source(root, rel)
    if name is None:
        return Region(rel, None, 1, len(lines), lines)
    at = [i for i, line in enumerate(lines) if (m := MARKER_LINE.match(line)) and m.group("name") == name]
    if not at:
        raise QuoteError(f"{rel} has no marker line `// [{name}]`")
    if len(at) == 1:
        raise QuoteError(
            f"{rel} has one `[{name}]` line (line {at[0] + 1}); a region needs an opening and a closing one"
        )
    if len(at) > 2:
        where = ", ".join(str(i + 1) for i in at)
        raise QuoteError(f"{rel} has `[{name}]` on lines {where}; a name marks one region")
    body = [line for line in lines[at[0] + 1 : at[1]] if not MARKER_LINE.match(line)]
    return Region(rel, name, at[0] + 2, at[1], body)


def marker_index(root: str) -> dict[str, list[str]]:
    """Every marker name in the source tree -> the files that hold it."""
    index: dict[str, list[str]] = {}
    for rel, lines in source_files(root).items():
        names = {m.group("name") for line in lines if (m := MARKER_LINE.match(line))}
        for name in names:
            index.setdefault(name, []).append(rel)
    return index


_sources_cache: dict[str, dict[str, list[str]]] = {}


def source_files(root: str) -> dict[str, list[str]]:
    """The text files of the tree outside docs/, results/ and build trees, as lines."""
    if root in _sources_cache:
        return _sources_cache[root]
    files: dict[str, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in doclib.SKIP_DIRS
            and not d.startswith("build")
            and not (rel_dir == "." and d in SOURCE_SKIP_TOP)
            and not d.startswith(".")
        )
        for name in sorted(filenames):
            if name.endswith((".md", ".png", ".json", ".csv")):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name))
            try:
                if os.path.getsize(os.path.join(root, rel)) > 2_000_000:
                    continue
                files[rel] = doclib.read_lines(os.path.join(root, rel))
            except (UnicodeDecodeError, OSError):
                continue
    _sources_cache[root] = files
    return files


def resolve(root: str, claim: Claim) -> Region:
    if claim.path is not None:
        return region_of(root, os.path.normpath(claim.path), claim.name)
    holders = marker_index(root).get(claim.name, [])
    if not holders:
        raise QuoteError(f"no source file has a marker line `// [{claim.name}]`")
    if len(holders) > 1:
        raise QuoteError(f"`[{claim.name}]` marks regions in {', '.join(holders)}; name the file")
    return region_of(root, holders[0], claim.name)


def unnamed_quote_source(root: str, body: list[str]) -> str | None:
    """The source file an unnamed block is a verbatim excerpt of, if any (every telling line in it)."""
    telling = [line.strip() for line in body if len(line.strip()) >= 8]
    if len(telling) < 2 or any(line.startswith("$ ") for line in telling):
        return None
    for rel, lines in source_files(root).items():
        stripped = {line.strip() for line in lines}
        if all(line in stripped for line in telling):
            return rel
    return None


def describe(region: Region) -> str:
    what = f"[{region.name}]" if region.name else "(the whole file)"
    return f"{region.path} {what}, lines {region.first_line}-{region.last_line} there"


def short_diff(doc: str, doc_line: int, region: Region, quoted: list[str], source: list[str]) -> str:
    diff = list(
        difflib.unified_diff(
            quoted,
            source,
            fromfile=f"{doc}:{doc_line} (the doc's quote)",
            tofile=f"{region.path}:{region.first_line} (the source now)",
            lineterm="",
            n=1,
        )
    )
    # Hunk headers in absolute line numbers of both files: "@@ -2,3 +2,3 @@" says little to a reader.
    def absolute(m: re.Match) -> str:
        at_doc = doc_line + int(m.group(1)) - 1
        at_source = region.first_line + int(m.group(2)) - 1
        return f"@@ {doc}:{at_doc} / {region.path}:{at_source} @@"

    diff = [re.sub(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@.*$", absolute, line) for line in diff]
    if len(diff) > MAX_DIFF_LINES:
        diff = diff[:MAX_DIFF_LINES] + [f"... ({len(diff) - MAX_DIFF_LINES} more diff lines)"]
    return "\n".join("    " + line for line in diff)


def check(root: str, fix: bool, listing: bool, every_md: bool) -> int:
    failures: list[str] = []
    fixed: list[str] = []
    quotes = unnamed = 0
    docs = doclib.doc_files(root, every_md)
    for doc in docs:
        lines = doclib.read_lines(os.path.join(root, doc))
        replacements: list[tuple[int, int, list[str]]] = []  # (first body index, end index, new lines)
        for block in doclib.fences(lines):
            where = f"{doc}:{block.open_line}"
            if block.close_line is None:
                failures.append(f"{where}: the code block is never closed")
                continue
            claim = parse_claim(block.body[0]) if block.body else None
            if claim is None:
                unnamed += 1
                source = unnamed_quote_source(root, block.body)
                if source:
                    failures.append(
                        f"{where}: this block names no source, but every line of it is in {source}.\n"
                        f"    Either quote a marked region (first line `// {source}, [name]`, with `// [name]`\n"
                        f"    lines around the region in the source), or rewrite it as pseudo-code."
                    )
                continue
            if isinstance(claim, str):
                failures.append(f"{where}: {claim}")
                continue
            quotes += 1
            try:
                region = resolve(root, claim)
            except QuoteError as e:
                failures.append(
                    f"{where}: {e}.\n    The marker may have been renamed or removed: restore it, or "
                    "point the block at the region that now holds the code."
                )
                continue
            if listing:
                print(f"{where}: {describe(region)}")
            quoted = doclib.dedent(block.body[1:])
            source = doclib.dedent(region.lines)
            if quoted == source:
                continue
            if fix:
                new = [block.indent + line if line else "" for line in source]
                replacements.append((block.open_line + 1, block.close_line - 1, new))
                fixed.append(f"{where}: rewrote the quote from {describe(region)}")
                continue
            failures.append(
                f"{where}: the quote of {describe(region)} differs from the source:\n"
                + short_diff(doc, block.open_line + 2, region, quoted, source)
                + f"\n    If the source is right, run `{FIX_HINT}` and reread the prose around the quote."
            )
        if replacements:
            # lines is 0-based; a block's body (after its source line) is lines[open_line + 1 : close_line - 1]
            for first, end, new in sorted(replacements, reverse=True):
                lines[first:end] = new
            with open(os.path.join(root, doc), "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
    for line in fixed:
        print(line)
    if failures:
        for message in failures:
            print(message, file=sys.stderr)
        print(
            f"check_quotes: {len(failures)} problem(s) in {len(docs)} pages "
            f"({quotes} blocks name a source, {unnamed} do not)",
            file=sys.stderr,
        )
        return 1
    verb = "match their sources now" if fixed else "match their sources"
    print(f"check_quotes: {quotes} quoted blocks in {len(docs)} pages {verb}; {unnamed} blocks name no source")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="the repository root (default: found above this script)")
    parser.add_argument("--fix", action="store_true", help="rewrite drifted quotes from their sources")
    parser.add_argument("--list", action="store_true", help="print every quote and its region")
    parser.add_argument("--all", action="store_true", help="every .md file of the tree, not only the docs")
    args = parser.parse_args()
    root = os.path.abspath(args.root) if args.root else doclib.find_root(os.path.dirname(__file__))
    return check(root, args.fix, args.list, args.all)


if __name__ == "__main__":
    sys.exit(main())
