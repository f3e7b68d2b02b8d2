"""The charts of a cm-price result, drawn from its results.json: results.chart() draws them after
each run, harness/plot draws them again (into another folder with --out). Every point comes
from results.json; the ceiling lines are the same arithmetic cm-price used (connections / delay,
threads / delay, each server's own /plaintext rps), and every whisker is a claim's 95% interval
(cmharness.stats). Each chart is written by charts.save(), which refuses a chart whose texts
overlap, run outside the figure or cover a data marker. matplotlib is the caller's (draw() takes
its pyplot, results.pyplot()), so that this module imports without it.

Charts, by the profile's "chart" kind:
  sweep    rps-vs-connections.png: rps against connections on linear axes (the gap between a model
           and its connections / delay line is the lesson; log axes shrink it), one panel per
           server (the others faint in grey): the median of its rounds, the 95% interval of its
           efficiency (times the median of its lowest ceiling) as whiskers. The connections /
           delay line, the server's CPU ceiling at each point (report.cpu_ceiling_words) and the
           blocking model's threads / delay line are each labelled with what they are, and each
           point with how busy the server's core was. Also
           headline.md: the largest point's rps per server against its lowest ceiling, copied
           into the README between its headline markers when the output folder is the
           repository's results/delay-sweep (never from any other folder).
  bars     rps-vs-ceiling.png: a panel per row kind. A panel of CPU-ceiling rows beside a
           reference peer (/plaintext beside nginx) draws the claims themselves: each server's rps
           as a ratio to the peer's in the same round with its 95% interval, and says which
           intervals overlap ("no ranking measured"). Any other panel: each server's median rps
           as a bar, the 95% interval of its efficiency (times its ceiling) as whiskers, every
           ceiling that applies as a mark (black: the one that binds; one more than REACH times
           the panel's tallest bar written at the top instead, so a bar far below its ceiling
           stays visible) and the efficiency above the bar.
  offload  offload.png: a panel per request kind, each async model's rps inline / pool / thread,
           drawn as the bars are.
"""

import math
import os
import textwrap

from . import ROOT, charts, report, servers, stats

PALETTE = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
#: How each ceiling is drawn in a bar panel, and named in the legend.
CEILING_STYLE = {"connections": "--", "threads": "-.", "CPU": ":", "database": (0, (5, 1, 1, 1))}
CEILING_NAME = {"connections": "connections / delay", "threads": "threads / delay",
                "CPU": "CPU ceiling: the server's /plaintext rps",
                "database": "database connections / query time"}
SHORT = {"connections": "conn.", "threads": "threads", "cpu": "CPU", "CPU": "CPU",
         "database": "database"}


def measured(doc):
    """Each row of results.json with a measured round, as the charts read it: the row itself and
    the medians of its figures over the rounds (its summary), the interval of its efficiency."""
    for t in doc["targets"]:
        for r in t["rows"]:
            ok = [x for x in r["rounds"] if not x.get("error") and x.get("load")]
            if not ok:
                continue
            summary = r["summary"]

            def med(key):
                return (summary.get(key) or {}).get("median")

            efficiency = med("efficiency")
            if efficiency is None and len(ok) == 1:  # its one round above its ceiling: a defect
                efficiency = ok[0]["efficiency"]
            interval = summary.get("efficiency_interval")
            each = {"connections": med("connection_ceiling"), "threads": med("thread_ceiling"),
                    "CPU": med("cpu_ceiling")}
            if med("database_ceiling") is not None:  # a /db/ row
                each["database"] = med("database_ceiling")
            yield dict(r, rps=med("rps"), efficiency=efficiency, lowest=med("lowest_ceiling"),
                       ceilings=each, starved=med("starved_connections") or 0,
                       busy=med("server_busy"),
                       interval=stats.Estimate.from_json(interval) if interval else None)


def compact(x):
    """1,800,000 -> 1.8M, 132,645 -> 133k: a figure short enough to sit above a bar."""
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def rps_axis(ax):
    """Tick labels in thousands (20k), so no offset text and no long numbers."""
    ax.yaxis.set_major_formatter(lambda v, _: compact(v) if v else "0")


def binding(r):
    """The ceiling that binds a row, as a reader should take it, shortened: "conn. = threads"."""
    kind = report.bound_kind(r) or "lowest ceiling"
    return " or ".join(" = ".join(SHORT.get(w, w) for w in part.split(" = "))
                       for part in kind.split(" or "))


def whisker(ax, x, low, high, zorder=4):
    """A 95% interval, drawn whatever the bar's height (a median of rounds need not sit in the
    interval of a ratio or an efficiency taken within each round)."""
    ax.errorbar([x], [(low + high) / 2], yerr=[(high - low) / 2], fmt="none", ecolor="black",
                elinewidth=1, capsize=3, zorder=zorder)


def efficiency_whisker(ax, x, r, zorder=4):
    """The 95% interval of a row's efficiency times the median of its lowest ceiling, at x (when
    it has one): never across a ceiling it was not measured to cross. Returns the higher of its
    top and the row's median rps, where a label above the point goes."""
    e, c = r["interval"], r["lowest"]
    if e is None or not e.has_interval or not c:
        return r["rps"]
    whisker(ax, x, e.low * c, e.high * c, zorder)
    return max(r["rps"], e.high * c)


# -- sweep ----------------------------------------------------------------------------------------

SWEEP_NOTE = (
    "Each point: the median rps of the rounds; whiskers: the 95% interval of its efficiency, "
    "drawn against the median of its ceiling, so a whisker never crosses a ceiling it was not "
    "measured to cross. busy: how much of its core the server used while measured. The CPU "
    "ceiling at each point is {cpu}. The blocking model has a scale of its own: on the others' "
    "it would lie on the axis. docs/ceilings.md works it through.")


def connection_lines(ax, delays, x_end, y_max):
    """connections / delay, from the origin, labelled above-left of where it leaves 80% of the
    panel's height (left of a rising line, clear of the points under it)."""
    for d in delays:
        s = d / 1000
        ax.plot([0, x_end], [0, x_end / s], "k--", linewidth=1, zorder=2)
        x = min(x_end, 0.8 * y_max * s)
        ax.annotate(f"connections / delay\n(N connections / {s:g} s)", (x, x / s), xytext=(-6, 2),
                    textcoords="offset points", ha="right", va="bottom", fontsize=7)


def cpu_line(ax, rs, color):
    """The CPU ceiling at each point (report.cpu_ceiling_words), labelled top left, an arrow."""
    pts = [(r["connections_requested"], r["ceilings"]["CPU"]) for r in rs
           if r["ceilings"]["CPU"]]
    if not pts:
        return
    ax.plot([p[0] for p in pts], [p[1] for p in pts], ":", color=color, linewidth=1.6, zorder=2)
    ax.annotate("CPU ceiling: the most it answered\naround the row", pts[0],
                xytext=(0.03, 0.97), textcoords="axes fraction", fontsize=7, color=color,
                va="top", arrowprops=dict(arrowstyle="->", color=color, linewidth=0.8))


def thread_lines(ax, workers, delays, x_at, y_text):
    """The blocking model's threads / delay, with an arrow from a label well above it (the points
    lie on it)."""
    for d in delays:
        t = workers / (d / 1000)
        ax.axhline(t, color="0.35", linestyle="-.", linewidth=1.2, zorder=2)
        ax.annotate(f"threads / delay = {workers} / {d / 1000:g} s = {t:,.0f} rps:\nflat, "
                    "whatever the connections offered", xy=(x_at, t), xytext=(x_at, y_text),
                    ha="center", va="bottom", fontsize=7, color="0.25",
                    arrowprops=dict(arrowstyle="->", color="0.35", linewidth=0.8))


def measured_points(ax, rs, color):
    """The medians joined, each with its efficiency's 95% interval times the median of its
    lowest ceiling as whiskers; the top of each point's whiskers (where its label goes)."""
    xs = [r["connections_requested"] for r in rs]
    ax.plot(xs, [r["rps"] for r in rs], "o-", color=color, linewidth=2, markersize=5,
            markeredgecolor="black", markeredgewidth=0.6, zorder=4)
    return xs, [efficiency_whisker(ax, x, r, zorder=3) for x, r in zip(xs, rs)]


def point_labels(ax, rs, xs, tops, color):
    """Above-left of each point, clear of its whiskers and of a rising line through it: how busy
    the server was, and at the last point its rps."""
    for i, (x, top, r) in enumerate(zip(xs, tops, rs)):
        lines = [f'busy {r["busy"]:.0%}'] if r["busy"] is not None else []
        if i == len(rs) - 1:
            lines.insert(0, f'{r["rps"]:,.0f} rps')
        if lines:
            ax.annotate("\n".join(lines), (x, top), xytext=(-3, 7), textcoords="offset points",
                        ha="right", va="bottom", fontsize=7.5, color=color, zorder=6,
                        fontweight="bold" if i == len(rs) - 1 else "normal",
                        bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.85))


def sweep_panel(ax, name, rs, others, color, frame):
    """One server's panel: the others faint, its ceilings, its points and their labels. The
    blocking model's on a scale of its own (its threads / delay would lie on the others' axis),
    without the async ceilings that never bind it."""
    own = name == "blocking" and frame["workers"]
    y_max = 1.6 * frame["workers"] / (min(frame["delays"]) / 1000) if own else frame["y_max"]
    if not own:
        for other in others:
            ax.plot([r["connections_requested"] for r in other], [r["rps"] for r in other], "-",
                    color="0.85", linewidth=1, zorder=1)
        connection_lines(ax, frame["delays"], frame["x_end"], y_max)
        cpu_line(ax, rs, color)
    else:
        thread_lines(ax, frame["workers"], frame["delays"], frame["x_end"] * 0.45, 0.78 * y_max)
        ax.text(0.03, 0.04, "its own scale: the others' panels go to "
                f"{compact(frame['y_max'])} rps;\nconnections / delay and its CPU ceiling "
                "(above 10k) lie far above", transform=ax.transAxes, fontsize=7, color="0.3",
                va="bottom")
    xs, tops = measured_points(ax, rs, color)
    point_labels(ax, rs, xs, tops, color)
    ax.set_title(name + (" (its own scale)" if own else ""), fontsize=10, color=color,
                 fontweight="bold")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(-0.1 * frame["x_end"], 1.04 * frame["x_end"])
    ax.set_ylim(-0.03 * y_max, y_max)
    ax.set_xticks(frame["xs_all"])
    ax.set_xticklabels([f"{x / 1000:g}k" if x >= 1000 else str(x) for x in frame["xs_all"]],
                       fontsize=8)
    rps_axis(ax)


def sweep(doc, out, plt):
    """One panel per server, on the same linear axes (but the blocking model's): lines that would
    lie on top of each other in one panel (five async models all following connections / delay)
    are told apart, and each panel's reference lines are labelled where they are drawn."""
    rows = [r for r in measured(doc) if not r["cpu_ceiling_row"]]
    if not rows:
        return
    by_server = {}
    for r in rows:
        by_server.setdefault(r["label"], []).append(r)
    for rs in by_server.values():
        rs.sort(key=lambda r: r["connections_requested"])
    order = sorted(by_server, key=lambda n: (n != "blocking", n in servers.PEERS, n))
    xs_all = sorted({r["connections_requested"] for r in rows if r["connections_requested"] > 0})
    delays = sorted({r["mean_delay_ms"] for r in rows if r["mean_delay_ms"] > 0})
    x_end = max(xs_all) * 1.03
    y_max = 1.06 * max(max(r["rps"] for r in rows),
                       max((r["ceilings"]["CPU"] or 0) for r in rows),
                       x_end / (min(delays) / 1000) if delays else 0)
    frame = {"delays": delays, "x_end": x_end, "y_max": y_max, "xs_all": xs_all,
             "workers": doc["meta"].get("blocking_workers")}
    cols = 3 if len(order) > 4 else 2
    nrows = (len(order) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.9 * nrows + 1.1), squeeze=False,
                             sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, name in enumerate(order):
        ax = axes[i // cols][i % cols]
        others = [by_server[o] for o in order if o not in (name, "blocking")]
        sweep_panel(ax, name, by_server[name], others, colors[i % len(colors)], frame)
        if i % cols == 0 or name == "blocking" or order[i - 1] == "blocking":
            ax.set_ylabel("responses / s (checked)")
        if i // cols == nrows - 1:
            ax.set_xlabel("connections offered")
    for j in range(len(order), nrows * cols):
        axes[j // cols][j % cols].set_visible(False)
    d = ", ".join(f"{x:g} ms" for x in delays)
    rounds = doc["meta"].get("rounds", 1)
    width = fig.get_size_inches()[0]
    fig.suptitle(charts.wrapped(f'{doc["meta"]["profile"]}: /delay ({d}) rps against '
                                f"connections, one panel per server, median of {rounds} round(s); "
                                "grey: the other async servers", width), fontsize=10)
    cpu = report.cpu_ceiling_words(doc["meta"].get("profile_settings", {})).replace("`", "")
    note = charts.wrapped(SWEEP_NOTE.format(cpu=cpu), width, 8.5)
    fig.text(0.01, 0.01, note, fontsize=8.5, va="bottom", ha="left")
    foot = (note.count("\n") + 1.6) * 8.5 * 1.25 / 72 / fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, foot, 1, 1))
    charts.save(fig, os.path.join(out, "rps-vs-connections.png"))


HEADLINE_BEGIN = "<!-- headline: written by harness/plot from results/delay-sweep/results.json -->"
HEADLINE_END = "<!-- /headline -->"


def headline(doc, out):
    """The README's headline (cmharness.report.headline: the sweep chart and, per server at its
    largest point, what a waiting request holds, the rps against the ceiling that binds).
    Written to headline.md in `out`, and into the README between its markers when `out` is the
    repository's results/delay-sweep itself (no other folder, whatever its name: a chart drawn
    into a scratch folder leaves the README alone)."""
    body = report.headline(doc, "results/delay-sweep/rps-vs-connections.png")
    if not body:
        return
    text = "\n".join([HEADLINE_BEGIN, "", body, "", HEADLINE_END]) + "\n"
    with open(os.path.join(out, "headline.md"), "w") as f:
        f.write(text)
    readme = os.path.join(ROOT, "README.md")
    if os.path.realpath(out) == os.path.realpath(os.path.join(ROOT, "results", "delay-sweep")) \
            and os.path.exists(readme):
        with open(readme) as f:
            old = f.read()
        b, e = old.find(HEADLINE_BEGIN), old.find(HEADLINE_END)
        if b >= 0 and e > b:
            with open(readme, "w") as f:
                f.write(old[:b] + text.rstrip("\n") + old[e + len(HEADLINE_END):])


# -- bars -----------------------------------------------------------------------------------------

def ratio_claims(doc):
    """{(label, row key): (Estimate, reference)} of the result's ratio claims (x / nginx)."""
    out = {}
    for c in doc.get("claims", []):
        if c.get("kind") == "ratio" and c.get("reference"):
            out[(c["label"], c["row"])] = (stats.Estimate.from_json(c["estimate"]), c["reference"])
    return out


def reference_of(rs, ratios):
    """The peer a panel of CPU-ceiling rows is a ratio to (nginx), or None for any other panel."""
    if not all(r["cpu_ceiling_row"] for r in rs):
        return None
    refs = {ratios[(r["label"], r["key"])][1] for r in rs if (r["label"], r["key"]) in ratios}
    names = {r["label"] for r in rs}
    return next((ref for ref in sorted(refs) if ref in names), None)


def overlapping_sets(items):
    """The largest sets of (name, low, high) whose intervals all share a point, two or more: within
    one no order is measured; two names in no common set are in a measured order."""
    found = []
    for _, low, _ in items:
        here = [n for n, lo, hi in items if lo <= low <= hi]
        if len(here) > 1 and not any(set(here) <= set(f) for f in found):
            found = [f for f in found if not set(f) < set(here)] + [here]
    return found


def above(ax, x, y, text):
    """A label just above (x, y), clear of a whisker's cap there, the lines behind it faint."""
    ax.annotate(text, (x, y), xytext=(0, 6), textcoords="offset points", ha="center",
                va="bottom", fontsize=7, zorder=6,
                bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.8))


def ratio_panel(ax, rs, xs, colors, ratios, ref):
    """CPU-ceiling rows beside a reference peer, drawn as their claims: each server's rps as a
    ratio to the peer's in the same round, its 95% interval, and which intervals overlap."""
    ests = [stats.Estimate(1.0, 1.0, 1.0, 0) if r["label"] == ref
            else ratios.get((r["label"], r["key"]), (None,))[0] for r in rs]
    ax.bar(xs, [e.estimate if e else 0 for e in ests], color=colors, width=0.6, zorder=2)
    ax.axhline(1.0, color="0.4", linewidth=0.8, zorder=1)
    tops = []
    for x, r, e in zip(xs, rs, ests):
        if e is None:
            above(ax, x, 0, "no ratio\nmeasured")
            continue
        if r["label"] != ref and e.has_interval:
            whisker(ax, x, e.low, e.high)
        top = e.high if e.has_interval else e.estimate
        tops.append(top)
        above(ax, x, top, "= 1" if r["label"] == ref else f"{e.estimate:.2f}\u00d7" +
              ("" if e.has_interval else f"\n(n={e.n}: no\ninterval)"))
    # an estimate without an interval can be told apart from nothing (stats.Estimate.overlaps)
    items = [(r["label"], e.low, e.high) if e.has_interval else (r["label"], -math.inf, math.inf)
             for r, e in zip(rs, ests) if e is not None]
    sets = overlapping_sets(items)
    if sets:
        note = ["95% intervals overlap, no ranking measured among:"] + \
            ["  " + ", ".join(s) for s in sets]
    else:
        note = ["no two 95% intervals overlap: the order is measured"]
    ax.text(0.02, 0.98, "\n".join(note), transform=ax.transAxes, ha="left", va="top",
            fontsize=7, bbox=dict(boxstyle="round", fc="white", ec="0.75"))
    ax.set_ylim(0, max(tops or [1]) * 1.12 / (1 - 0.045 * (len(note) + 1)))
    ax.set_ylabel(f"rps / {ref}'s rps in the same round")


def ceiling_marks(ax, r, x, reach, top):
    """Every ceiling of a row up to `reach` as a mark across its bar (black and thick: the one that
    binds); those above it written at the panel's top."""
    off = []
    for kind, c in r["ceilings"].items():
        if c is None:
            continue
        if c > reach:
            off.append(f"{SHORT[kind]} {compact(c)}")
            continue
        binds = r["lowest"] is not None and abs(c - r["lowest"]) <= 1e-9 * c
        ax.plot([x - 0.34, x + 0.34], [c, c], linestyle=CEILING_STYLE[kind], zorder=3,
                color="black" if binds else "0.55", linewidth=2.2 if binds else 1.2)
    if off:
        ax.annotate("\u2191 " + "\n".join(off), (x, top), xytext=(0, -3),
                    textcoords="offset points", ha="center", va="top", fontsize=6.5, color="0.35")


def named_ceilings(r, scale):
    """The in-scale ceilings a row's bound names ("connections or cpu": both, the rounds
    differed), or its lowest."""
    words = {"connections": "connections", "threads": "threads", "cpu": "CPU",
             "database": "database"}
    named = [r["ceilings"][k] for w, k in words.items()
             if w in r["bound"] and r["ceilings"].get(k) is not None and r["ceilings"][k] <= scale]
    return named or ([r["lowest"]] if r["lowest"] and r["lowest"] <= scale else [])


WIDEST = 14  # characters of a label's line that fit over a bar: a longer "a = b" is cut after "="


def bar_text(r):
    if r["cpu_ceiling_row"]:
        text = "= CPU\nceiling"
    else:
        eff = r["interval"].estimate if r["interval"] else r["efficiency"]
        kind = "\n".join(line if len(line) <= WIDEST else line.replace(" = ", " =\n")
                         for line in binding(r).replace(" or ", "\nor ").split("\n"))
        text = f"{compact(r['rps'])} rps:\n{eff:.0%} of\n{kind}" if eff is not None else \
            f"{compact(r['rps'])} rps"
    if r["starved"]:
        text += f'\n{r["starved"]:,.0f} starved'
    return text


#: A bar panel reaches at most this many times its tallest bar (or whisker): a ceiling higher
#: than that is written at the top, not drawn, so that a row at 10% of its ceiling is still a bar
#: a reader sees (results/db's /db/row/42, bound by the database's CPU, not the server's).
REACH = 3.0


def rps_panel(ax, rs, xs, colors):
    """Median rps as bars, the 95% interval of each efficiency (times its ceiling) as whiskers,
    every ceiling within the panel's reach as a mark, the efficiency and the ceiling that binds
    above the bar and above that ceiling's mark."""
    ax.bar(xs, [r["rps"] for r in rs], color=colors, width=0.6, zorder=2)
    tops = [efficiency_whisker(ax, x, r) for x, r in zip(xs, rs)]
    labelled = [max([r["lowest"] or 0] + named_ceilings(r, math.inf))
                for r in rs if not r["cpu_ceiling_row"]]  # where each label will stand
    reach = min(max(tops + labelled), REACH * max(tops))
    lines = max(bar_text(r).count("\n") + 1 for r in rs)  # a label of four lines needs room
    scale = (1.4 + 0.12 * max(0, lines - 3)) * reach
    for x, r, top in zip(xs, rs, tops):
        if not r["cpu_ceiling_row"]:
            ceiling_marks(ax, r, x, reach, scale)
            top = max([top] + named_ceilings(r, reach))  # on the marks it names, not across
        above(ax, x, top, bar_text(r))
    ax.set_ylim(0, scale)
    ax.set_ylabel("responses per second")
    rps_axis(ax)


GAP = 0.8  # slots between two servers' groups of bars


def slots(rs):
    """{server: its variants in this panel}, in the rows' order: a server has a slot only for a
    variant it was measured with (a peer has one)."""
    servers = dict.fromkeys(r["server"] for r in rs)
    return {s: list(dict.fromkeys(r["variant"] for r in rs if r["server"] == s)) for s in servers}


def span(rs):
    """How many bar widths a grouped panel of `rs` takes, its gaps included."""
    own = slots(rs)
    return sum(len(v) for v in own.values()) + GAP * (len(own) - 1)


def positions(ax, rs, grouped):
    """Where each bar goes. Grouped (several variants of each server): the variants side by side
    under their server's name; else one bar per server, its name below."""
    if not grouped:
        xs = list(range(len(rs)))
        ax.set_xticks(xs)
        ax.set_xticklabels([r["label"] for r in rs], rotation=30, ha="right", fontsize=8)
        return xs
    own = slots(rs)
    start, x = {}, 0.0
    for server, variants in own.items():
        start[server] = x
        x += len(variants) + GAP
    xs = [start[r["server"]] + own[r["server"]].index(r["variant"]) for r in rs]
    ax.set_xticks(xs)
    # a long variant's name ("offload pool, pool 16") on lines of its own, within its bar's slot
    names = [textwrap.fill(r["variant"], 10) if r["variant"] != "-" else "" for r in rs]
    ax.set_xticklabels(names, fontsize=8 if all(len(r["variant"]) <= 10 for r in rs) else 7)
    lines = max([n.count("\n") + 1 for n in names] + [1])
    for server, variants in own.items():
        ax.text(start[server] + (len(variants) - 1) / 2, -0.09 - 0.04 * lines, server,
                transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=9,
                fontweight="bold")
    return xs


def legend(fig, variants, rps_panels, database=False):
    """The colours of the bars and, when a panel draws ceilings, what each mark is."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = {"-": "reference peer", "standard": "model"}
    handles = [Patch(color=PALETTE[i % len(PALETTE)], label=names.get(v, v))
               for i, v in enumerate(variants)]
    handles.append(Line2D([], [], color="black", marker="_", markersize=8, linestyle="-",
                          linewidth=1, label="whiskers: 95% interval of the claim"))
    if rps_panels:
        handles += [Line2D([], [], color="0.55", linestyle=CEILING_STYLE[k], linewidth=1.2,
                           label=CEILING_NAME[k]) for k in CEILING_STYLE
                    if database or k != "database"]
        handles.append(Line2D([], [], color="black", linewidth=2.2,
                              label="black, thick: the ceiling that binds"))
    ncol = (len(handles) + 1) // 2
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    return 0.55  # inches its two rows take


def bars(doc, out, plt, group_key, filename, title):
    rows = list(measured(doc))
    groups = list(dict.fromkeys(group_key(r) for r in rows))
    if not groups:
        return
    ratios = ratio_claims(doc)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    grouped = len([v for v in variants if v != "-"]) > 1
    if grouped:
        widest = max(span([r for r in rows if group_key(r) == g]) for g in groups)
        fig, axes = plt.subplots(len(groups), 1, squeeze=False,
                                 figsize=(max(13, 0.9 * widest), 3.6 * len(groups) + 1.2))
        axes = list(axes[:, 0])
    else:
        most = max(sum(1 for r in rows if group_key(r) == g) for g in groups)
        fig, axes = plt.subplots(1, len(groups), figsize=(max(5, 0.75 * most) * len(groups), 6.2),
                                 squeeze=False)
        axes = list(axes[0])
    rps_panels = 0
    width = fig.get_size_inches()[0]
    for ax, g in zip(axes, groups):
        rs = [r for r in rows if group_key(r) == g]
        xs = positions(ax, rs, grouped)
        colors = [PALETTE[variants.index(r["variant"]) % len(PALETTE)] for r in rs]
        ref = reference_of(rs, ratios)
        if ref:
            ratio_panel(ax, rs, xs, colors, ratios, ref)
            g += f": each server's CPU ceiling, as a ratio to {ref}'s in the same round"
        else:
            rps_panel(ax, rs, xs, colors)
            rps_panels += 1
        ax.set_title(charts.wrapped(g, width, 9 * len(axes) if not grouped else 9), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    bottom = legend(fig, variants, rps_panels, any("database" in r["ceilings"] for r in rows))
    title = charts.wrapped(title, width)
    fig.suptitle(title, fontsize=10)
    height = fig.get_size_inches()[1]
    top = 1 - (0.35 + 0.18 * title.count("\n")) / height  # the title's lines, in inches
    fig.tight_layout(rect=(0, bottom / height, 1, top))
    charts.save(fig, os.path.join(out, filename))


def bar_group(r):
    """The title of a bar panel: "/delay/{ms} 100 ms, 2,000 conns"."""
    d = f' {r["delay"]} ms' if r["delay"] else ""
    return f'{r["path"]}{d}, {r["connections_requested"]:,} conns'


def offload_group(r):
    return f'{r["path"]}' + (f' ({r["delay"]} ms)' if r["delay"] else "")


def draw(doc, out, plt):
    """Every chart of a cm-price result into the folder `out`, by its profile's "chart" kind (the
    head of this module), with `plt` (results.pyplot()); a sweep's headline.md beside them."""
    os.makedirs(out, exist_ok=True)
    kind = doc["meta"].get("chart", "bars")
    rounds = doc["meta"].get("rounds", 1)
    if kind == "sweep":
        sweep(doc, out, plt)
        headline(doc, out)
    elif kind == "offload":
        bars(doc, out, plt, offload_group, "offload.png", "offload: each async model's rps with "
             "the work inline on the loop, on the bounded pool or on a thread per call (median of "
             f"{rounds} round(s)), against its ceilings")
    else:
        bars(doc, out, plt, bar_group, "rps-vs-ceiling.png",
             f'{doc["meta"]["profile"]}: each row\'s median rps over {rounds} round(s), priced '
             "against every ceiling that applies; whiskers: the 95% interval of each claim")
