"""The Markdown of a cm-price result (results.md) and the table it prints, from results.json.

The first table holds the claims: every comparative figure as `estimate [low high]`, the median
over the rounds with its 95% interval. Overlapping intervals are "no difference measured here";
an efficiency whose interval lies above 1 is flagged as a defect of the measurement.
"""

from . import ceilings, results, stats

ABOVE = "**above its ceiling: a measurement defect, not a finding**"


def _est(claim):
    return stats.Estimate.from_json(claim["estimate"])


def claim_columns(doc):
    """The claims' columns, in row order: (row key, kind, reference) -> a heading."""
    cols = {}
    for c in doc["claims"]:
        col = (c["row"], c["kind"], c["reference"])
        if col not in cols:
            what = f"rps / {c['reference']}" if c["kind"] == "ratio" else "efficiency"
            cols[col] = f"{_row_label(doc, c['row'])}: {what}"
    return dict(sorted(cols.items(), key=lambda kv: (kv[0][1] != "ratio", _row_order(doc,
                                                                                       kv[0][0]))))


def _row_order(doc, key):
    keys = [r["key"] for t in doc["targets"] for r in t["rows"]]
    return keys.index(key) if key in keys else len(keys)


def _row_label(doc, key):
    for t in doc["targets"]:
        for r in t["rows"]:
            if r["key"] == key:
                path = r["path"].replace("{ms}", r["delay"]) if r["delay"] else r["path"]
                return f"{path} x {r['connections_requested']:,}"
    return key


def claims_table(doc):
    """server | one column per kind of claim: `estimate [low high]`, flagged above a ceiling."""
    cols = claim_columns(doc)
    labels = list(dict.fromkeys(c["label"] for c in doc["claims"]))
    cell = {(c["label"], (c["row"], c["kind"], c["reference"])): c for c in doc["claims"]}
    lines = ["| server | " + " | ".join(cols.values()) + " |",
             "|---|" + "--:|" * len(cols)]
    for label in labels:
        cells = []
        for col in cols:
            c = cell.get((label, col))
            if c is None:
                cells.append("-")
                continue
            fmt = "{:.1%}" if c["kind"] == "efficiency" else "{:.2f}"
            text = _est(c).format(fmt)
            cells.append(text + (f" {ABOVE}" if c["above_ceiling"] else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def orderings(doc):
    """For each column, the pairs whose intervals are disjoint; the rest are no difference."""
    out = []
    for col, heading in claim_columns(doc).items():
        cs = [c for c in doc["claims"] if (c["row"], c["kind"], c["reference"]) == col]
        cs.sort(key=lambda c: -_est(c).estimate)
        pairs = [f"{a['label']} > {b['label']}" for i, a in enumerate(cs) for b in cs[i + 1:]
                 if _est(a).above(_est(b))]
        ties = len(cs) * (len(cs) - 1) // 2 - len(pairs)
        text = "; ".join(pairs) if pairs else "none"
        out.append(f"- {heading}: {text}" + (f" ({ties} pair(s): no difference measured here)"
                                             if ties else ""))
    return "\n".join(out)


def _fig(summary, key, fmt="{:,.0f}"):
    s = summary.get(key)
    if not s:
        return "-"
    if s["min"] == s["max"] or s["n"] == 1:
        return fmt.format(s["median"])
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def full_table(doc):
    head = ("| server | threads | row | stagger ms | rps | bound | lowest ceiling | efficiency | "
            "p99 ms | p99 overshoot ms | server CPU ms / 1k | server busy | starved | RSS / conn "
            "KiB | errors | rounds |")
    lines = [head, "|---|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|"]
    for t in doc["targets"]:
        for r in t["rows"]:
            s = r["summary"]
            eff = s.get("efficiency_interval")
            eff_text = stats.Estimate.from_json(eff).format("{:.1%}") if eff else \
                ("CPU ceiling" if r["cpu_ceiling_row"] else "-")
            thread_ceiling = (s.get("thread_ceiling") or {}).get("median")
            bound = ceilings.binding_label(r["bound"], r.get("connections_requested"),
                                           r.get("mean_delay_ms"), thread_ceiling)
            errors = s["errors_total"]
            kinds = ", ".join(f"{k} {v:,}" for k, v in s["errors"].items() if v)
            lines.append(
                f"| {t['label']} | {t.get('threads', '')} | {_row_label(doc, r['key'])} | "
                f"{r['stagger_ms']:,.0f} | {_fig(s, 'rps')} | {bound or '-'} | "
                f"{_fig(s, 'lowest_ceiling')} | {eff_text} | "
                f"{_fig(s, 'latency_p99_ms', '{:.2f}')} | "
                f"{_fig(s, 'overshoot_p99_ms', '{:.2f}')} | "
                f"{_fig(s, 'server_cpu_ms_per_1k', '{:.1f}')} | "
                f"{_fig(s, 'server_busy', '{:.0%}')} |"
                f" {_fig(s, 'starved_connections')} | "
                f"{_fig(s, 'rss_per_connection_kib', '{:.2f}')} | "
                f"{errors:,}" + (f" ({kinds})" if kinds else "") + f" | {r['rounds_measured']} |")
    return "\n".join(lines)


def notes(doc):
    """Each row's notes, one line per kind: said once, with the rounds that said it."""
    out = []
    for t in doc["targets"]:
        if not t["priced"]:
            out.append(f"- **{t['label']}** not priced: {t['refused']}")
            continue
        for r in t["rows"]:
            by_kind = {}
            for k, m in enumerate(r["rounds"]):
                if m.get("error"):
                    by_kind.setdefault("error", (m["error"], []))[1].append(k + 1)
                for n in m.get("notes", []):
                    by_kind.setdefault(n["kind"], (n["text"], []))[1].append(k + 1)
            for kind, (text, rounds) in by_kind.items():
                which = "every round" if len(rounds) == len(r["rounds"]) else \
                    "round " + ", ".join(map(str, rounds))
                out.append(f"- {t['label']}, {_row_label(doc, r['key'])} ({which}): {text}")
    return "\n".join(out) or "- none"


ERRORS = """An error is an answer cm-load could not accept, counted over the whole run, warm-up
included: `timeout` (no answer within cm-load's --timeout: in the blocking model, the connections
beyond its workers wait in the accept queue for the whole run, so their requests time out -- a
property of the model, not a failure), `reset` (the server closed a connection with a request in
flight), `status` / `body` (a wrong answer), `early` (answered before its delay: a violation, never
a fast server), `connect` (a connection that could not be opened). A row with wrong or early
answers is not a result."""


def validation(doc):
    out = []
    for t in doc["targets"]:
        v = t.get("validation")
        if v:
            out.append(f"- {t['label']}: " + ("; ".join(v["passed"]) if v["ok"] else
                                             f"refused: {v['failure']}"))
    return "\n".join(out)


def paired_table(doc):
    """The variants of each server set against its first, round by round (add_variant_pairs), or
    "" when the profile has one variant."""
    results.add_variant_pairs(doc)  # a document written before they were kept has its rounds
    lines = []
    for t in doc["targets"]:
        for r in t["rows"]:
            paired = r["summary"].get("paired")
            if not paired:
                continue
            cells = [stats.Estimate.from_json(paired[k]).format("{:.2f}") if paired.get(k)
                     else "-" for k in results.PAIRED]
            lines.append(f"| {t['server']} | {t['variant']} over {paired['against']} | "
                         f"{_row_label(doc, r['key'])} | " + " | ".join(cells) + " |")
    if not lines:
        return ""
    return "\n".join([
        "## Variants, paired within each round", "",
        "Each later variant of a server over its first, the same row in the same round: the median "
        "of the rounds' ratios with its 95% interval. An interval that holds 1 is **no difference "
        "measured here**.", "",
        "| server | variant | row | server CPU per request, ratio | efficiency, ratio | "
        "p99 overshoot, ratio |", "|---|---|---|--:|--:|--:|", *lines, ""])


def markdown(doc, charts, chart_note=""):
    m = doc["meta"]
    p = m["provenance"]
    commit = p["commit"]
    dirty = " with uncommitted changes" if commit.get("dirty") else ""
    trees = ", ".join(f"{k} `{(v or '-')[:10]}`" for k, v in p["trees"].items())
    parts = [
        f"# Profile `{m['profile']}`", "", m["description"], "",
        f"Written by `cm-price` on {m['finished_utc']} (started {m['started_utc']}); every number "
        "below comes from this run. Regenerate with:", "", f"    {m['command']}", "",
        f"Commit `{commit['head']}`{dirty}; the code measured, as git tree hashes: {trees}. "
        f"Machine: [machine.md](machine.md). {m['method']}", "",
        *([f"Conditions: {m['note']}", ""] if m.get("note") else []),
        "## Claims", "",
        "Each cell is the median over the rounds of a figure taken within a round, with its 95% "
        "confidence interval in brackets (distribution-free, from the order statistics; `[n=k]`: "
        "too few rounds for one). Intervals that overlap are **no difference measured here**, "
        "whatever the medians say.", "",
        claims_table(doc), "", "Orderings these intervals support (disjoint intervals):", "",
        orderings(doc), "",
        *([paired_table(doc)] if paired_table(doc) else []),
        "## Full table", "",
        "Medians over the rounds, the least and the greatest in brackets. Absolute rps follow the "
        "machine's speed, which moves by tens of percent within minutes: compare servers by the "
        "claims above, not by these.", "", full_table(doc), "",
        "## Notes", "", notes(doc), "", "## What an error means", "", ERRORS, "",
        "## Validation (before timing, as HttpArena validates)", "", validation(doc), "",
    ]
    if doc["skipped"]:
        parts += ["Skipped: " + "; ".join(doc["skipped"]), ""]
    if charts:
        parts += ["## Charts (harness/plot, matplotlib)", ""] + [f"![{c}]({c})\n" for c in charts]
    if chart_note:
        parts.append(chart_note)
    return "\n".join(parts) + "\n"


def compact(doc):
    """What cm-price prints at the end: the claims table and the orderings."""
    return claims_table(doc) + "\n\n" + orderings(doc)
