#!/usr/bin/python3
"""Every figure the docs cite was measured on the code as it is now, or verified on it since.

A page cites a figure with a fig comment (docs/tools/figures.py), and the README's headline block
(`<!-- headline: written by harness/plot from results/PROFILE/results.json -->` ...
`<!-- /headline -->`) cites every server of that profile. A figure of a model depends on the model's
folder and on the shared ones (cmharness.provenance.folders_of: asio_coro_uring -> asio_coro/,
common/, servers/); a peer's (nginx, node) depends on nothing here; a ratio `A B` on both servers.

The trees a results file was measured on: results/PROFILE/results.json, meta.provenance.trees (the
git tree hash of each folder, cmharness.provenance.tree_hashes()); an older file that recorded only
its commit (meta.commit.head) is read as the trees of that commit (also when it says the tree had
uncommitted changes: the old tools disagreed on what that meant).

A server's figures are fresh when those trees hold the working tree's code for each of its folders
(the same trees, or trees that differ only in tests, fuzz targets or prose:
cmharness.provenance.same_code), or when results/PROFILE/verifications.json (appended by `cm-price verify`) covers them: of the records
of that results file (results_started_utc == meta.started_utc) whose trees hold the current code
of the server's folders and which have claims naming the server, the last one decides (a later
"changed" on the same tree undoes an earlier "holds"). It covers nothing of the server when any of
its claims there is "changed" or "missing": the code changed what it measures. Otherwise a figure
of one row (`fig PROFILE SERVER[/VARIANT] ROW CONNECTIONS FIELD`) is covered when that row's claims
hold, whatever a claim of another row says ("noise" there cannot tell, and says nothing of this
row); a figure whose row has no claim (a CPU-ceiling row with no peer to be a ratio to), a ratio
between two servers and a headline are covered when every claim of the server holds. The current
trees are hashed once per run (tree_hashes(), the working tree as it is, committed or not).

    docs/tools/freshness.py --root .          exit 0 when every cited figure is fresh, 1 if not
    docs/tools/freshness.py --root . --list   every cited figure, fresh or stale, and why

Exit 2 on a usage error, 77 (ctest's "skipped") when the root is not a git checkout. Standard
library only (Debian's /usr/bin/python3).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(TOOLS)), "harness"))
from doclib import doc_files, find_root  # noqa: E402
from figures import FIGURE  # noqa: E402
from cmharness.provenance import folders_of, git, same_code, tree_hashes, trees_at  # noqa: E402

HEADLINE = re.compile(
    r"<!-- headline: [^>]*?from results/(?P<profile>[^/\s]+)/results\.json -->(?P<body>.*?)"
    r"<!-- /headline -->", re.S)
RATIO_KINDS = ("ratio", "times", "percent")
SKIPPED = 77


@dataclass
class Citation:
    """One figure a page cites: where, what it shows, and whose code it describes."""

    where: str  # page:line
    text: str  # the figure with its fig comment, or the headline's table row
    profile: str
    servers: list[str]
    row: tuple[str, str, str] | None = None  # (label, row id, connections) of a one-row figure


@dataclass
class Status:
    """Whether one server's figures of one results file are fresh, and why."""

    fresh: bool
    why: str
    moved: list[tuple[str, str | None, str | None]]  # (folder, recorded, current) that differ


def spec_row(spec: str) -> tuple[str, str, str] | None:
    """(label, row id, connections) of a one-server figure's spec, as its claims name the row:
    the label is "server (variant)", or the bare server for the standard variant."""
    words = spec.split()
    if len(words) != 5:
        return None
    server, _, variant = words[1].partition("/")
    label = server if variant in ("", "standard", "-") else f"{server} ({variant})"
    return label, words[2], words[3]


def claim_row(claim: dict) -> tuple[str, str, str] | None:
    """(label, row id, connections) of a verified claim; None for a record that predates them."""
    label, row = claim.get("label"), claim.get("row")
    if not label or not row:
        return None
    words = row.split()
    return label, words[0], words[-1]


def spec_servers(spec: str) -> tuple[str, list[str]]:
    """(profile, servers) of a fig comment's spec; the variant after '/' is not a server."""
    words = spec.split()
    if len(words) == 6 and words[1] in RATIO_KINDS:
        named = words[2:4]
    elif len(words) == 5:
        named = words[1:2]
    else:
        raise LookupError("expected: fig PROFILE SERVER ROW CONNECTIONS FIELD, or fig PROFILE "
                          "ratio|times|percent A B ROW CONNECTIONS")
    return words[0], [name.partition("/")[0] for name in named]


def headline_citations(rel: str, text: str, servers_of) -> list[Citation]:
    """The headline blocks of a page: one citation per server of the profile, at its table row
    (or at the headline's first line when the table has no row for it)."""
    found = []
    for block in HEADLINE.finditer(text):
        profile = block.group("profile")
        first = text.count("\n", 0, block.start()) + 1
        body_start = text.count("\n", 0, block.start("body")) + 1
        rows = block.group("body").split("\n")
        for server in servers_of(profile):
            row = re.compile(r"^\|\s*" + re.escape(server) + r"\s*\|")
            hits = [i for i, line in enumerate(rows) if row.match(line)]
            if hits:
                where, shown = body_start + hits[0], rows[hits[0]].strip()
            else:
                where, shown = first, f"(headline block of results/{profile}/results.json)"
            found.append(Citation(f"{rel}:{where}", f"{shown}  [headline: {server}]", profile,
                                  [server]))
    return found


def citations(root: str, servers_of) -> tuple[list[Citation], list[str]]:
    """Every figure the docs cite, and the fig comments that cannot be read."""
    found: list[Citation] = []
    problems: list[str] = []
    for rel in doc_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for match in FIGURE.finditer(text):
            where = f"{rel}:{text.count(chr(10), 0, match.start()) + 1}"
            try:
                profile, servers = spec_servers(match.group(2))
            except LookupError as e:
                problems.append(f"{where}: <!--fig {match.group(2)}-->: {e}")
                continue
            found.append(Citation(where, match.group(0), profile, servers,
                                  spec_row(match.group(2))))
        try:
            found.extend(headline_citations(rel, text, servers_of))
        except LookupError as e:
            problems.append(f"{rel}: headline: {e}")
    return found, problems


def short(tree: str | None) -> str:
    return tree[:12] if tree else "(none)"


def claim_servers(claim: dict) -> list[str]:
    """The servers a verification claim names, without a variant after '/'."""
    return [name.partition("/")[0] for name in claim.get("servers", [])]


def claim_text(claim: dict) -> str:
    """A claim that does not hold, as the report says it: its id, its verdict, by how much."""
    text = f"{claim.get('id', '?')} {claim.get('verdict', '(no verdict)')}"
    change = claim.get("change")
    if isinstance(change, (int, float)):
        text += f" by {change:+.1%}"
    return text


class Profile:
    """results/PROFILE: the trees its results.json was measured on, and its verification records."""

    def __init__(self, root: str, name: str):
        self.name = name
        self.root = root
        folder = os.path.join(root, "results", name)
        path = os.path.join(folder, "results.json")
        if not os.path.isfile(path):
            raise LookupError(f"no results/{name}/results.json")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        meta = doc.get("meta", {})
        self.servers = list(dict.fromkeys(t["server"] for t in doc.get("targets", [])))
        self.claims = doc.get("claims", [])
        self.started = meta.get("started_utc")
        self.recorded, self.origin = self.recorded_trees(root, meta)
        self.records = []
        records_path = os.path.join(folder, "verifications.json")
        if os.path.isfile(records_path):
            with open(records_path, encoding="utf-8") as f:
                records = json.load(f)
            if not isinstance(records, list):
                raise LookupError(f"results/{name}/verifications.json is not a JSON list")
            self.records = [r for r in records if self.started is not None
                            and r.get("results_started_utc") == self.started]
        self.statuses: dict[str, Status] = {}

    @staticmethod
    def recorded_trees(root: str, meta: dict) -> tuple[dict, str]:
        """{folder: tree} as measured, and where that comes from (for the report)."""
        trees = meta.get("provenance", {}).get("trees")
        if trees is not None:
            return trees, "its recorded trees"
        commit = meta.get("commit", {})
        head = commit.get("head", "unknown")
        try:
            git("cat-file", "-e", f"{head}^{{commit}}", root=root)
        except RuntimeError:
            return {}, f"commit {head[:12]}, which this repository does not have"
        # An old tool's idea of "dirty" varied (results/ rewritten by the run itself counted for
        # some): the commit's trees are the best record there is, and the report says so.
        dirty = ""
        if commit.get("dirty"):
            dirty = f"; marked dirty, {commit.get('changed_paths')} changed paths"
        origin = f"the trees of commit {head[:12]} (no recorded trees{dirty})"
        return trees_at(head, root=root), origin

    def status(self, server: str, current: dict, row=None) -> Status:
        if (server, row) not in self.statuses:
            self.statuses[(server, row)] = self.judge(server, current, row)
        return self.statuses[(server, row)]

    def judge(self, server: str, current: dict, row=None) -> Status:
        folders = folders_of(server)
        if not folders:
            return Status(True, "a peer: no folder of this project", [])
        moved = [(f, self.recorded.get(f), current.get(f)) for f in folders
                 if self.recorded.get(f) != current.get(f)]
        if not moved:
            return Status(True, f"measured on the current tree ({self.origin})", [])
        if same_code(self.recorded, current, folders, self.root):
            return Status(True, f"measured on the current code ({self.origin}; since then only "
                                f"tests, fuzz targets or prose changed)", [])
        deciding = None
        for record in self.records:
            trees = record.get("provenance", {}).get("trees", {})
            claims = [c for c in record.get("claims", []) if server in claim_servers(c)]
            if claims and same_code(trees, current, folders, self.root):
                deciding = (record, claims)
        if deciding is None:
            return Status(False, f"no verification record in results/{self.name}/verifications."
                                 f"json covers the current tree for {server}", moved)
        record, claims = deciding
        when = record.get("recorded_utc", "(no date)")
        changed = [c for c in claims if c.get("verdict") in ("changed", "missing")]
        mine = [c for c in claims if row is not None and claim_row(c) == row]
        judged = mine or claims  # a one-row figure: its row's claims; otherwise all the server's
        against = changed or [c for c in judged if c.get("verdict") != "holds"]
        if not against:
            held = f"{len(claims)} claims hold" if len(claims) > 1 else "1 claim holds"
            if mine:
                held = f"its row's claim holds, no claim of {server} changed"
            return Status(True, f"verified on the current tree {when} ({held})", moved)
        said = ", ".join(claim_text(c) for c in against)
        return Status(False, f"the verification of {when} on the current tree says: {said}", moved)


class Profiles:
    """Each results/PROFILE read once; a profile that cannot be read is reported once."""

    def __init__(self, root: str):
        self.root = root
        self.loaded: dict[str, Profile | LookupError] = {}

    def get(self, name: str) -> Profile:
        if name not in self.loaded:
            try:
                self.loaded[name] = Profile(self.root, name)
            except (LookupError, ValueError, KeyError, TypeError, AttributeError) as e:
                self.loaded[name] = LookupError(f"results/{name}: {e}")
        found = self.loaded[name]
        if isinstance(found, LookupError):
            raise found
        return found

    def servers_of(self, name: str) -> list[str]:
        return self.get(name).servers


def moved_text(server: str, status: Status, width=short) -> str:
    folders = "; ".join(f"{f}/ recorded {width(was)}, now {width(now)}"
                        for f, was, now in status.moved)
    return f"{server}: {folders}"


def judge_all(root: str, profiles: Profiles, current: dict):
    """[(citation, [(server, status)])] for every citation, and the problems met."""
    cited, problems = citations(root, profiles.servers_of)
    judged = []
    for c in cited:
        try:
            profile = profiles.get(c.profile)
        except LookupError as e:
            problems.append(f"{c.where}: {c.text}: {e}")
            continue
        row = c.row if len(c.servers) == 1 else None
        judged.append((c, [(s, profile.status(s, current, row)) for s in c.servers]))
    return judged, problems


def report_stale(judged, profiles: Profiles) -> int:
    """Prints every stale figure, then per profile what moved and what to run; returns how many."""
    stale = [(c, statuses) for c, statuses in judged if not all(s.fresh for _, s in statuses)]
    for c, statuses in stale:
        print(f"{c.where}: {c.text}", file=sys.stderr)
        for server, status in statuses:
            if not status.fresh:
                print(f"    {moved_text(server, status)}", file=sys.stderr)
    for name in sorted({c.profile for c, _ in stale}):
        profile = profiles.get(name)
        print(f"\nresults/{name} (started {profile.started}; measured on {profile.origin}):",
              file=sys.stderr)
        for (server, row), status in sorted(profile.statuses.items(), key=lambda kv: str(kv[0])):
            if not status.fresh:
                which = f" ({row[0]} {row[1]} x {row[2]})" if row else ""
                print(f"    {moved_text(server, status, width=lambda t: t or '(none)')}{which}\n"
                      f"        {status.why}", file=sys.stderr)
        print(what_to_run(profile), file=sys.stderr)
    return len(stale)


def what_to_run(profile: Profile) -> str:
    """The command that makes a profile's stale figures fresh again: a verification of exactly its
    stale servers and the peers their claims are ratios to (a peer's figures depend on no code
    here), or a rerun when the profile makes no claims to verify."""
    rerun = f"build/bin/cm-price {profile.name}   (rerun), then docs/tools/figures.py --update"
    if not profile.claims:
        return f"    run: {rerun}\n        (its results make no claims, so only a rerun measures them)"
    stale = {server for (server, _), status in profile.statuses.items() if not status.fresh}
    names = set(stale)
    for claim in profile.claims:
        servers = claim_servers(claim)
        if stale & set(servers):
            names |= {s for s in servers if not folders_of(s)}
    models = ",".join(s for s in profile.servers if s in names)
    return (f"    run: build/bin/cm-price verify {profile.name} --models {models}   (every claim "
            f"holds: fresh again)\n     or: {rerun}")


def check(root: str, listing: bool) -> int:
    try:
        current = tree_hashes(root=root)
    except (RuntimeError, OSError) as e:
        print(f"skipped: {root} is not a git checkout, so the trees cannot be hashed ({e})")
        return SKIPPED
    profiles = Profiles(root)
    judged, problems = judge_all(root, profiles, current)
    if listing:
        for c, statuses in judged:
            word = "fresh" if all(s.fresh for _, s in statuses) else "stale"
            why = "; ".join(f"{server}: {s.why}" for server, s in statuses)
            print(f"{word}  {c.where}: {c.text}  ({why})")
    stale = report_stale(judged, profiles)
    for line in problems:
        print(line, file=sys.stderr)
    if stale or problems:
        print(f"\nfreshness: {stale} of {len(judged)} cited figures are stale"
              + (f"; {len(problems)} cannot be read" if problems else ""), file=sys.stderr)
        return 1
    print(f"freshness: {len(judged)} cited figures are fresh")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="the repository (default: the current folder)")
    parser.add_argument("--list", action="store_true",
                        help="print every cited figure with fresh or stale, and why")
    args = parser.parse_args()
    try:
        root = find_root(args.root)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    return check(root, args.list)


if __name__ == "__main__":
    sys.exit(main())
