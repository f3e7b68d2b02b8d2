"""Writing a result: the JSON every other tool reads (results.json), its CSV, its Markdown, and the
chart call -- and the claims a result makes, each an Estimate with its interval.

results.json (schema 2):
    {"schema": 2, "meta": {..., "provenance": {"machine", "commit", "trees", ...}},
     "skipped": [...], "targets": [{"name", "variant", "label", "rows": [row, ...], ...}],
     "claims": [{"id", "servers", "kind", "estimate", "above_ceiling", ...}]}
A row has "summary" (each figure's median, min, max, spread over the rounds: what
docs/tools/figures.py quotes) and "rounds" (every measurement, priced).
"""

import csv
import io
import json
import os

from . import stats

SCHEMA = 2


def spread(values):
    """{median, min, max, spread, n} of the values present, or None."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    med = stats.median(xs)
    rel = (max(xs) - min(xs)) / med if med else (0.0 if max(xs) == min(xs) else float("inf"))
    return {"median": med, "min": min(xs), "max": max(xs), "spread": rel, "n": len(xs)}


def measurement_json(m):
    r = m.result
    out = {"round": m.round, "sequence": m.sequence, "error": m.error, "rps": m.rps,
           "efficiency": m.efficiency, "bound": m.ceilings.bound() if m.ok else "",
           "ceilings": {"connection": m.ceilings.connection, "thread": m.ceilings.thread,
                        "cpu": m.ceilings.cpu, "database": m.ceilings.database},
           "db_queries": m.db_queries, "db_cpu_s": m.db_cpu_s, "db_exec_ms": m.db_exec_ms,
           "cpu_ceiling_rps": m.cpu_ceiling_rps, "ceiling_windows": m.ceiling_windows,
           "defect": m.defect, "stagger_ms": m.stagger_ms, "phase_s": m.phase_s,
           "settle_s": m.settle_s,
           "fresh_server": m.fresh_server, "server_cpu_s": m.server_cpu_s,
           "server_busy": m.server_busy, "load_busy": m.load_busy,
           "load_cpus_busy": m.load_cpus_busy,
           "rss_before_kib": m.rss_before_kib, "peak_rss_kib": m.peak_rss_kib, "steal": m.steal,
           "others": m.others, "load_average_1m": m.load_average,
           "notes": [{"kind": k, "text": t} for k, t in m.notes], "load": r.kept if r else None}
    return out


def _per_request_ms(m):
    """Server CPU ms per 1,000 answers in the window."""
    answered = m.result.rps * m.window_s
    return m.server_cpu_s * 1e6 / answered if answered else None


def _db_cpu_per_query_us(m):
    """The database's CPU per query it completed, µs (a /db/ row)."""
    return m.db_cpu_s * 1e6 / m.db_queries if m.db_queries and m.db_cpu_s is not None else None


def _db_query_ms(m):
    """The database's own time per query it completed, ms: from the query's arrival at its
    executor to the result (pg_sleep's wait included; the round trip to the server not)."""
    return m.db_exec_ms / m.db_queries if m.db_queries and m.db_exec_ms is not None else None


def _rss_per_connection(m):
    grown = m.peak_rss_kib - m.rss_before_kib
    return grown / m.row.connections if m.row.connections else None


FIGURES = {  # summary key -> what it is of one measurement
    "rps": lambda m: m.rps,
    "efficiency": lambda m: m.efficiency,
    "cpu_ceiling": lambda m: m.ceilings.cpu,
    "connection_ceiling": lambda m: m.ceilings.connection,
    "thread_ceiling": lambda m: m.ceilings.thread,
    "database_ceiling": lambda m: m.ceilings.database,
    "lowest_ceiling": lambda m: m.ceilings.lowest(),
    "latency_p50_ms": lambda m: m.result.latency_us.p50 / 1000,
    "latency_p99_ms": lambda m: m.result.latency_us.p99 / 1000,
    "overshoot_p99_ms": lambda m: m.result.overshoot_us.p99 / 1000,
    "served_connections": lambda m: m.result.served_connections,
    "connections_open": lambda m: m.result.connections_open,
    "starved_connections": lambda m: m.result.starved_connections,
    "fairness_jain": lambda m: m.result.fairness_jain,
    "server_cpu_ms_per_1k": _per_request_ms,
    "server_busy": lambda m: m.server_busy,
    "load_busy": lambda m: m.load_busy,
    "load_cpus_busy": lambda m: m.load_cpus_busy,
    "peak_rss_mib": lambda m: m.peak_rss_kib / 1024,
    "rss_per_connection_kib": _rss_per_connection,
    "db_cpu_us_per_query": _db_cpu_per_query_us,
    "db_query_ms": _db_query_ms,
}


#: The figures of a round that price it against its ceilings: a defect round (above its ceiling)
#: is not counted in them. Every other figure is a reading of the round, counted whatever.
PRICED = ("efficiency",)


def summarize(rounds):
    """A row over its rounds: every figure's spread, the errors summed, the bound(s); its
    efficiency over the rounds that are not defects, and how many were."""
    ok = [m for m in rounds if m is not None and m.ok]
    counted = [m for m in ok if m.counted]
    summary = {key: spread([f(m) for m in (counted if key in PRICED else ok)])
               for key, f in FIGURES.items()}
    summary["defects"] = len(ok) - len(counted)
    summary["errors_total"] = sum(m.result.errors_total for m in ok)
    errors = {}
    for m in ok:
        for kind, n in m.result.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    summary["errors"] = errors
    counted_db = [m for m in ok if m.db_queries is not None]
    if counted_db:  # a /db/ row: rounds where the database's count and the answers differ
        summary["db_count_mismatches"] = sum(
            1 for m in counted_db if m.db_queries != m.result.responses_total)
        summary["db_queries"] = sum(m.db_queries for m in counted_db)
        summary["db_answers"] = sum(m.result.responses_total for m in counted_db)
    summary["efficiency_interval"] = _json(stats.estimate([m.efficiency for m in counted]))
    bounds = sorted({m.ceilings.bound() for m in ok if not m.is_ceiling})
    return summary, " or ".join(bounds)  # "a or b": the rounds differ in what binds


def _json(est):
    return est.to_json() if est else None


def row_json(target, row, rounds):
    summary, bound = summarize(rounds)
    ok = [m for m in rounds if m is not None and m.ok]
    return {
        "server": target.name, "variant": target.variant.name, "label": target.label,
        "id": row.id, "key": row.key, "path": row.path, "delay": row.delay,
        "method": row.method, "body_bytes": None if row.body is None else len(row.body.encode()),
        "mean_delay_ms": row.mean_delay_ms, "connections_requested": row.connections,
        "cpu_ceiling_row": any(m.is_ceiling for m in ok), "bound": bound, "summary": summary,
        "rounds_measured": len(ok), "stagger_ms": ok[0].stagger_ms if ok else 0,
        "rounds": [measurement_json(m) if m is not None else {"error": "not run"}
                   for m in rounds],
    }


def claims(runner):
    """Every comparative figure of a run, as an Estimate: each non-ceiling row's efficiency, and
    each server's CPU-ceiling rps over nginx's (or node's when there is no nginx, else the profile's
    first peer's) within a round."""
    out = []
    for (label, key), rounds in runner.measurements.items():
        target = next(t for t in runner.targets if t.label == label)
        first = next(m for m in rounds if m is not None)
        row = first.row
        if not first.is_ceiling:
            est = stats.estimate([m.efficiency for m in rounds if m is not None and m.counted])
            if est:
                out.append(_claim(target, row, "efficiency", est, [target.name]))
    reference = next((p for p in ("nginx", "node", *runner.profile.peers)
                      if (p, _ceiling_key(runner)) in runner.measurements), None)
    if reference and runner.ceiling_row is not None:
        ref = [m.rps if m else None for m in runner.measurements[(reference, _ceiling_key(runner))]]
        for (label, key), rounds in runner.measurements.items():
            if key != _ceiling_key(runner) or label == reference or \
                    not any(m is not None and m.is_ceiling for m in rounds):
                continue
            target = next(t for t in runner.targets if t.label == label)
            est = stats.paired_ratio([m.rps if m else None for m in rounds], ref)
            if est:
                out.append(_claim(target, runner.ceiling_row, "ratio", est,
                                  [target.name, reference], reference))
    return out


def _ceiling_key(runner):
    return runner.ceiling_row.key if runner.ceiling_row is not None else None


def _claim(target, row, kind, est, servers, reference=None):
    cid = f"{target.label} {row.key} {kind}" + (f" {reference}" if reference else "")
    return {"id": cid, "server": target.name, "variant": target.variant.name,
            "label": target.label, "row": row.key, "path": row.path, "kind": kind,
            "reference": reference, "servers": servers, "estimate": est.to_json(),
            "above_ceiling": kind == "efficiency" and stats.above_ceiling(est)}


def _cpu_per_request_us(round_json):
    """A round's server CPU per answer in the window, µs (as server_cpu_ms_per_1k), from its JSON."""
    load = round_json.get("load") or {}
    answered = (round_json.get("rps") or 0) * (load.get("duration_s") or 0)
    cpu = round_json.get("server_cpu_s")
    return cpu * 1e6 / answered if answered and cpu is not None else None


def _overshoot_p99(round_json):
    return (((round_json.get("load") or {}).get("overshoot_us")) or {}).get("p99")


#: What add_variant_pairs sets side by side: a key of summary["paired"] -> a round's figure.
PAIRED = {"cpu_per_request": _cpu_per_request_us,
          "efficiency": lambda r: None if r.get("defect") else r.get("efficiency"),
          "overshoot_p99": _overshoot_p99}


def _round_figures(row):
    """Each round's PAIRED figures of a row in results.json, None where the round failed."""
    return [{k: f(r) for k, f in PAIRED.items()} if r and not r.get("error") and r.get("rps")
            else dict.fromkeys(PAIRED) for r in row.get("rounds", [])]


def add_variant_pairs(doc):
    """Each row of a server's later variant, paired with the same row of its first variant round by
    round: summary["paired"] = {"against", and each key of PAIRED: the Estimate of the within-round
    ratios, this variant's figure over the first's (the rows of one round run minutes apart at
    most, on the same machine's speed)}. Returns whether any row got one."""
    first, added = {}, False
    for t in doc["targets"]:
        first.setdefault(t["server"], t)
        base = first[t["server"]]
        if base is t:
            continue
        base_rows = {r["key"]: r for r in base["rows"]}
        for row in t["rows"]:
            other = base_rows.get(row["key"])
            if other is None or row.get("cpu_ceiling_row"):
                continue
            mine, theirs = _round_figures(row), _round_figures(other)
            paired = {k: _json(stats.paired_ratio([m[k] for m in mine], [o[k] for o in theirs]))
                      for k in PAIRED}
            if any(paired.values()):
                row["summary"]["paired"] = {"against": base["variant"], **paired}
                added = True
    return added


def target_json(runner, t, rows):
    """One server's record in results.json (every profile kind): who it is, how it ran, whether
    it passed validation and was priced, and its rows."""
    v = runner.validations.get(t.label)
    return {"name": t.name, "server": t.name, "variant": t.variant.name, "label": t.label,
            "kind": t.kind, "threads": runner.threads.get(t.label, ""),
            "priced": t.label not in runner.refused, "refused": runner.refused.get(t.label, ""),
            "validation": {"ok": v.ok, "failure": v.failure, "passed": v.passed} if v else None,
            "rows": rows}


def document(runner, meta, skipped):
    targets = []
    for t in runner.targets:
        rows = [row_json(t, r, runner.measurements[(t.label, r.key)])
                for r in runner.profile.rows if (t.label, r.key) in runner.measurements]
        targets.append(dict(target_json(runner, t, rows),
                            waiting_cost=_waiting_cost(runner, t.label)))
    doc = {"schema": SCHEMA, "meta": meta, "skipped": skipped, "targets": targets,
           "claims": claims(runner)}
    add_variant_pairs(doc)
    return doc


def _waiting_cost(runner, label):
    cost = getattr(runner, "waiting_costs", {}).get(label)
    return cost.to_json() if cost else None


def csv_text(runner):
    """Every measurement, one line each: the server, the row, the round and every figure."""
    out = io.StringIO()
    w = csv.writer(out)
    keys = list(FIGURES)
    w.writerow(["server", "variant", "row", "round", "error", *keys, "defect"])
    for (label, key), rounds in runner.measurements.items():
        target = next(t for t in runner.targets if t.label == label)
        for k, m in enumerate(rounds):
            values = [_value(f, m) for f in FIGURES.values()] if m is not None and m.ok else \
                [""] * len(keys)
            w.writerow([target.name, target.variant.name, key, k,
                        m.error if m is not None else "not run", *values,
                        "yes" if m is not None and m.defect else ""])
    return out.getvalue()


def _value(f, m):
    v = f(m)
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)


def write_machine(folder, machine):
    """Writes the machine a result was measured on (provenance's "machine") into folder, as
    machine.json and as machine.md (provenance.machine_markdown)."""
    from . import provenance

    with open(os.path.join(folder, "machine.json"), "w") as f:
        json.dump(machine, f, indent=1)
    with open(os.path.join(folder, "machine.md"), "w") as f:
        f.write(provenance.machine_markdown(machine))


def write(doc, folder, markdown, csv_content, charts=True, dumps=None):
    """Writes results.json (as `dumps(doc)` writes it, indented JSON by default), results.csv,
    machine.json, machine.md (write_machine) and results.md into folder, and draws the charts
    (chart()). Returns a note when no chart was drawn."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "results.json")
    with open(path, "w") as f:
        f.write(dumps(doc) if dumps else json.dumps(doc, indent=1) + "\n")
    with open(os.path.join(folder, "results.csv"), "w") as f:
        f.write(csv_content)
    write_machine(folder, doc["meta"]["provenance"]["machine"])
    note = chart(path) if charts else ""
    with open(os.path.join(folder, "results.md"), "w") as f:
        f.write(markdown(doc, charts_in(folder), note))
    return note


def chart(results_json):
    """Draws a result's charts beside its results.json (profile_charts.draw, what harness/plot
    draws); returns a note for its page when they were not drawn, or ""."""
    from . import profile_charts  # here: it imports report, which imports this module

    plt = pyplot("charts")
    if plt is None:
        return "charts: no matplotlib in this Python (run with /usr/bin/python3); none drawn"
    with open(results_json) as f:
        doc = json.load(f)
    try:
        profile_charts.draw(doc, os.path.dirname(os.path.abspath(results_json)), plt)
    except Exception as e:  # the run is written already: a chart that fails is a note on its page
        return f"charts: {type(e).__name__}: {str(e).strip()[-300:]}; none drawn"
    return ""


def charts_in(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".png"))


def json_beside(markdown_path):
    """results/loadgen.json for results/loadgen.md: where a one-page tool records its figures."""
    return os.path.splitext(markdown_path)[0] + ".json"


def write_page(markdown_path, text, doc, keep_blocks=()):
    """Writes a one-page result: the Markdown at markdown_path and `doc` (its provenance, its
    figures) as JSON beside it (json_beside). Returns the JSON's path. A block of the page as it
    was (block_of) named in `keep_blocks` is carried into the new one: another tool wrote it."""
    folder = os.path.dirname(os.path.abspath(markdown_path))
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(markdown_path):
        with open(markdown_path) as f:
            old = f.read()
        for name in keep_blocks:
            if block_of(old, name):
                text = replace_block(text, name, block_of(old, name))
    with open(markdown_path, "w") as f:
        f.write(text)
    path = json_beside(markdown_path)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path


def block_of(text, name):
    """The block `<!-- NAME -->` ... `<!-- /NAME -->` of a page (markers included), or "": a part of
    a page that another tool writes (results/loadgen.md's tsung section)."""
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    i = text.find(begin)
    j = text.find(end, i + len(begin)) if i >= 0 else -1
    return text[i:j + len(end)] if i >= 0 and j >= 0 else ""


def replace_block(text, name, block):
    """`text` with its block NAME replaced by `block` (which holds the markers), or `block` added
    at its end, after one blank line, when it has none."""
    old = block_of(text, name)
    if old:
        return text.replace(old, block.rstrip("\n"))
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block.rstrip("\n") + "\n"


def pyplot(tool):
    """matplotlib.pyplot on the Agg backend, or None -- with a line on stderr saying why -- where
    this Python has no matplotlib (Debian's /usr/bin/python3 has python3-matplotlib)."""
    import sys

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{tool}: no matplotlib here (run with /usr/bin/python3): no chart", file=sys.stderr)
        return None
    return plt
