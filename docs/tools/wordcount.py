#!/usr/bin/python3
"""How long the docs are to read: each page of the reading order, and the total up to the first exercise.

A learner reads docs/README.md, then its numbered pages in order; the first link into
docs/exercises/ is where they stop reading and start doing. This prints the words of each page up
to there (the glossary is a reference, not in the order) and fails when a model page is longer
than --model-limit or the pages before the first exercise are longer than --order-limit together.

A word is what `wc -w` counts -- a run of non-blank characters, code blocks included -- in the
text a reader sees: HTML comments (the figure markers) and link targets are left out.
Run: /usr/bin/python3 docs/tools/wordcount.py [--root .]
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doclib  # noqa: E402

ORDER_PAGE = os.path.join("docs", "README.md")
ORDER_ITEM = re.compile(r"^\d+\.\s+\[[^\]]*\]\((?P<target>[^)\s#]+)\)")
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK_TARGET = re.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")


def words(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = COMMENT.sub(" ", text)
    text = LINK_TARGET.sub("]", text)
    return len(text.split())


def reading_order(root: str) -> list[str]:
    """docs/README.md, then the pages its numbered list gives, relative to root."""
    order = [ORDER_PAGE]
    for _, text in doclib.prose_lines(doclib.read_lines(os.path.join(root, ORDER_PAGE))):
        m = ORDER_ITEM.match(text)
        if m:
            order.append(os.path.normpath(os.path.join("docs", m.group("target"))))
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", help="the repository root (default: found above this script)")
    parser.add_argument("--model-limit", type=int, default=1500, help="words a model page may have")
    parser.add_argument("--order-limit", type=int, default=12000, help="words before the first exercise")
    args = parser.parse_args()
    root = os.path.abspath(args.root) if args.root else doclib.find_root(os.path.dirname(__file__))
    failures: list[str] = []
    total = 0
    first_exercise = None
    print(f"{'words':>6}  page (reading order of {ORDER_PAGE})")
    for page in reading_order(root):
        if page.startswith(os.path.join("docs", "exercises") + os.sep):
            first_exercise = page
            break
        n = words(os.path.join(root, page))
        total += n
        print(f"{n:>6}  {page}")
        if page.startswith(os.path.join("docs", "models") + os.sep) and n > args.model_limit:
            failures.append(f"{page}: {n} words, more than a model page's {args.model_limit}")
    print(f"{total:>6}  before the first exercise ({first_exercise or 'none in the order'})")
    if total > args.order_limit:
        failures.append(f"{total} words before the first exercise, more than {args.order_limit}")
    glossary = os.path.join(root, "docs", "glossary.md")
    if os.path.isfile(glossary):
        print(f"{words(glossary):>6}  docs/glossary.md (a reference, not counted)")
    for message in failures:
        print(f"wordcount: {message}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
