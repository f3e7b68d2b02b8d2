"""The latency profile's page, CSV and chart, from its results.json (latency.document): what
`cm-price latency` writes into results/latency/ and `cm-price render latency` writes again."""

import csv
import io
import os

from . import charts, proc, profiles, provenance, results
from .latency import HALF, KNEE_FACTOR, VALID_RATIO, dumps

CHART = "latency.png"


def method(p, s):
    pin = (f"Server on CPU {proc.cpu_list(s.server_cpus)}, cm-load on CPU "
           f"{proc.cpu_list(s.load_cpus)} (sched_setaffinity)")
    shares = ", ".join(f"{x:g}" for x in p.rates_percent)
    return (f"{pin}. The servers are started once and kept running (the blocking model with "
            f"{p.blocking_workers} workers, so that it holds every connection; the async models "
            f"one loop and a pool of {p.pool}). In each of {p.rounds} rounds every server's rows "
            f"in a new random order (seed {s.seed}): the row's capacity, a closed-loop window "
            f"({p.warmup_s:g} s warm-up, {p.duration_s:g} s measured) with the row's "
            f"connections, then an open-loop window (`cm-load --rate`, evenly spaced arrivals, "
            f"the same warm-up and length) at each of {shares}% of that capacity, in a random "
            "order. Latency counts from each request's intended send time; the server's CPU over "
            "each window is read from /proc.")


def _fmt(iv, fmt="{:,.0f}", none="-"):
    """"12.3 [11.0 14.1]" from an interval dict; "12.3 [n=3]" without bounds."""
    if iv is None or iv.get("median") is None:
        return none
    if iv.get("low") is None:
        return f"{fmt.format(iv['median'])} [n={iv['n']}]"
    return f"{fmt.format(iv['median'])} [{fmt.format(iv['low'])} {fmt.format(iv['high'])}]"


def knee_text(iv, last):
    """The knee's share: "80% [70% 90%]", with "> 110%" where it lies beyond the last share."""
    if iv is None:
        return "-"
    word = (lambda v: f"> {last:g}%" if v is None else f"{v:g}%")
    if iv.get("low") is None and iv.get("high") is None and iv["n"] < 6:
        return f"{word(iv['median'])} [n={iv['n']}]"
    return f"{word(iv['median'])} [{word(iv['low'])} {word(iv['high'])}]"


def rows_by_id(doc):
    """{row id: [(target, row)]} in the profile's order of rows, servers in the file's order."""
    out = {}
    for t in doc["targets"]:
        for r in t["rows"]:
            out.setdefault(r["id"], []).append((t, r))
    return out


def _title(row):
    path = row["path"].replace("{ms}", row["delay"]) if row["delay"] else row["path"]
    return f"{path} x {row['connections_requested']:,}"


def summary_table(doc, last):
    lines = []
    for rid, pairs in rows_by_id(doc).items():
        row0 = pairs[0][1]
        what = "overshoot" if row0["latency_of"] == "overshoot" else "latency"
        lines += [f"### {_title(row0)}", "",
                  f"| server | capacity, rps | p99 {what} at {doc['meta']['rates_percent'][0]:g}%, "
                  f"ms | knee: p99 > {KNEE_FACTOR}x | knee, rps | CPU per request at {HALF}%, µs "
                  f"| p99 {what} at {HALF}%, ms |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for t, r in pairs:
            s = r["summary"]
            lines.append(
                f"| {r['label']} | {_fmt(s['capacity_rps'])} | {_fmt(s['p99_ms_at_lowest'], '{:.2f}')} "
                f"| {knee_text(s['knee_percent'], last)} | {_fmt(s['knee_rps'])} "
                f"| {_fmt(s['cpu_us_at_half'], '{:.1f}')} | {_fmt(s['p99_ms_at_half'], '{:.2f}')} |")
        lines.append("")
    return lines


def _m(iv, fmt):
    return "-" if iv is None or iv.get("median") is None else fmt.format(iv["median"])


def curve_tables(doc):
    lines = []
    for rid, pairs in rows_by_id(doc).items():
        lines += [f"### {_title(pairs[0][1])}", "",
                  "| server | share | offered, rps | answered, rps | rate ratio | valid rounds "
                  "| p50, ms | p99, ms | p99.9, ms | own lag p99, ms | in system | server CPU busy "
                  "| CPU per request, µs | errors |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                  "| ---: | ---: | ---: |"]
        for t, r in pairs:
            for pt in r["points"]:
                lines.append(
                    f"| {r['label']} | {pt['percent']:g}% | {_m(pt['offered_rps'], '{:,.0f}')} "
                    f"| {_m(pt['rps'], '{:,.0f}')} | {_m(pt['rate_ratio'], '{:.3f}')} "
                    f"| {pt['valid_rounds']} of {pt['measured_rounds']} "
                    f"| {_m(pt['p50_ms'], '{:.3f}')} | {_m(pt['p99_ms'], '{:.3f}')} "
                    f"| {_m(pt['p999_ms'], '{:.3f}')} | {_m(pt['own_lag_p99_ms'], '{:.3f}')} "
                    f"| {_m(pt.get('in_system'), '{:,.1f}')} | {_m(pt.get('server_busy'), '{:.0%}')} "
                    f"| {_m(pt['cpu_us_per_request'], '{:.1f}')} | {pt['errors_total']:,} |")
        lines.append("")
    return lines


def notes(doc):
    last = doc["meta"]["rates_percent"][-1]
    lowest = doc["meta"]["rates_percent"][0]
    return [
        "## What each figure is", "",
        "- **capacity**: the row's closed-loop rps in the same round, right before its open-loop "
        "windows; the shares are of it. The median over the rounds with its 95% interval, as "
        "every figure in brackets here (an interval needs six rounds).",
        f"- **knee**: the first share at which the p99 exceeds {KNEE_FACTOR} times the p99 at "
        f"{lowest:g}%, found in each round; \"> {last:g}%\" where no share did. The knee in rps is "
        "that share of the round's capacity, over the rounds that had one (`[n=5]`: five did, "
        "too few for an interval).",
        "- **latency** counts from when a request was due, not from when it was sent: a request "
        "that waited for an idle connection (the server had not answered the last one) waits in "
        "the latency. For a row with a delay the figures are the **overshoot**, latency less the "
        "delay asked: what the server added to the wait.",
        f"- **rate ratio**: answers over requests due in the window. Below {VALID_RATIO} cm-load "
        "calls the window invalid: the server did not take what was offered, its queue grew for "
        "as long as the window lasted, and the latency shown is that queue's at the window's end "
        "-- a lower bound, not a steady state. **valid rounds** counts the rounds in which it was "
        "valid.",
        "- **own lag**: how late cm-load itself sent what was due (its timer, its loop): a p99 "
        "far below the latency's says the latency is the server's.",
        "- **in system**: Little's law, L = λ × W: answers a second times their mean latency "
        "(the whole latency, from when each was due): the requests inside the server, or waiting "
        "for an idle connection, on average.",
        "- **server CPU busy**: the server's CPU time over the window's, on its one CPU; "
        "**CPU per request**: that CPU time (user and system, from /proc) over the answers in "
        "the window.",
        "- **errors**: answers cm-load could not accept (a wrong status or body, a reset, a "
        "timeout) summed over the rounds. A timeout is a request unanswered for cm-load's "
        "--timeout after it was sent; beyond capacity that is the growing queue.",
        ""]


def above_capacity(doc, margin=1.02):
    """"- SERVER on ROW: at S% it answered X rps, valid in most rounds, above its capacity of C":
    for each row, the highest such share, where the open loop got more from the server than the
    closed loop that measured its capacity."""
    out = []
    for rid, pairs in rows_by_id(doc).items():
        for t, r in pairs:
            cap = (r["summary"].get("capacity_rps") or {}).get("median")
            found = [p for p in r["points"] if cap and p["rps"] and p["measured_rounds"]
                     and p["valid_rounds"] * 2 >= p["measured_rounds"]
                     and p["rps"]["median"] > margin * cap]
            if found:
                p = found[-1]
                out.append(f"- {r['label']} on `{_title(r)}`: at {p['percent']:g}% it answered "
                           f"{p['rps']['median']:,.0f} rps, valid in {p['valid_rounds']} of "
                           f"{p['measured_rounds']} rounds, above its capacity of {cap:,.0f}.")
    if not out:
        return []
    return ["## Answered above its capacity", "",
            "The capacity is what a closed loop got, every connection with a request in the "
            "server; an open loop below that keeps fewer in flight, and some servers answer more "
            "that way (a thread per connection, 2,000 threads runnable at once in the closed loop, "
            "is the plainest case). So a capacity is the reference the shares are of, not a "
            "ceiling, and in these rows the curve may end before the knee:", ""] + out + [""]


def markdown(doc, chart_files=(), chart_note=""):
    meta = doc["meta"]
    prov = meta["provenance"]
    last = meta["rates_percent"][-1]
    lines = [f"# Latency under load: the `{meta['profile']}` profile", "",
             profiles.summary_of(meta), ""]
    if CHART in chart_files:
        lines += [f"![p99 against the offered rate, one panel per server]({CHART})", ""]
    elif chart_note:
        lines += [chart_note, ""]
    lines += ["## The knee and the cost at half load", ""] + summary_table(doc, last)
    lines += ["## How it was measured", "", meta["description"], ""]
    lines += notes(doc) + above_capacity(doc)
    lines += ["## Every share", ""] + curve_tables(doc)
    skipped = [f"- {s}" for s in doc.get("skipped", [])] + [
        f"- {t['label']}: {t['refused']}" for t in doc["targets"] if not t["priced"]]
    if skipped:
        lines += ["## Not measured", ""] + skipped + [""]
    lines += provenance.conditions_markdown(
        prov, ended_utc=meta.get("finished_utc", ""), load_after=meta.get("load_after", [0, 0, 0]),
        pinning=f"server on CPU {meta['server_cpus']}, cm-load on CPU {meta['load_cpus']}",
        command=meta["command"]) + ["", "## Method", "", meta["method"], "",
                                    "Every window: `results.csv`; every figure: `results.json`; "
                                    "the machine: `machine.md`.", ""]
    return "\n".join(lines)


def csv_text(doc):
    keys = ("capacity_rps", "offered_rps", "rps", "rate_ratio", "valid", "p50_ms", "p99_ms",
            "p999_ms", "max_ms", "own_lag_p99_ms", "cpu_us_per_request", "server_busy",
            "load_busy", "errors_total", "late", "due")
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["server", "variant", "row", "round", "share", "error", *keys])
    for t in doc["targets"]:
        for r in t["rows"]:
            for win in r["capacity_rounds"] + r["rounds"]:
                w.writerow([t["server"], t["variant"], r["key"], win.get("round", ""),
                            "closed" if win.get("percent") is None else f"{win['percent']:g}",
                            win.get("error", ""), *(_cell(win.get(k)) for k in keys)])
    return out.getvalue()


def _cell(v):
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)


def panel_title(t):
    """A server's name as a panel says it: the blocking model with its workers (the latency
    profile runs it with 2,048, so that it holds every connection, not its default 64)."""
    return f"{t['label']}\n({t['threads']})" if t["kind"] == "blocking" and t.get("threads") \
        else t["label"]


def draw(doc, path, plt):
    """Small multiples: one panel per server and row, p99 against the offered rate in requests a
    second -- the same axes in every panel of a row, so a reader compares servers by where their
    curves rise, at what rate. Log latency, linear rate; each server's capacity dashed; a share's
    marker hollow where it was valid in fewer than half of the rounds."""
    groups = list(rows_by_id(doc).items())
    labels = list(dict.fromkeys(t["label"] for t in doc["targets"] if t["priced"]))
    targets = {t["label"]: t for t in doc["targets"]}
    width = max(7.5, 2.15 * len(labels) + 0.8)
    fig, axes = plt.subplots(len(groups), len(labels), figsize=(width, 2.5 * len(groups) + 1.5),
                             squeeze=False, sharey="row")
    colours = plt.get_cmap("tab10")
    for g, (rid, pairs) in enumerate(groups):
        row0 = pairs[0][1]
        by_label = {t["label"]: r for t, r in pairs}
        x_max = 1.05 * max((p["offered_rps"]["median"] for _, r in pairs for p in r["points"]
                            if p["offered_rps"]), default=1)
        what = "overshoot" if row0["latency_of"] == "overshoot" else "latency"
        for k, label in enumerate(labels):
            ax = axes[g][k]
            r = by_label.get(label)
            if g == 0:
                ax.set_title(panel_title(targets[label]), fontsize=8.5)
            ax.set_xlim(0, x_max)
            ax.set_yscale("log")
            ax.grid(True, which="major", color="0.9")
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_formatter(plt.FuncFormatter(
                lambda v, _: f"{v / 1000:g}k" if v else "0"))
            ax.xaxis.set_major_locator(plt.MaxNLocator(3))
            if k == 0:
                ax.set_ylabel(f"{_title(row0)}\np99 {what}, ms", fontsize=8)
            if g == len(groups) - 1:
                ax.set_xlabel("offered, rps", fontsize=8)
            if r is None:
                ax.text(0.5, 0.5, "not measured\n(no such route)", transform=ax.transAxes,
                        ha="center", va="center", fontsize=7, color="0.4")
                continue
            pts = [(p["offered_rps"]["median"], p["p99_ms"]["median"],
                    p["valid_rounds"] * 2 >= p["measured_rounds"])
                   for p in r["points"] if p["p99_ms"] and p["offered_rps"]]
            colour = colours(k % 10)
            ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], "-o", color=colour,
                    linewidth=1.3, markersize=3.5)
            hollow = [(x, y) for x, y, valid in pts if not valid]
            ax.plot([x for x, _ in hollow], [y for _, y in hollow], "o", color=colour,
                    markersize=3.5, markerfacecolor="white", linestyle="none")
            cap = (r["summary"].get("capacity_rps") or {}).get("median")
            if cap:
                ax.axvline(cap, color="0.3", linestyle="--", linewidth=0.9)
    text_width = width - 0.3  # a margin either side
    fig.suptitle(charts.wrapped("p99 against the offered rate (open loop, median of the rounds): "
                                "one panel per server, the same axes along a row", text_width),
                 fontsize=10)
    foot = charts.wrapped("dashed: the server's capacity (its closed-loop rps in the same round); "
                          "hollow: the server did not take the offered rate (rate ratio < 0.95) in "
                          "most rounds, so the latency is a growing queue's.", text_width, 7.5)
    fig.text(0.01, 0.01, foot, fontsize=7.5, color="0.25", va="bottom")
    bottom = (foot.count("\n") + 1.8) * 7.5 * 1.3 / 72 / fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, bottom, 1, 0.93))
    charts.save(fig, path)


def write(doc, folder):
    """results.json, results.csv, machine.*, the chart and results.md into folder."""
    os.makedirs(folder, exist_ok=True)
    plt = results.pyplot("cm-price latency")
    note = ""
    if plt is not None:
        try:
            draw(doc, os.path.join(folder, CHART), plt)
        except charts.LayoutError as e:
            note = f"chart: {e}"
    return results.write(doc, folder, lambda d, files, _n: markdown(d, files, note),
                         csv_text(doc), charts=False, dumps=dumps) or note


def compact(doc):
    """The summary tables, for the terminal."""
    return "\n".join(summary_table(doc, doc["meta"]["rates_percent"][-1]))

