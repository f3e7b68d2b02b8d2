"""What the docs checks share: which Markdown files are the docs, and how to read their fenced blocks.

Standard library only: the checks run with Debian's /usr/bin/python3 and nothing else.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

# The pages the checks read, relative to the repository root: README.md, every page under docs/,
# and results/README.md (a page of the reading order in docs/README.md).
DOC_GLOBS = ("README.md", "docs/**/*.md", "results/README.md")

# Folders that never hold docs or quoted sources: build trees, the VCS.
SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}


def find_root(start: str) -> str:
    """The repository root: the nearest folder above `start` holding CMakeLists.txt and docs/."""
    here = os.path.abspath(start)
    while True:
        if os.path.isfile(os.path.join(here, "CMakeLists.txt")) and os.path.isdir(
            os.path.join(here, "docs")
        ):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise SystemExit(f"no repository root (CMakeLists.txt and docs/) above {start}")
        here = parent


def doc_files(root: str, every_md: bool = False) -> list[str]:
    """The docs, as paths relative to root, sorted. every_md: every .md file of the tree instead."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build"))
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            if not name.endswith(".md"):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if every_md or rel in ("README.md", os.path.join("results", "README.md")) or rel.startswith(
                "docs" + os.sep
            ):
                found.add(rel)
    return sorted(found)


def tracked_files(root: str) -> set[str] | None:
    """Files git tracks or would add (untracked but not ignored); None when git cannot tell."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.normpath(p) for p in out.decode("utf-8", "replace").split("\0") if p}


FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass
class Fence:
    """A fenced code block. Line numbers are 1-based, as an editor shows them."""

    open_line: int  # the ``` line
    close_line: int | None  # the closing ``` line; None if the file ends first
    indent: str  # the opening fence's indentation (a block inside a list item has some)
    info: str  # what follows the opening fence: `cpp`, `sh`, ...
    body: list[str] = field(default_factory=list)  # the lines between the fences, without '\n'


def fences(lines: list[str]) -> list[Fence]:
    """The fenced code blocks of a Markdown file given as its lines (without line ends)."""
    found: list[Fence] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        # An info string may not contain a backtick when the fence is made of backticks.
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        char, width = m.group("fence")[0], len(m.group("fence"))
        closing = re.compile(r"^[ \t]*" + re.escape(char) + "{" + str(width) + r",}[ \t]*$")
        block = Fence(i + 1, None, m.group("indent"), m.group("info").strip())
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            block.body.append(lines[j])
            j += 1
        if j < len(lines):
            block.close_line = j + 1
        found.append(block)
        i = j + 1
    return found


def prose_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(1-based line number, text) of every line outside fenced blocks."""
    inside: set[int] = set()
    for block in fences(lines):
        last = block.close_line if block.close_line is not None else len(lines)
        inside.update(range(block.open_line, last + 1))
    return [(n, text) for n, text in enumerate(lines, start=1) if n not in inside]


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def dedent(lines: list[str]) -> list[str]:
    """Strips the indentation common to the non-blank lines; a blank line becomes empty.

    The one normalisation the quote check makes: a block inside a list item is indented, and a
    region inside a function is too. Everything else is compared byte for byte.
    """
    cleaned = [line.rstrip("\r") for line in lines]
    cleaned = ["" if not line.strip() else line for line in cleaned]
    indents = [re.match(r"[ \t]*", line).group(0) for line in cleaned if line]
    if not indents:
        return cleaned
    common = os.path.commonprefix(indents)
    return [line[len(common):] if line else "" for line in cleaned]


# The project's commands whose --help the checks read: the built binaries, and the scripts under
# these folders (run with Debian's python3 when they end in .py).
BIN_TOOLS = ("cm-server", "cm-load", "cm-price", "cm-micro")
SCRIPT_FOLDERS = re.compile(r"^(harness|docs/tools|docs/exercises/tools|scripts)/[\w.-]+$")


class ToolHelp:
    """The --help text of each project tool (`build/bin/cm-load`, `cm-price`, `harness/burst`),
    read once; None for a tool that is not the project's or is not built."""

    def __init__(self, root: str, bin_dir: str):
        self.root = root
        self.bin_dir = bin_dir
        self.cache: dict[str, str | None] = {}

    def command_of(self, word: str) -> list[str] | None:
        base = word[len("build/bin/"):] if word.startswith("build/bin/") else word
        if base in BIN_TOOLS:
            path = os.path.join(self.bin_dir, base)
            return [path] if os.access(path, os.X_OK) else None
        if SCRIPT_FOLDERS.match(word):
            path = os.path.join(self.root, word)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return ["/usr/bin/python3", path] if word.endswith(".py") else [path]
        return None

    def help_of(self, word: str, sub: str | None = None) -> str | None:
        """The tool's --help; with sub, its subcommand's (`cm-price verify --help`)."""
        key = f"{word} {sub}" if sub else word
        if key not in self.cache:
            command = self.command_of(word)
            text = None
            if command:
                try:
                    done = subprocess.run(command + ([sub] if sub else []) + ["--help"],
                                          capture_output=True, text=True, timeout=60, cwd=self.root)
                    text = done.stdout + done.stderr
                except (OSError, subprocess.SubprocessError):
                    text = None
            self.cache[key] = text
        return self.cache[key]
