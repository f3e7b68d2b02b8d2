#!/usr/bin/python3
"""Checks that the docs point only at things that exist in the repository.

For every page (README.md, docs/**/*.md, results/README.md; --all: every .md file of the tree):

- every relative link -- `[text](path)`, `[text](path#anchor)`, `![chart](path)`, `[id]: path`,
  `<a href="path">` -- resolves to a file or folder of the repository that git tracks (or would
  add: untracked files that are not ignored count, so a new page can be checked before it is
  committed); a link ending in `/` must be a folder;
- every `#anchor` names a heading (GitHub's slugs) or an `<a id>` of the page it points at;
- every path in a code span of the prose whose first folder is a top-level folder of the
  repository (`common/include/cm/work.hpp`, `harness/waiting-cost`, `results/quick/`) exists, so
  a renamed source file cannot leave a code map behind. Spans with placeholders (`<pid>`, `{ms}`)
  are skipped; `*` is a glob that must match something. Fenced blocks are not read: they hold
  commands and output of past runs, with paths of their own time (build/h-uring2/...).

- the reading order: docs/README.md lists the pages as a numbered list of links; each page of
  it must end with `Previous: [..](the page before)` and `Next: [..](the page after)` (the first
  page has no Previous, the last no Next), so adding a page to the order cannot leave the chain
  broken.

Links with a scheme (https:, mailto:) are not followed: nothing is downloaded.

Usage (with Debian's /usr/bin/python3, standard library only):

    docs/tools/check_links.py           check; exit 1 with page:line, the link and what is wrong
"""

from __future__ import annotations

import argparse
import difflib
import glob
import os
import re
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doclib  # noqa: E402

INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # [text], one level of nested brackets
    r"\(\s*(?P<target><[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"  # (target
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # "title")
)
REFERENCE_DEF = re.compile(r"^[ ]{0,3}\[[^\]]+\]:\s*(?P<target><[^>]*>|\S+)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*\"(?P<target>[^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)\s*=\s*\"(?P<id>[^\"]+)\"", re.I)
CODE_SPAN = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)", re.S)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
PATH_MENTION = re.compile(r"^[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+*-]*)+$")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in "LN" or category in ("Mn", "Mc"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


_anchor_cache: dict[str, set[str]] = {}


def anchors_of(path: str) -> set[str]:
    """Every anchor a Markdown file offers: heading slugs (with GitHub's -1, -2 for repeats), <a id>."""
    if path in _anchor_cache:
        return _anchor_cache[path]
    lines = doclib.read_lines(path)
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, text in doclib.prose_lines(lines):
        m = HEADING.match(text)
        if m:
            base = slug(m.group("text"))
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        for a in HTML_ANCHOR.finditer(text):
            found.add(a.group("id"))
    _anchor_cache[path] = found
    return found


def paragraphs(lines: list[str]) -> list[tuple[int, str]]:
    """Runs of consecutive prose lines (fenced blocks and blank lines split them): (first line, text)."""
    runs: list[tuple[int, str]] = []
    current: list[str] = []
    start = prev = 0
    for n, text in doclib.prose_lines(lines):
        if current and (n != prev + 1 or not text.strip()):
            runs.append((start, "\n".join(current)))
            current = []
        if text.strip():
            if not current:
                start = n
            current.append(text)
        prev = n
    if current:
        runs.append((start, "\n".join(current)))
    return runs


def blank_code_spans(text: str) -> tuple[str, list[tuple[int, str]]]:
    """The text with every code span blanked (newlines kept), and the spans as (offset, code)."""
    spans: list[tuple[int, str]] = []

    def blank(m: re.Match) -> str:
        spans.append((m.start("code"), m.group("code")))
        return re.sub(r"[^\n]", " ", m.group(0))

    return CODE_SPAN.sub(blank, text), spans


class Checker:
    def __init__(self, root: str):
        self.root = root
        self.tracked = doclib.tracked_files(root)
        self.tracked_dirs: set[str] = set()
        if self.tracked is not None:
            for rel in self.tracked:
                parts = rel.split(os.sep)
                for i in range(1, len(parts)):
                    self.tracked_dirs.add(os.sep.join(parts[:i]))
            self.top_dirs = {d for d in self.tracked_dirs if os.sep not in d}
        else:
            self.top_dirs = {
                d
                for d in os.listdir(root)
                if os.path.isdir(os.path.join(root, d)) and d not in doclib.SKIP_DIRS and not d.startswith((".", "build"))
            }
        self.failures: list[str] = []
        self.links = self.mentions = 0

    def known(self, rel: str) -> str | None:
        """None if rel (relative to the root) is a file or folder of the repository; else what is wrong."""
        full = os.path.join(self.root, rel)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            return "it leads out of the repository" if rel != "." else None
        if not os.path.exists(full):
            return "no such file or folder"
        if self.tracked is None:
            return None
        if os.path.isdir(full):
            return None if rel in self.tracked_dirs else "the folder holds nothing git knows"
        return None if rel in self.tracked else "the file exists here but git does not know it (ignored?)"

    def check_link(self, doc: str, line: int, target: str) -> None:
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        if not target or SCHEME.match(target) or target.startswith("//"):
            return
        self.links += 1
        path, _, anchor = target.partition("#")
        path = path.split("?", 1)[0]
        where = f"{doc}:{line}: link `{target}`"
        if path:
            base = self.root if path.startswith("/") else os.path.join(self.root, os.path.dirname(doc))
            rel = os.path.normpath(os.path.relpath(os.path.join(base, path.lstrip("/")), self.root))
            problem = self.known(rel)
            if problem:
                self.failures.append(f"{where}: {problem} (resolved to {rel})")
                return
            if path.endswith("/") and not os.path.isdir(os.path.join(self.root, rel)):
                self.failures.append(f"{where}: ends in / but {rel} is a file")
                return
        else:
            rel = doc
        if anchor:
            full = os.path.join(self.root, rel)
            if not rel.endswith(".md") or not os.path.isfile(full):
                return  # an anchor into a source file (#L10) or a folder: GitHub's business
            anchors = anchors_of(full)
            if anchor not in anchors:
                near = difflib.get_close_matches(anchor, sorted(anchors), n=3)
                hint = f"; did you mean {', '.join('#' + a for a in near)}?" if near else ""
                self.failures.append(f"{where}: {rel} has no heading or <a id> with the anchor #{anchor}{hint}")

    def check_mention(self, doc: str, line: int, code: str) -> None:
        words = code.split()
        if not words:
            return
        token = words[0].rstrip(".,;:")
        if not PATH_MENTION.match(token) or any(c in token for c in "<>{}$"):
            return
        first = token.split("/", 1)[0]
        if first not in self.top_dirs or first.startswith("build"):
            return
        self.mentions += 1
        rel = os.path.normpath(token)
        where = f"{doc}:{line}: `{code}`"
        if "*" in token:
            if not glob.glob(os.path.join(self.root, token)):
                self.failures.append(f"{where}: the pattern {token} matches no file")
            return
        problem = self.known(rel)
        if problem:
            self.failures.append(f"{where}: names {rel}, but {problem}")
        elif token.endswith("/") and not os.path.isdir(os.path.join(self.root, rel)):
            self.failures.append(f"{where}: ends in / but {rel} is a file")

    def check_doc(self, doc: str) -> None:
        lines = doclib.read_lines(os.path.join(self.root, doc))
        for start, text in paragraphs(lines):
            plain, spans = blank_code_spans(text)

            def line_of(offset: int) -> int:
                return start + text.count("\n", 0, offset)

            for m in INLINE_LINK.finditer(plain):
                target = text[m.start("target") : m.end("target")]
                self.check_link(doc, line_of(m.start()), target)
            for m in HTML_LINK.finditer(plain):
                self.check_link(doc, line_of(m.start()), m.group("target"))
            for offset, code in spans:
                self.check_mention(doc, line_of(offset), code)
        for n, text in doclib.prose_lines(lines):
            m = REFERENCE_DEF.match(text)
            if m:
                self.check_link(doc, n, m.group("target"))


ORDER_ITEM = re.compile(r"^\d+\.\s+\[[^\]]*\]\((?P<target>[^)\s#]+)\)")
FOOTER_LINK = re.compile(r"\b(?P<kind>Previous|Next): \[[^\]]*\]\((?P<target>[^)\s#]+)\)")
ORDER_PAGE = os.path.join("docs", "README.md")


def check_order(checker: Checker) -> None:
    """Each page of docs/README.md's numbered list links the one before and after it."""
    index = os.path.join(checker.root, ORDER_PAGE)
    if not os.path.isfile(index):
        return
    order: list[str] = []
    for n, text in doclib.prose_lines(doclib.read_lines(index)):
        m = ORDER_ITEM.match(text)
        if m:
            order.append(os.path.normpath(os.path.join("docs", m.group("target"))))
    for i, page in enumerate(order):
        full = os.path.join(checker.root, page)
        if not os.path.isfile(full):
            continue  # check_link reports the broken item
        found: dict[str, tuple[int, str]] = {}
        for n, text in doclib.prose_lines(doclib.read_lines(full)):
            for m in FOOTER_LINK.finditer(text):
                target = os.path.normpath(os.path.join(os.path.dirname(page), m.group("target")))
                found[m.group("kind")] = (n, target)  # the last one counts: the footer
        for kind, want in (("Previous", order[i - 1] if i > 0 else None), ("Next", order[i + 1] if i + 1 < len(order) else None)):
            have = found.get(kind)
            if want is None and have is not None:
                checker.failures.append(
                    f"{page}:{have[0]}: {kind}: leads to {have[1]}, but {ORDER_PAGE} puts no page {'before' if kind == 'Previous' else 'after'} this one"
                )
            elif want is not None and have is None:
                checker.failures.append(f"{page}: no `{kind}: [..]({os.path.relpath(want, os.path.dirname(page))})` at its end ({ORDER_PAGE}'s order)")
            elif want is not None and have[1] != want:
                checker.failures.append(f"{page}:{have[0]}: {kind}: leads to {have[1]}, but {ORDER_PAGE} puts {want} there")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="the repository root (default: found above this script)")
    parser.add_argument("--all", action="store_true", help="every .md file of the tree, not only the docs")
    args = parser.parse_args()
    root = os.path.abspath(args.root) if args.root else doclib.find_root(os.path.dirname(__file__))
    checker = Checker(root)
    docs = doclib.doc_files(root, args.all)
    for doc in docs:
        checker.check_doc(doc)
    check_order(checker)
    if checker.tracked is None:
        print("check_links: git could not list the files; checked existence only", file=sys.stderr)
    if checker.failures:
        for message in checker.failures:
            print(message, file=sys.stderr)
        print(
            f"check_links: {len(checker.failures)} problem(s) in {len(docs)} pages "
            f"({checker.links} links, {checker.mentions} paths in code spans)",
            file=sys.stderr,
        )
        return 1
    print(
        f"check_links: {checker.links} links and {checker.mentions} paths in code spans, "
        f"in {len(docs)} pages, all point at files and headings that exist"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
