#!/usr/bin/python3
"""The figures the docs quote from results/<profile>/results.json: checked, and rewritten after a rerun.

A figure in a page is written with the place it comes from right after it, in an HTML comment that
a reader of the rendered page does not see:

    answers 19,656<!--fig quick uring_coro delay 2000 rps--> rps, 98%<!--fig quick uring_coro delay 2000 efficiency-->

    fig PROFILE SERVER[/VARIANT] ROW CONNECTIONS FIELD     one value of one row (median of its rounds
                                                          unless the field says otherwise)
    fig PROFILE ratio A B ROW CONNECTIONS                 median rps of A over B's, as "1.9"
    fig PROFILE times A B ROW CONNECTIONS                 the same, whole, as "31" ("about 31 times")
    fig PROFILE percent A B ROW CONNECTIONS               the same as a percentage, as "94%"
    fig latency SERVER ROW CONNECTIONS p99@90              one share of a latency curve (SHARE_FIELDS)

A VARIANT with spaces is written as its slug (`asio_coro/pool-16` for "pool 16": each run of
characters other than letters and digits a "-"). ROW is a row's id, or ID:DELAY where one id was measured at several delays (`db-sleep:10`: the
row of /db/sleep/{ms} at 10 ms). CONNECTIONS is the row's connections asked, or "-" when the
server has one row of that id. The
figure is the text right before the comment (digits, letters, ',', '.', '%', '-', '/'). FIELD is one
of FIELDS below. A page that quotes a profile must also link to it (to results/PROFILE/, relative to
the page).

    docs/tools/figures.py --root .            every figure equals what results/ says (exit 1 if not)
    docs/tools/figures.py --root . --update   rewrite every figure from results/ (after a rerun)

The prose around a figure is not checked: after --update, read the sentences whose figures moved
(--update lists them). Standard library and the harness's cmharness.stats.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doclib import doc_files, find_root  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "harness"))
from cmharness import stats  # noqa: E402  (the harness's own median interval)


def _stat(key: str, fmt: str = "{:,.0f}", part: str | None = "median"):
    """A field of a row's summary: `part` of its rounds (median, min, max, spread), or the value."""

    def get(row: dict) -> str:
        value = row["summary"][key]
        if value is None or (part and value[part] is None):
            raise LookupError(f"{key} was not measured in this row (or lies beyond its range)")
        return fmt.format(value[part] if part else value)

    return get


def _paired(row: dict, key: str, part: str) -> str:
    """One end (or the median) of a row's within-round ratio to its server's first variant."""
    value = ((row["summary"].get("paired") or {}).get(key) or {}).get(part)
    if value is None:
        raise LookupError(f"no paired {key} in this row (a first variant, or too few rounds)")
    return f"{value:.2f}"


def _waiting(row: dict, key: str, unit: int, fmt: str) -> str:
    """A figure of the bytes per waiting request its server's target recorded (Results.row
    carries it into the row)."""
    value = (row.get("_waiting_cost") or {}).get(key)
    if value is None:
        raise LookupError(f"no {key} measured for this server in this profile")
    return fmt.format(value / unit)


def _interval(of_round, fmt: str, end: str):
    """One end ("low", "high") of the 95% interval of a figure's median over a row's rounds, the
    figure taken from each round that did not fail (of_round: its round of results.json)."""

    def get(row: dict) -> str:
        values = [of_round(m) for m in row.get("rounds", []) if m and not m.get("error")]
        est = stats.estimate([v for v in values if v is not None])
        if est is None or not est.has_interval:
            raise LookupError("too few rounds for an interval of this figure")
        return fmt.format(est.low if end == "low" else est.high)

    return get


def _db_cpu_us(m: dict):
    return m["db_cpu_s"] * 1e6 / m["db_queries"] if m.get("db_queries") else None


def _p99_ms(m: dict):
    return ((m.get("load") or {}).get("latency_us") or {}).get("p99", 0) / 1000 or None


# FIELD -> how it is read from a row of results.json and written in a page.
FIELDS = {
    "rps": _stat("rps"),
    "rps_min": _stat("rps", part="min"),
    "rps_max": _stat("rps", part="max"),
    "spread": _stat("rps", "{:.0%}", part="spread"),
    "efficiency": _stat("efficiency", "{:.0%}"),
    "efficiency1": _stat("efficiency", "{:.1%}"),
    # the 95% interval of the efficiency's median (a claim: results.md's table), its two ends
    "efficiency_low": _stat("efficiency_interval", "{:.0%}", part="low"),
    "efficiency_high": _stat("efficiency_interval", "{:.0%}", part="high"),
    # "connections or cpu" (the rounds differ) and "connections = threads" (a tie: both bind) are
    # one word in a page: "connections/cpu", "connections/threads".
    "bound": lambda row: row["bound"].replace(" or ", "/").replace(" = ", "/"),
    "ceiling": _stat("cpu_ceiling"),
    "connection_ceiling": _stat("connection_ceiling"),
    "thread_ceiling": _stat("thread_ceiling"),
    "database_ceiling": _stat("database_ceiling"),
    # a /db/ row (results/db): the database's own time and CPU per query it completed
    "db_query_ms": _stat("db_query_ms", "{:.2f}"),
    "db_cpu": _stat("db_cpu_us_per_query"),
    "load_cpus": _stat("load_cpus_busy", "{:.0%}"),  # the load CPUs busy in the window
    # the 95% interval of a median over the rounds, its two ends
    "db_cpu_ci_low": _interval(_db_cpu_us, "{:,.0f}", "low"),
    "db_cpu_ci_high": _interval(_db_cpu_us, "{:,.0f}", "high"),
    "p99_ci_low": _interval(_p99_ms, "{:.1f}", "low"),
    "p99_ci_high": _interval(_p99_ms, "{:.1f}", "high"),
    "overshoot": _stat("overshoot_p99_ms", "{:.2f}"),
    "p50": _stat("latency_p50_ms", "{:.2f}"),
    "p99": _stat("latency_p99_ms", "{:.2f}"),
    "served": _stat("served_connections"),
    "open": _stat("connections_open"),
    "starved": _stat("starved_connections"),
    "cpu": _stat("server_cpu_ms_per_1k", "{:.1f}"),
    "cpu_min": _stat("server_cpu_ms_per_1k", "{:.1f}", part="min"),
    # a later variant over its server's first, round by round (results.add_variant_pairs)
    "cpu_paired": lambda row: _paired(row, "cpu_per_request", "estimate"),
    "cpu_paired_low": lambda row: _paired(row, "cpu_per_request", "low"),
    "cpu_paired_high": lambda row: _paired(row, "cpu_per_request", "high"),
    "efficiency_paired": lambda row: _paired(row, "efficiency", "estimate"),
    "efficiency_paired_low": lambda row: _paired(row, "efficiency", "low"),
    "efficiency_paired_high": lambda row: _paired(row, "efficiency", "high"),
    "overshoot_paired": lambda row: _paired(row, "overshoot_p99", "estimate"),
    "overshoot_paired_low": lambda row: _paired(row, "overshoot_p99", "low"),
    "overshoot_paired_high": lambda row: _paired(row, "overshoot_p99", "high"),
    "cpu_max": _stat("server_cpu_ms_per_1k", "{:.1f}", part="max"),
    "busy": _stat("server_busy", "{:.0%}"),
    "rss": _stat("rss_per_connection_kib", "{:.2f}"),  # the RSS growth under load, per connection
    # bytes per waiting request (cmharness.memory), measured once per server of the profile
    "waiting_kib": lambda row: _waiting(row, "bytes_per_waiting", 1024, "{:.1f}"),
    "stack_mib": lambda row: _waiting(row, "reserved_bytes_per_waiting", 1024 * 1024, "{:.1f}"),
    "peak_rss": _stat("peak_rss_mib", "{:.1f}"),
    "errors": _stat("errors_total", "{:,}", part=None),
    "rounds": lambda row: str(row["rounds_measured"]),
    # results/latency (cm-price latency): a curve's summary, each the median over its rounds.
    "capacity": _stat("capacity_rps"),
    "knee": _stat("knee_percent", "{:.0f}%"),
    "knee_rps": _stat("knee_rps"),
    "cpu_half": _stat("cpu_us_at_half", "{:.1f}"),
    "p99_half": _stat("p99_ms_at_half", "{:.2f}"),
    "p99_low": _stat("p99_ms_at_lowest", "{:.2f}"),
}

# results/latency: one share of a curve, "FIELD@SHARE" (`p99@90`: the median p99 at 90% of capacity).
SHARE_FIELDS = {"p50": ("p50_ms", "{:.2f}"), "p99": ("p99_ms", "{:.2f}"),
                "p999": ("p999_ms", "{:.2f}"), "cpu": ("cpu_us_per_request", "{:.1f}"),
                "rps": ("rps", "{:,.0f}"), "offered": ("offered_rps", "{:,.0f}"),
                "ratio": ("rate_ratio", "{:.3f}"), "lag": ("own_lag_p99_ms", "{:.2f}"),
                "in_system": ("in_system", "{:,.0f}")}
SHARE = re.compile(r"^([a-z0-9_]+)@(\d+)$")


def share_field(row: dict, field: str) -> str:
    """FIELD@SHARE of a latency row: the median over its rounds of that share's figure."""
    name, share = SHARE.match(field).groups()
    key, fmt = SHARE_FIELDS[name]
    for point in row.get("points", []):
        if point["percent"] == int(share) and point.get(key):
            return fmt.format(point[key]["median"])
    raise LookupError(f"no {key} at {share}% in this row")


def slug(variant: str) -> str:
    """A variant's name as one word of a figure's comment: "offload pool, pool 16" is
    "offload-pool-pool-16"."""
    return re.sub(r"[^0-9A-Za-z]+", "-", variant).strip("-")


FIGURE = re.compile(r"([0-9A-Za-z.,%/\-]*)<!--fig ([^>]*?)-->")


class Results:
    """results/<profile>/results.json, read once each."""

    def __init__(self, root: str):
        self.root = root
        self.loaded: dict[str, dict] = {}

    def profile(self, name: str) -> dict:
        if name not in self.loaded:
            path = os.path.join(self.root, "results", name, "results.json")
            if not os.path.isfile(path):
                raise LookupError(f"no results/{name}/results.json")
            with open(path, encoding="utf-8") as f:
                self.loaded[name] = json.load(f)
        return self.loaded[name]

    def row(self, profile: str, server: str, row_id: str, connections: str) -> dict:
        name, _, variant = server.partition("/")
        row_id, _, delay = row_id.partition(":")
        found = []
        for target in self.profile(profile)["targets"]:
            if target["server"] != name or (variant and variant not in (
                    target.get("variant"), slug(target.get("variant") or ""))):
                continue
            for row in target["rows"]:
                if row["id"] != row_id or (delay and row.get("delay") != delay):
                    continue
                if connections == "-" or str(row["connections_requested"]) == connections:
                    found.append(dict(row, _waiting_cost=target.get("waiting_cost")))
        if len(found) != 1:
            what = "no row" if not found else f"{len(found)} rows"
            raise LookupError(f"{what} for {server} {row_id} {connections} in results/{profile}")
        return found[0]

    @staticmethod
    def ratio(a: dict, b: dict) -> float:
        """A over B: the median of their ratios within each round (the rounds of a results file
        measure every server's row in the same pass), or of the medians for an old file."""
        if "rounds" not in a or "rounds" not in b:
            return a["summary"]["rps"]["median"] / b["summary"]["rps"]["median"]
        pairs = [x.get("rps") / y.get("rps") for x, y in zip(a["rounds"], b["rounds"])
                 if x.get("rps") and y.get("rps")]
        if not pairs:
            raise LookupError("no round where both were measured")
        pairs.sort()
        n = len(pairs)
        return pairs[n // 2] if n % 2 else (pairs[n // 2 - 1] + pairs[n // 2]) / 2

    def value(self, spec: str) -> str:
        words = spec.split()
        if len(words) == 6 and words[1] in ("ratio", "times", "percent"):
            profile, kind, a, b, row_id, connections = words
            ratio = self.ratio(self.row(profile, a, row_id, connections),
                               self.row(profile, b, row_id, connections))
            return {"ratio": "{:.1f}", "times": "{:.0f}", "percent": "{:.0%}"}[kind].format(ratio)
        if len(words) != 5:
            raise LookupError("expected: fig PROFILE SERVER ROW CONNECTIONS FIELD")
        profile, server, row_id, connections, field = words
        m = SHARE.match(field)
        if m and m.group(1) in SHARE_FIELDS:
            return share_field(self.row(profile, server, row_id, connections), field)
        if field not in FIELDS:
            raise LookupError(f"unknown field {field!r} (one of {', '.join(sorted(FIELDS))}, or "
                              f"{'|'.join(SHARE_FIELDS)}@SHARE)")
        return FIELDS[field](self.row(profile, server, row_id, connections))


def process(root: str, update: bool) -> int:
    results = Results(root)
    problems: list[str] = []
    changed: list[str] = []
    count = 0
    for rel in doc_files(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "<!--fig " not in text:
            continue
        lines_before = text.count("\n")

        def replace(match: re.Match) -> str:
            nonlocal count
            count += 1
            shown, spec = match.group(1), match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{rel}:{line}"
            try:
                want = results.value(spec)
            except (LookupError, KeyError, TypeError) as e:
                problems.append(f"{where}: <!--fig {spec}-->: {e}")
                return match.group(0)
            profile = spec.split()[0]
            target = os.path.relpath(os.path.join(root, "results", profile), os.path.dirname(path))
            if f"({target}/" not in text and f"({target})" not in text:
                problems.append(f"{where}: quotes results/{profile} but the page never links to it")
            if shown == want:
                return match.group(0)
            if update:
                changed.append(f"{where}: {shown or '(nothing)'} -> {want}  ({spec})")
                return want + match.group(0)[len(shown):]
            problems.append(f"{where}: shows {shown or '(nothing)'!r}, results say {want!r} ({spec})")
            return match.group(0)

        new = FIGURE.sub(replace, text)
        assert new.count("\n") == lines_before
        if update and new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    for line in changed:
        print("updated", line)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        hint = "" if update else "; after a rerun, docs/tools/figures.py --update rewrites them"
        print(f"figures: {len(problems)} of {count} figures are wrong{hint}", file=sys.stderr)
        return 1
    print(f"figures: {count} figures agree with results/" + (f" ({len(changed)} rewritten)" if update else ""))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="the repository (default: the current folder)")
    parser.add_argument("--update", action="store_true", help="rewrite every figure from results/")
    args = parser.parse_args()
    return process(find_root(args.root), args.update)


if __name__ == "__main__":
    sys.exit(main())
