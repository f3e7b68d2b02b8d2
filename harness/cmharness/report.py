"""The Markdown of a cm-price result (results.md) and the table it prints, from results.json.

A page opens with what a newcomer needs: what was run, what it shows, and the one table of what
each server answered against the ceiling that binds it (lesson_table). Then the claims (every
comparative figure as `estimate [low high]`, the median over the rounds with its 95% interval),
the orderings they support -- rps compared between servers, an efficiency only among servers
bound by the same kind of ceiling -- the full table, and the notes, each said once.
"""

import re

from . import ceilings, profiles, results, stats
from .memory import WaitingCost

ABOVE = "**above its ceiling: a measurement defect, not a finding**"
#: What a reader is told under a claims table whose claims reruns did not reproduce.
RERUN_MARK = "†"
#: The most words before the first table of a page (docs/tools/wordcount.py counts the same).
OPENING_WORDS = 250


def _est(claim):
    return stats.Estimate.from_json(claim["estimate"])


def _row_label(doc, key):
    for t in doc["targets"]:
        for r in t["rows"]:
            if r["key"] == key:
                return row_title(r)
    return key


def row_title(r):
    """"/delay/100 x 2,000" of a row of results.json."""
    path = r["path"].replace("{ms}", r["delay"]) if r["delay"] else r["path"]
    method = f"{r['method']} " if r.get("method", "GET") != "GET" else ""
    return f"{method}{path} x {r['connections_requested']:,}"


def _row_order(doc, key):
    keys = [r["key"] for t in doc["targets"] for r in t["rows"]]
    return keys.index(key) if key in keys else len(keys)


def priced_rows(doc):
    """{row key: [(target, row)]} of the rows priced against ceilings (not a CPU-ceiling row), in
    the profile's order, servers in the file's order."""
    out = {}
    for t in doc["targets"]:
        for r in t["rows"]:
            if not r["cpu_ceiling_row"]:
                out.setdefault(r["key"], []).append((t, r))
    return dict(sorted(out.items(), key=lambda kv: _row_order(doc, kv[0])))


def _counted(r):
    return [m for m in r.get("rounds", []) if m and not m.get("error") and m.get("rps")]


def rps_estimate(r):
    """The median rps of a row's measured rounds with its 95% interval."""
    return stats.estimate([m["rps"] for m in _counted(r)])


def _median(r, key):
    return ((r["summary"] or {}).get(key) or {}).get("median")


def bound_kind(r):
    """The kind of ceiling that binds a row, as a reader takes it (ceilings.binding_label)."""
    return ceilings.binding_label(r["bound"], r.get("connections_requested"),
                                  r.get("mean_delay_ms"), _median(r, "thread_ceiling")) or ""


#: What a ceiling of `count / delay` counts, as a tie names it ("64 threads = database connections").
COUNTED = {"connections": "connections", "threads": "threads", "database": "database connections"}
SUMMARY_KEY = {"connections": "connection_ceiling", "threads": "thread_ceiling",
               "cpu": "cpu_ceiling", "database": "database_ceiling"}


def ceiling_text(t, r):
    """The ceiling that binds, its value and its kind: "640 = 64 threads / 0.1 s"."""
    value = _median(r, "lowest_ceiling")
    if value is None:
        return "-"
    kind, delay_s = bound_kind(r), (r.get("mean_delay_ms") or 0) / 1000
    tied = kind.split(" = ")
    if " or " not in kind and "cpu" not in tied and all(k in COUNTED for k in tied):
        n = round(value * delay_s)  # count / delay, or a tie of such counts
        what = " = ".join(COUNTED[k] if n != 1 else COUNTED[k][:-1] for k in tied)
        return f"{value:,.0f} = {n:,} {what} / {delay_s:g} s"
    if kind == "cpu":
        if r["path"].startswith("/cpu/"):
            return f"{value:,.0f} = the CPU / {r['path'][len('/cpu/'):]} µs"
        return f"{value:,.0f} = its CPU"
    if " or " not in kind:  # a kind no case above names (a tie with the CPU): its value alone
        return f"{value:,.0f} = {kind}"
    parts = []
    for part in kind.split(" or "):
        one = dict(r, bound=part, summary=dict(r["summary"], lowest_ceiling=r["summary"].get(
            SUMMARY_KEY.get(part.split(" = ")[0], "lowest_ceiling"))))
        parts.append(ceiling_text(t, one))
    return " or ".join(parts) + ", by round"


def efficiency_text(r, fmt="{:.1%}"):
    """The efficiency's estimate and interval, and the rounds that were defects (not counted)."""
    s = r["summary"] or {}
    defects = s.get("defects", 0)
    iv = s.get("efficiency_interval")
    if iv is None:
        return "every round above its ceiling: a defect, no figure" if defects else "-"
    text = stats.Estimate.from_json(iv).format(fmt)
    if stats.above_ceiling(stats.Estimate.from_json(iv)):
        text += f" {ABOVE}"
    if defects:
        text += f" ({defects} round{'s' if defects > 1 else ''} above its ceiling: a defect, " \
                "not counted)"
    return text


def waiting_text(t, r):
    """Bytes per waiting request of a /delay row's server, when the profile measured it."""
    cost = t.get("waiting_cost")
    if not cost or not r["path"].startswith("/delay/"):
        return "-"
    return WaitingCost.from_json(cost).text()


def lesson_table(doc):
    """The one table: per priced row and server, what it answered, the ceiling that binds with its
    value and kind, the efficiency, the bytes a waiting request holds and the p99 overshoot."""
    lines = ["| row | server | rps | the ceiling that binds | efficiency | bytes per waiting "
             "request | p99 overshoot, ms |", "|---|---|--:|---|--:|--:|--:|"]
    for key, pairs in priced_rows(doc).items():
        for i, (t, r) in enumerate(pairs):
            rps = rps_estimate(r)
            over = _median(r, "overshoot_p99_ms")
            lines.append(
                f"| {row_title(r) if i == 0 else ''} | {t['label']} | "
                f"{rps.format('{:,.0f}') if rps else '-'} | {ceiling_text(t, r)} | "
                f"{efficiency_text(r)} | {waiting_text(t, r)} | "
                f"{'-' if over is None else f'{over:.1f}'} |")
    return "\n".join(lines)


def cpu_ceiling_words(settings):
    """How a row's CPU ceiling was measured, as its profile asked (meta.profile_settings)."""
    kinds = "`/plaintext`" + (f" or `/delay/{settings['ceiling_delay_ms']}`"
                              if settings.get("ceiling_delay_ms") else "")
    shape = " with as many connections" if settings.get("ceiling_at_row_connections") else ""
    return f"its {kinds} rps{shape}, the largest of the windows right before and after the row"


def how_made(doc):
    return HOW_MADE.format(cpu=cpu_ceiling_words(doc["meta"].get("profile_settings", {})))


HOW_MADE = (
    "How a cell is made: **rps** is the median of the rounds with its 95% interval; **the ceiling "
    "that binds** is the lowest of `connections / delay`, `threads / delay` (the threads a waiting "
    "request holds) and the server's CPU ({cpu}), the median of the rounds; **efficiency** is the "
    "median of each round's own rps ÷ that round's ceiling -- equal to the ratio of the two medians"
    " beside it where the ceiling is fixed (connections, threads), not always where it moves from "
    "round to round (the CPU); a round above its ceiling is a defect of the measurement and is not "
    "counted. **Bytes per waiting request**: the resident memory one request left waiting adds, "
    "measured on fresh servers (the blocking model: per worker thread holding one, with the stack "
    "it reserves). **p99 overshoot**: how late the 99th-percentile answer came after its delay, the"
    " median of the rounds. Efficiencies are compared only between servers bound by the same kind "
    "of ceiling; rps between any two.")


def ratio_table(doc):
    """The CPU ceilings beside a peer: each server's /plaintext rps and its ratio to the peer's in
    the same sprint (the ratio claims), or "" without a peer."""
    ratios = [c for c in doc["claims"] if c["kind"] == "ratio"]
    if not ratios:
        return ""
    ref = ratios[0]["reference"]
    rows = {}
    for t in doc["targets"]:
        for r in t["rows"]:
            if r["cpu_ceiling_row"] and r["key"] == ratios[0]["row"]:
                rows[t["label"]] = r
    title = row_title(rows[ref]) if ref in rows else ratios[0]["row"]
    lines = [f"| server | {title}: rps | × {ref}'s, same sprint |", "|---|--:|--:|"]
    for label, r in rows.items():
        c = next((c for c in ratios if c["label"] == label), None)
        rps = rps_estimate(r)
        cell = "= 1" if label == ref else (_est(c).format("{:.2f}") if c else "-")
        lines.append(f"| {label} | {rps.format('{:,.0f}') if rps else '-'} | {cell} |")
    return "\n".join(lines)


# -- orderings --------------------------------------------------------------------------------

def _rounds_rps(r):
    """Each round's rps, by round number (None where it failed)."""
    out = {}
    for m in r.get("rounds", []):
        if m and m.get("round") is not None:
            out[m["round"]] = m["rps"] if not m.get("error") else None
    return out


def rps_ratio(a, b):
    """a's rps over b's, round by round (each ratio taken within a round), as an Estimate."""
    ra, rb = _rounds_rps(a), _rounds_rps(b)
    keys = sorted(set(ra) & set(rb))
    return stats.paired_ratio([ra[k] for k in keys], [rb[k] for k in keys])


def _told_apart(pairs_of, a, b):
    e = pairs_of(a, b)
    return e is not None and e.has_interval and e.low > 1.0


def tiers(labels, more_than):
    """`labels` (in descending order of their medians) cut into groups such that every member of
    a group answered more than every member of the next one (more_than(a, b), measured); adjacent
    groups that cannot be told apart so are merged."""
    groups = [[x] for x in labels]
    merged = True
    while merged:
        merged = False
        for i in range(len(groups) - 1):
            if not all(more_than(a, b) for a in groups[i] for b in groups[i + 1]):
                groups[i:i + 2] = [groups[i] + groups[i + 1]]
                merged = True
                break
    return groups


def rps_ordering(pairs):
    """"a, b (no difference measured among them) > c > d; the most answered 31× [30 32] what the
    least did" for the (target, row) pairs of one row."""
    by_label = {t["label"]: r for t, r in pairs if rps_estimate(r)}
    labels = sorted(by_label, key=lambda x: -rps_estimate(by_label[x]).estimate)
    if len(labels) < 2:
        return ""

    def more(a, b):
        return _told_apart(lambda x, y: rps_ratio(by_label[x], by_label[y]), a, b)

    parts = []
    for g in tiers(labels, more):
        if len(g) == 1:
            parts.append(g[0])
            continue
        apart = sum(more(a, b) or more(b, a) for i, a in enumerate(g) for b in g[i + 1:])
        parts.append(", ".join(g) + (" (no difference measured among them)" if not apart else
                                     f" ({apart} of {len(g) * (len(g) - 1) // 2} pairs told "
                                     "apart)"))
    text = " > ".join(parts)
    spread = rps_ratio(by_label[labels[0]], by_label[labels[-1]])
    if spread is not None and spread.estimate >= 1.5:
        text += (f"; {labels[0]} answered {spread.format('{:,.1f}')} times what {labels[-1]} did "
                 "(within each round)")
    return text


def efficiency_orderings(pairs):
    """Among the servers of one row bound by the same kind of ceiling (and only among them): the
    pairs whose efficiency intervals are disjoint."""
    groups = {}
    for t, r in pairs:
        iv = (r["summary"] or {}).get("efficiency_interval")
        if iv:
            groups.setdefault(bound_kind(r), []).append((t["label"], stats.Estimate.from_json(iv)))
    return [f"among the servers bound by {KIND_WORDS.get(kind, kind)}: {disjoint(members)}"
            for kind, members in groups.items() if len(members) > 1 and " or " not in kind]


def disjoint(members):
    """"a > b; a > c (1 pair(s): no difference measured here)": the pairs of (label, Estimate)
    whose intervals are disjoint, the rest counted as not told apart."""
    members = sorted(members, key=lambda m: -m[1].estimate)
    found = [f"{a} > {b}" for i, (a, ea) in enumerate(members) for b, eb in members[i + 1:]
             if ea.above(eb)]
    ties = len(members) * (len(members) - 1) // 2 - len(found)
    return ("; ".join(found) if found else "none") + (
        f" ({ties} pair(s): no difference measured here)" if ties else "")


KIND_WORDS = {"connections": "connections / delay", "threads": "threads / delay",
              "cpu": "their own CPU", "connections = threads": "connections = threads / delay",
              "database": "database connections / query time"}


def orderings(doc):
    """For each priced row: the order of the servers by rps (ratios within a round), then the
    efficiencies, compared only among servers bound by the same kind of ceiling; for the CPU
    ceilings, the ratios to the peer."""
    out = []
    for key, pairs in priced_rows(doc).items():
        title = row_title(pairs[0][1])
        order = rps_ordering(pairs)
        if order:
            out.append(f"- {title}, rps: {order}")
        for text in efficiency_orderings(pairs):
            out.append(f"- {title}, efficiency {text}")
    ratios = [c for c in doc["claims"] if c["kind"] == "ratio"]
    if ratios:
        out.append(f"- {_row_label(doc, ratios[0]['row'])}, rps / {ratios[0]['reference']}: "
                   + disjoint([(c["label"], _est(c)) for c in ratios]))
    return "\n".join(out) or "- none"


# -- the claims --------------------------------------------------------------------------------

def claim_columns(doc):
    """The claims' columns, in row order: (row key, kind, reference) -> a heading."""
    cols = {}
    for c in doc["claims"]:
        col = (c["row"], c["kind"], c["reference"])
        if col not in cols:
            what = f"rps / {c['reference']}" if c["kind"] == "ratio" else "efficiency"
            cols[col] = f"{_row_label(doc, c['row'])}: {what}"
    return dict(sorted(cols.items(), key=lambda kv: (kv[0][1] != "ratio",
                                                     _row_order(doc, kv[0][0]))))


def not_reproduced(claim, reproduced):
    """The range that runs of this claim's code span, when one of them fell outside the claim's
    interval (the claim did not reproduce), else None."""
    runs = (reproduced or {}).get(claim["id"])
    was = _est(claim)
    if not runs or not was.has_interval:
        return None
    if all(was.low <= r.estimate <= was.high for r in runs):
        return None
    return stats.hull([was, *runs])


def claims_table(doc, reproduced=None):
    """server | one column per kind of claim: `estimate [low high]`, flagged above a ceiling, and
    marked (RERUN_MARK, with the range of the runs) where reruns of its code disagreed."""
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
            span = not_reproduced(c, reproduced)
            if span is not None:
                text += f" {RERUN_MARK} runs: [{fmt.format(span.low)} {fmt.format(span.high)}]"
            cells.append(text + (f" {ABOVE}" if c["above_ceiling"] else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if any(not_reproduced(c, reproduced) for c in doc["claims"]):
        lines += ["", f"{RERUN_MARK} A rerun of this same code gave an estimate outside this "
                  "interval: what this machine gives for the figure is the range of the runs, "
                  "not the one interval (its speed here is not steady from one minute to the "
                  "next; the runs are listed under \"Reruns of this code\")."]
    return "\n".join(lines)


def _fig(summary, key, fmt="{:,.0f}"):
    s = summary.get(key)
    if not s:
        return "-"
    if s["min"] == s["max"] or s["n"] == 1:
        return fmt.format(s["median"])
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def full_table(doc):
    head = ("| server | threads | row | stagger ms | rps | bound | lowest ceiling | efficiency | "
            "p99 ms | p99 overshoot ms | server CPU ms / 1k | server busy | starved | RSS growth "
            "under load / conn, KiB | errors | rounds |")
    lines = [head, "|---|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|"]
    for t in doc["targets"]:
        for r in t["rows"]:
            s = r["summary"]
            eff_text = efficiency_text(r) if not r["cpu_ceiling_row"] else "CPU ceiling"
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
    """The rows' notes, each said once: one line per text, with every server, row and round that
    said it ("every round" where all did)."""
    said = {}
    for t in doc["targets"]:
        if not t["priced"]:
            said.setdefault(f"not priced: {t['refused']}", []).append(f"**{t['label']}**")
            continue
        for r in t["rows"]:
            by_text = {}
            for k, m in enumerate(r["rounds"]):
                texts = ([m["error"]] if m.get("error") else []) + \
                    [n["text"] for n in m.get("notes", [])]
                for text in texts:
                    by_text.setdefault(text, []).append(k + 1)
            for text, rounds in by_text.items():
                which = "" if len(rounds) == len(r["rounds"]) else \
                    " (round " + ", ".join(map(str, rounds)) + ")"
                said.setdefault(text, []).append(f"{t['label']} {row_title(r)}{which}")
    out = []
    for text, where in said.items():
        out.append(f"- {'; '.join(where)}: {text}")
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


def what_it_shows(doc, budget=None):
    """Sentences from the figures: per row described (each row kind's fewest and most
    connections), what the servers answered, grouped by the kind of ceiling that bound them; the
    servers of one variant (`--offload pool`) are one group, whatever bound each. Past a budget
    of words: no row of the CPU ceiling's own shape (its route and connections, in another
    variant: it measures that ceiling), then the sentences that fit, each row kind's last row
    (its longest delay, most connections) first, and a word that the others are in the tables."""
    rows = priced_rows(doc)
    flags = {v["name"]: " ".join(v.get("server_args", [])) for v in
             doc["meta"].get("profile_settings", {}).get("variants", [])}
    by_id = {}
    for key, pairs in rows.items():
        by_id.setdefault(pairs[0][1]["id"], []).append(key)
    keys = [k for ks in by_id.values() for k in dict.fromkeys((ks[0], ks[-1]))]
    sentences = {key: _row_sentence(rows[key], flags) for key in keys}
    if budget is None or sum(len(x.split()) for x in sentences.values()) <= budget:
        return " ".join(sentences.values())
    shape = {(r["path"], r["connections_requested"]) for t in doc["targets"] for r in t["rows"]
             if r["cpu_ceiling_row"]}
    kept, words = set(), 0
    for key in [k for ks in by_id.values() for k in dict.fromkeys((ks[-1], ks[0]))]:
        row, n = rows[key][0][1], len(sentences[key].split())
        if (row["path"], row["connections_requested"]) not in shape and words + n <= budget:
            kept.add(key)
            words += n
    return " ".join([sentences[k] for k in keys if k in kept] +
                    ["The other rows are in the tables below."])


def _row_sentence(pairs, flags):
    """"At /delay/100 x 2,000: ...": what the servers of one row answered, group by group."""
    groups = {}
    for t, r in pairs:
        if not rps_estimate(r):
            continue
        if _standard(t["variant"]):
            groups.setdefault((bound_kind(r), _ceiling_value_if_fixed(r), t["variant"]),
                              []).append((t, r))
        else:
            groups.setdefault((None, None, t["variant"]), []).append((t, r))
    variant_servers = {t["server"] for t, _ in pairs if not _standard(t["variant"])}
    parts = []
    for (_, _, variant), members in groups.items():
        names = _names(members, variant_servers, variant, flags)
        rps = [rps_estimate(r).estimate for _, r in members]
        span = f"{min(rps):,.0f}" if len(rps) == 1 else f"{min(rps):,.0f} to {max(rps):,.0f}"
        effs = [(r["summary"].get("efficiency_interval") or {}).get("estimate")
                for _, r in members]
        effs = [e for e in effs if e is not None]
        eff = "" if not effs else (f", {min(effs):.0%}" if len(effs) == 1 or
                                   round(min(effs), 2) == round(max(effs), 2)
                                   else f", {min(effs):.0%} to {max(effs):.0%}")
        against = _against(members)
        parts.append(f"{names} answered {span} rps{eff} of {against}"
                     if eff else f"{names} answered {span} rps against {against}")
    return f"At {row_title(pairs[0][1])}: " + "; ".join(parts) + "."


def _standard(variant):
    return variant in ("standard", "-")


def _against(members):
    """The ceiling a group was priced against: its value when it is one for every member and
    every round, else its kind when it is one, else that each has its own."""
    fixed = {_ceiling_value_if_fixed(r) for _, r in members}
    kinds = {bound_kind(r) for _, r in members}
    if len(fixed) == 1 and None not in fixed and len(kinds) == 1:
        return ceiling_text(*members[0])
    if kinds == {"cpu"}:
        return "its CPU ceiling"
    if len(kinds) == 1:
        return "ceilings that differ by round"
    return "the ceilings that bind each"


def _names(members, variant_servers, variant, flags):
    """"asio_coro, uring_coro", or for a variant "`--offload pool`: every model" (every server
    run with a variant in that row)."""
    mine = [t["server"] for t, _ in members]
    if _standard(variant):
        return ", ".join(t["label"] for t, _ in members)
    # its flag when that is short (`--offload pool`), else its name ("pool 16": the page says
    # which flags each name stands for)
    short = flags.get(variant) and len(flags[variant].split()) <= 2
    how = f"`{flags[variant]}`" if short else variant
    return f"{how}: " + ("every model" if set(mine) == variant_servers and len(mine) > 1
                         else ", ".join(mine))


def _ceiling_value_if_fixed(r):
    """The binding ceiling's value when it does not move from round to round (connections,
    threads), else None."""
    s = (r["summary"] or {}).get("lowest_ceiling")
    return s["median"] if s and s["min"] == s["max"] and "cpu" not in r["bound"] else None


def opening(doc):
    """The part a newcomer reads: what was run (the profile's summary), what it shows, the one
    table, how a cell is made."""
    m = doc["meta"]
    summary = profiles.summary_of(m)
    budget = OPENING_WORDS - len(re.sub(r"[#`*]", " ", summary).split()) - 12
    lines = [f"# Profile `{m['profile']}`", "", summary, "", what_it_shows(doc, budget), "",
             lesson_table(doc), "", how_made(doc), ""]
    ratios = ratio_table(doc)
    if ratios:
        lines += ["Each server's CPU ceiling, its `/plaintext` rps, beside the reference peer's "
                  "in the same sprint (the median of the sprints' own ratios):", "", ratios, ""]
    return lines


def _round_means(r):
    """Each round's mean latency in µs, by round number (None where it failed)."""
    out = {}
    for m in r.get("rounds", []):
        if m and m.get("round") is not None and not m.get("error"):
            out[m["round"]] = (((m.get("load") or {}).get("latency_us")) or {}).get("mean")
    return out


def _row_of(doc, server, row_id):
    for t in doc["targets"]:
        if t["server"] == server and t["variant"] in ("standard", "-"):
            return next((r for r in t["rows"] if r["id"] == row_id), None)
    return None


def published_section(doc):
    """The published table a profile reproduces (meta.published), its figures beside this run's:
    A's rps and mean latency over B's, there from one run each, here the median of the ratios
    taken within each round with its interval; "" when the profile reproduces none."""
    pub = doc["meta"].get("published")
    if not pub:
        return ""
    a, b = pub["a"], pub["b"]
    lines = ["## Beside the published figures", "",
             f"From {pub['source']}. There: {pub['setting']}", "",
             f"| row | there: {a} rps | there: {b} rps | there: {a} / {b}, rps | here: {a} / {b}, "
             f"rps, within a round | there: {a} / {b}, mean latency | here: {a} / {b}, mean "
             "latency, within a round |", "|---|--:|--:|--:|--:|--:|--:|"]
    for p in pub["rows"]:
        ra, rb = _row_of(doc, a, p["row"]), _row_of(doc, b, p["row"])
        here_rps = here_latency = "-"
        if ra and rb:
            est = rps_ratio(ra, rb)
            here_rps = est.format("{:.2f}") if est else "-"
            la, lb = _round_means(ra), _round_means(rb)
            keys = sorted(set(la) & set(lb))
            lat = stats.paired_ratio([la[k] for k in keys], [lb[k] for k in keys])
            here_latency = lat.format("{:.2f}") if lat else "-"
            title = f"{p['as']} (here {row_title(ra)})"
        else:
            title = p["as"]
        lines.append(f"| {title} | {p['a_rps']:,.0f} | {p['b_rps']:,.0f} | "
                     f"{p['a_rps'] / p['b_rps']:.2f} | {here_rps} | "
                     f"{p['a_latency_us'] / p['b_latency_us']:.2f} | {here_latency} |")
    return "\n".join(lines + ["", f"What differs: {pub['differs']}", ""])


def markdown(doc, charts, chart_note="", reproduced=None):
    m = doc["meta"]
    p = m["provenance"]
    commit = p["commit"]
    dirty = " with uncommitted changes" if commit.get("dirty") else ""
    trees = ", ".join(f"{k} `{(v or '-')[:10]}`" for k, v in p["trees"].items())
    parts = [
        *opening(doc),
        *([published_section(doc)] if published_section(doc) else []),
        "## How it was measured", "", m["description"], "",
        f"Written by `cm-price` on {m['finished_utc']} (started {m['started_utc']}); every number "
        "on this page comes from this run. Regenerate with:", "", f"    {m['command']}", "",
        f"Commit `{commit['head']}`{dirty}; the code measured, as git tree hashes: {trees}. "
        f"Machine: [machine.md](machine.md). {m['method']}", "",
        *([f"Conditions: {m['note']}", ""] if m.get("note") else []),
        *([f"The database: {m['database']}.", ""] if m.get("database") else []),
        "## Claims", "",
        "Each cell is the median over the rounds of a figure taken within a round, with its 95% "
        "confidence interval in brackets (distribution-free, from the order statistics; `[n=k]`: "
        "too few rounds for one). Intervals that overlap are **no difference measured here**, "
        "whatever the medians say.", "",
        claims_table(doc, reproduced), "",
        "Orderings these measurements support: rps between servers (each pair's ratio taken within "
        "a round, ordered where its interval excludes 1), efficiency only among servers bound by "
        "the same kind of ceiling (disjoint intervals):", "",
        orderings(doc), "",
        *([paired_table(doc)] if paired_table(doc) else []),
        "## Full table", "",
        "Medians over the rounds, the least and the greatest in brackets. Absolute rps follow the "
        "machine's speed, which moves by tens of percent within minutes: compare servers by the "
        "claims above, not by these. RSS growth under load is the server's peak RSS in the row's "
        "window over its RSS before it, per connection: on a server kept running it is near 0 "
        "(its memory grew in an earlier row); the bytes a waiting request holds are measured "
        "apart, above.", "", full_table(doc), "",
        *database_section(doc),
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


# What a waiting request holds in each server: the model's design, not a measurement (the
# measured bytes are beside it). Each model page explains its own.
HOLDS = {
    "blocking": "a worker thread, asleep in the call",
    "asio_coro": "a coroutine frame and a steady_timer",
    "asio_coro_uring": "a coroutine frame and a steady_timer (io_uring backend)",
    "libuv_callbacks": "a connection struct and its uv_timer_t",
    "uring_coro": "a coroutine frame and a timeout in the kernel (IORING_OP_TIMEOUT)",
    "node": "a closure and a setTimeout timer",
    "go": "a parked goroutine (its stack) and a runtime timer",
    "tokio": "a task (its future) and a timer-wheel entry",
}


def database_table(doc):
    """Per /db/ row and server: the queries the database completed against the answers cm-load
    read over the rounds, the rounds where they differ, the database's own time and CPU per
    query beside the server's CPU per answer, how busy the CPUs it shares with cm-load were, and
    the p99 latency ("" without a /db/ row)."""
    lines = ["| row | server | queries the database completed | correct answers | rounds where "
             "they differ | the database's time per query, ms | database CPU per query, µs | "
             "server CPU per answer, µs | load CPUs busy | p99, ms |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for t in doc["targets"]:
        for r in t["rows"]:
            s = r["summary"] or {}
            if "db_queries" not in s:
                continue
            db_cpu, server = _median(r, "db_cpu_us_per_query"), _median(r, "server_cpu_ms_per_1k")
            p99, db_ms = _median(r, "latency_p99_ms"), _median(r, "db_query_ms")
            busy = _median(r, "load_cpus_busy")
            lines.append(
                f"| {row_title(r)} | {t['label']} | {s['db_queries']:,} | {s['db_answers']:,} | "
                f"{s['db_count_mismatches']} | {'-' if db_ms is None else f'{db_ms:.2f}'} | "
                f"{'-' if db_cpu is None else f'{db_cpu:,.0f}'} | "
                f"{'-' if server is None else f'{server:,.0f}'} | "
                f"{'-' if busy is None else f'{busy:.0%}'} | "
                f"{'-' if p99 is None else f'{p99:,.1f}'} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def _pool_at_database_time(m, delay_ms):
    """A /db/sleep round's pool ceiling with the database's own time per query for D instead of
    the sleep asked: P / D_db = ceilings.database x delay / D_db (None unmeasured)."""
    if not m.get("db_queries") or not m.get("db_exec_ms") or not m["ceilings"].get("database"):
        return None
    return m["ceilings"]["database"] * delay_ms / (m["db_exec_ms"] / m["db_queries"])


def database_time_table(doc):
    """Per /db/ row bound by its pool: the ceiling with the sleep asked, the database's own time
    per query, the ceiling with that time, and the rps over it within each round ("" if none)."""
    lines = ["| row | server | pool / the sleep asked | the database's time per query, ms | "
             "pool / that time | rps | rps ÷ pool / that time |", "|---|---|--:|--:|--:|--:|--:|"]
    for t in doc["targets"]:
        for r in t["rows"]:
            if "database" not in (r.get("bound") or "") or not r.get("mean_delay_ms"):
                continue
            rounds = [m for m in _counted(r) if not m.get("defect")]
            at_db = [_pool_at_database_time(m, r["mean_delay_ms"]) for m in rounds]
            ratios = stats.paired_ratios([m["rps"] for m in rounds], at_db)
            # The database's time is over the whole run (warm-up, window, drain), the rps the
            # window's: a round above that ceiling is a defect of the pairing, shown, not counted.
            limit = 1.0 + stats.ABOVE_TOLERANCE
            above = sum(1 for x in ratios if x > limit)
            ratio = stats.estimate([x for x in ratios if x <= limit])
            ceiling, db_ms = _median(r, "database_ceiling"), _median(r, "db_query_ms")
            if ratio is None or ceiling is None or db_ms is None:
                continue
            defects = f" ({above} above it: a defect, not counted)" if above else ""
            lines.append(f"| {row_title(r)} | {t['label']} | {ceiling:,.0f} | {db_ms:.2f} | "
                         f"{stats.median([c for c in at_db if c]):,.0f} | "
                         f"{rps_estimate(r).format('{:,.0f}')} | "
                         f"{ratio.format('{:.1%}')}{defects} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def database_section(doc):
    table = database_table(doc)
    if not table:
        return []
    at_db = database_time_table(doc)
    if at_db:
        at_db = ("The pool's ceiling divides its connections by the time each query holds one. "
                 "The sleep asked is not that time: PostgreSQL's `pg_sleep` wakes on a whole "
                 "millisecond (a 1 ms sleep holds its connection about 2 ms) and the query has "
                 "its own work around the sleep. With the database's own time per query "
                 "(`total_exec_time` over `calls`) for `D`, the same rounds priced again, each "
                 "round's rps over its own ceiling: what is left below 100% is the round trip "
                 "between the server and the database, and the server's hand-over of a freed "
                 "connection to the next request waiting for one.\n\n" + at_db + "\n")
    return ["## The database's count", "",
            "Each `/db/` request is one query. Before each row's run the database's statement "
            "counts are reset (`pg_stat_statements_reset()`); cm-load runs with `--drain` (after "
            "the window it sends nothing new and waits for every answer in flight), and once no "
            "server connection runs a query the calls of the two statements are read. Every "
            "correct answer is a query the database completed: the two columns are equal, with no "
            "margin, in every round without errors; a round where they differ is counted here "
            "and explained in the notes. The database's time per query is its own "
            "(`total_exec_time` over `calls`: from the query's arrival at its executor to the "
            "result, without the round trip to the server): the `D` a pool of `P` connections "
            "really divides. The database's CPU (its processes, pinned beside cm-load) is over "
            "the whole run, per query it completed; the server's, per answer in the window. "
            "The database runs on the CPUs cm-load runs on (the server has the others to "
            "itself): **load CPUs busy** is how busy those CPUs were in the window, by cm-load, "
            "the database and anything else (`/proc/stat`), the median of the rounds. Near "
            "100% the row is bound by "
            "that CPU -- a ceiling of the machine the run shares out, not of the server, and not "
            "priced: its efficiency against the pool says how far the pool was from binding, not "
            "what the server lacks.", "", table, "", *([at_db] if at_db else [])]


def headline(doc, chart):
    """The README's headline, from a sweep: its chart, and per server at the sweep's largest
    point what a waiting request holds (the design, and the bytes measured), the rps, the ceiling
    that binds with its value and kind, and the efficiency."""
    rows = [(t, r) for pairs in priced_rows(doc).values() for t, r in pairs
            if r["connections_requested"]]
    if not rows:
        return ""
    top = max(r["connections_requested"] for _, r in rows)
    at_top = [(t, r) for t, r in rows if r["connections_requested"] == top]
    m = doc["meta"]
    lines = [
        f"![rps against connections, one panel per server]({chart})", "",
        f"`{row_title(at_top[0][1]).replace(' x ', '` at ', 1)} connections on 2 cores (server "
        f"on one CPU, load on the other), median of {m.get('rounds', 1)} rounds with its 95% "
        "interval, from [results/delay-sweep](results/delay-sweep/results.md) "
        "(`build/bin/cm-price delay-sweep`). A ceiling is the most a server could answer: "
        "`connections / delay`, `threads / delay` (the blocking model's 64 workers), or its own "
        f"CPU ({cpu_ceiling_words(m.get('profile_settings', {}))}); the efficiency is the median "
        "of the rounds' own rps ÷ "
        "ceiling. Bytes per waiting request: measured on fresh servers with "
        f"{m.get('profile_settings', {}).get('memory_waiting', 0):,} requests waiting (the "
        "blocking model: per worker thread holding one, the stack it reserves beside it). "
        "[docs/ceilings.md](docs/ceilings.md) works them through.", "",
        "| server | what a waiting request holds | bytes per waiting request | rps | the ceiling "
        "that binds | efficiency |", "| --- | --- | --: | --: | --- | --: |"]
    for t, r in at_top:
        lines.append(f"| {t['label']} | {HOLDS.get(t['server'], '-')} | {waiting_text(t, r)} | "
                     f"{_median(r, 'rps'):,.0f} | "
                     f"{ceiling_text(t, r)} | {efficiency_text(r, '{:.0%}')} |")
    return "\n".join(lines)


def compact(doc):
    """What cm-price prints at the end: the one table, how it is made, the orderings, and the
    CPU ceilings beside the peer."""
    out = [lesson_table(doc), "", how_made(doc), "", orderings(doc)]
    ratios = ratio_table(doc)
    if ratios:
        out += ["", ratios]
    return "\n".join(out)
