"""plot-staircase -- draws harness/staircase's runs on one page: each request a point.

    /usr/bin/python3 harness/plot-staircase results/staircase/runs.json [--out DIR]

Run it with Debian's /usr/bin/python3, which has python3-matplotlib (the python3 first on PATH may
be another interpreter without it). harness/staircase calls it after its runs. Writes
staircase.png next to runs.json (or into --out), through cmharness.charts.save, which refuses a
chart whose texts overlap, run outside the figure or cover a data marker.

One panel per run (small multiples), all on the same axes: x is the time since the first request
was sent, y the number of requests answered by then. Each request is one point, at its answer time
and its rank among the answers, so the points draw the "answered so far" curve: a staircase for a
thread pool, one step for an async model, a slope for an async model that sleeps on its loop. The
grey line in each panel is what the model's idea predicts if a step took exactly the delay and no
more (cmharness.timeline.answers_per_step): ceil(N / workers) steps for the blocking pool, one step
for an async model, one answer per delay for the sleeping loop. The dashed line in each async panel
is the control run (the same burst on /delay/0), moved right by one delay: what the burst itself
costs the machine, so a spread the async models share with it is the machine's, not the model's.
Every point comes from the run's CSV (harness/burst --timeline, read by cmharness.timeline).
"""
import argparse
import json
import math
import os
import sys

from cmharness import charts, results, servers, timeline

WORKERS = servers.BLOCKING_WORKERS


def answers(path):
    return timeline.answer_times(timeline.read(path))


def predicted(run, n, delay_s, until_s):
    """The curve the model's idea predicts: (xs, ys) of a step line."""
    per_step = timeline.answers_per_step(run["model"], run["flags"], n)
    xs, ys, done, t = [0.0], [0], 0, 0.0
    while done < n and t + delay_s <= until_s:
        t += delay_s
        xs += [t, t]
        ys += [done, min(n, done + per_step)]
        done = min(n, done + per_step)
    xs.append(until_s)
    ys.append(done)
    return xs, ys


def title_of(run):
    if run["model"] == "blocking" and not run["flags"]:
        return f"blocking ({WORKERS} worker threads)"
    if "sleep" in run["flags"]:
        return f"{run['model']} --wait-mode sleep (1 loop)"
    return f"{run['model']} (1 event loop)"


def color_of(run):
    if "sleep" in run["flags"]:
        return "C3"
    return "C0" if run["model"] == "blocking" else "C2"


def zoomed_inset(ax, px, py, ts, color, x_max):
    """So few answers that they hug the x axis at this scale: the same points, zoomed in y."""
    inset = ax.inset_axes([0.07, 0.42, 0.45, 0.45])
    inset.plot(px, py, color="0.6", lw=1.0)
    inset.scatter(ts, range(1, len(ts) + 1), s=6, color=color)
    inset.set_xlim(0, x_max)
    inset.set_ylim(0, len(ts) * 1.6)
    inset.tick_params(labelsize=7)
    inset.set_title(f"the same, y zoomed to 0-{len(ts) * 1.6:.0f}", fontsize=7.5)
    inset.grid(True, color="0.93")


def panel_text(run, ts, n, delay_s, x_max):
    if len(ts) < n:
        return (f"{len(ts):,} of {n:,} answered\nbefore the run was cut\nat {run.get('cut_at_s') or x_max:g} s; "
                f"at one per\n{delay_s * 1000:g} ms, all {n:,} would\ntake {n * delay_s:,.0f} s")
    return f"all {n:,} answered;\nthe last at {ts[-1]:.2f} s\n{run['steps']} step(s) seen"


def draw_panel(ax, run, ts, control_ts, n, delay_s, x_max):
    """One run: the predicted line, the control moved by one delay (async panels), the answers."""
    px, py = predicted(run, n, delay_s, x_max)
    ax.plot(px, py, color="0.6", lw=1.2, zorder=1)
    color = color_of(run)
    if control_ts and not run["flags"] and run["model"] != "blocking":
        ax.plot([t + delay_s for t in control_ts], range(1, len(control_ts) + 1), color="k", lw=0.9,
                ls=(0, (3, 2)), zorder=3)
    ax.scatter(ts, range(1, len(ts) + 1), s=4, color=color, zorder=2)
    if ts and len(ts) < n / 10:
        zoomed_inset(ax, px, py, ts, color, x_max)
    ax.axhline(n, color="0.85", lw=0.8, zorder=0)
    ax.set_title(title_of(run), fontsize=10, loc="left")
    ax.grid(True, color="0.93")
    ax.text(0.98, 0.06 if len(ts) >= n else 0.3, panel_text(run, ts, n, delay_s, x_max),
            transform=ax.transAxes, ha="right", va="bottom", fontsize=8.5,
            bbox=dict(boxstyle="round", fc="white", ec="0.8"))


def legend(fig, control, plt):
    handles = [
        plt.Line2D([], [], color="0.6", lw=1.2, label="predicted: every step takes exactly the delay"),
        plt.Line2D([], [], ls="", marker="o", ms=4, color="C0", label="one request, at its answer: blocking"),
        plt.Line2D([], [], ls="", marker="o", ms=4, color="C2", label="... an async model"),
        plt.Line2D([], [], ls="", marker="o", ms=4, color="C3", label="... an async model sleeping on its loop"),
    ]
    if control:
        handles.append(plt.Line2D([], [], color="k", lw=0.9, ls=(0, (3, 2)),
                                  label=f"the same burst on /delay/0 ({control['model']}), moved right by "
                                        "one delay: the burst's own cost here"))
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8.5, frameon=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description="draws harness/staircase's runs on one page "
                                             "(see the head of this file)")
    ap.add_argument("runs_json", help="results/staircase/runs.json")
    ap.add_argument("--out", help="the folder to write staircase.png into (default: beside "
                                  "runs.json, whose CSVs it reads)")
    a = ap.parse_args(argv)
    plt = results.pyplot("plot-staircase")
    if plt is None:
        return 1
    with open(a.runs_json) as f:
        doc = json.load(f)
    folder = os.path.dirname(os.path.abspath(a.runs_json))
    runs = [r for r in doc["runs"] if r.get("csv") and not r.get("control")]
    if not runs:
        sys.exit("plot-staircase: no run has a timeline")
    n, delay_s = doc["connections"], doc["delay_ms"] / 1000
    data = {r["name"]: answers(os.path.join(folder, r["csv"])) for r in runs}
    control = next((r for r in doc["runs"] if r.get("control") and r.get("csv")), None)
    control_ts = answers(os.path.join(folder, control["csv"])) if control else []
    x_max = max(max(ts, default=0) for ts in data.values())
    x_max = math.ceil((x_max + 0.5) / 2) * 2  # a round margin past the last answer

    cols = 2 if len(runs) > 1 else 1
    rows = math.ceil(len(runs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.0 * rows + 1.2), sharex=True, sharey=True,
                             squeeze=False)
    for ax in axes.flat[len(runs):]:
        ax.set_visible(False)
    for ax, run in zip(axes.flat, runs):
        draw_panel(ax, run, data[run["name"]], control_ts, n, delay_s, x_max)
    for ax in axes[-1]:
        ax.set_xlabel("seconds since the first request was sent")
    for ax in axes[:, 0]:
        ax.set_ylabel("requests answered so far")
    axes.flat[0].set_xlim(0, x_max)
    axes.flat[0].set_ylim(0, n * 1.05)
    legend(fig, control if control_ts else None, plt)
    fig.suptitle(f"{n:,} connections each send GET {doc['path']} at once: when does each get its answer?",
                 fontsize=11.5)
    fig.tight_layout(rect=(0, 0.075, 1, 0.97))
    out = os.path.join(a.out or folder, "staircase.png")
    charts.save(fig, out)
    print(f"plot-staircase: wrote {out}")
