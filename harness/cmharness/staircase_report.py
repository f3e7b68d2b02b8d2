"""The README of harness/staircase's runs (results/staircase/README.md), from its runs.json: the
table of every run against the steps its model predicts, what the chart shows read against the
control run, the conditions, and each run's commands and what harness/burst printed."""

import math
import os

from . import proc, provenance, servers, timeline

WORKERS = servers.BLOCKING_WORKERS


def predicted_steps(run, n, workers=WORKERS):
    """The steps a run's model predicts for n waiting requests, every step one delay."""
    if run.get("control"):
        return 1
    return math.ceil(n / timeline.answers_per_step(run["model"], run["flags"], n, workers))


def blocking_steps(seen, predicted):
    """What the blocking model's step count says, against the rounds its pool predicts."""
    if seen == predicted:
        return f"The rule above sees the {predicted} steps, one per round of the pool."
    if seen < predicted:
        return (f"The rule above sees {seen} steps, not {predicted}: rounds run into each other when the "
                "workers drift out of step (a worker takes its next connection only once the client has "
                "closed the last one, and a client slowed by a busy CPU closes late).")
    return (f"The rule above sees {seen} steps, not {predicted}: a stall of the machine in the middle of "
            "a round splits it in two.")


def readme_intro(doc, chart_ok):
    n, delay_ms = doc["connections"], doc["delay_ms"]
    delay_s = delay_ms / 1000
    lines = [
        f"# The staircase: {n:,} waiting requests, every model",
        "",
        f"{n:,} connections each send `GET {doc['path']}` at the same moment (`harness/burst`), and "
        "each answer's time is recorded. A model that holds a thread per waiting request answers "
        f"as many at a time as it has threads: the blocking model's {WORKERS} workers need "
        f"⌈{n:,} / {WORKERS}⌉ = {math.ceil(n / WORKERS)} rounds of {delay_ms} ms, "
        f"{math.ceil(n / WORKERS) * delay_s:g} s at best, a staircase. A model that "
        "suspends a waiting request answers them all after one delay, one step. An async model that "
        "sleeps on its loop (`--wait-mode sleep`, the anti-pattern) answers one per delay: "
        f"{n:,} × {delay_ms} ms = {n * delay_s:,.0f} s, so that run is cut short. A last run, the "
        "*control*, sends the same burst for `/delay/0`: no wait at all, so its time is what sending "
        f"{n:,} requests and reading {n:,} answers costs this machine at that moment.",
        "",
    ]
    if chart_ok:
        lines += ["![each request's answer time, every model](staircase.png)", ""]
    return lines


def table_row(r, n):
    name = f"{r['name']} (control)" if r.get("control") else r["name"]
    if "answered" not in r:
        return f"| {name} | `{r['server_command']}` | `{r['path']}` | failed: {r.get('error', '?')} | | | | | |"
    last = f"{r['last_s']:.3f} s" if r["last_s"] is not None else "-"
    if r.get("cut_at_s"):
        last += f" (cut at {r['cut_at_s']:g} s)"
    first = f"{r['first_s']:.3f} s" if r["first_s"] is not None else "-"
    return (f"| {name} | `{r['server_command']}` | `{r['path']}` | {r['answered']:,} of "
            f"{r['requests']:,} ({r['correct']:,}) | {first} | {last} | {r['steps']} "
            f"({predicted_steps(r, n):,}) | {r['largest_step']:,} | [{r['csv']}]({r['csv']}) |")


def readme_table(doc):
    lines = [
        "| run | server | path | answered (correct) | first answer | last answer | steps seen (predicted) | largest step | data |",
        "| --- | --- | --- | --: | --: | --: | --: | --: | --- |",
    ]
    lines += [table_row(r, doc["connections"]) for r in doc["runs"]]
    return lines + [
        "",
        "How to read it: times are seconds after the first request was sent. A *step* is a group of "
        f"answers with no silence longer than half the delay ({doc['delay_ms'] / 2:g} ms) inside it; "
        "*largest step* is how many answers the biggest one held; *predicted* is the count the model's "
        "idea gives when every step takes exactly the delay. *Answered (correct)*: answers received, "
        "and of those the ones with status 200, their own delay as the body, and not before that "
        "delay. A run cut at its time limit lists what was answered by then.",
        "",
    ]


def run_finding(r, n, delay_s):
    """The line a sleeping or blocking run gets under "What the chart shows"; None for the others."""
    if "sleep" in r["flags"]:
        pace = (r["last_s"] - r["first_s"]) / max(1, r["answered"] - 1)
        return (f"- **{r['name']}**: {r['answered']:,} answers in {r['last_s']:.1f} s, one every "
                f"{pace * 1000:.0f} ms on average: the loop sleeps in one request at a time. At that "
                f"pace the {n:,} would take {pace * n:,.0f} s.")
    if r["model"] == "blocking":
        rounds = math.ceil(n / WORKERS)
        return (f"- **{r['name']}**: the last answer at {r['last_s']:.2f} s, against "
                f"{rounds * delay_s:g} s predicted: {n:,} answers at "
                f"{n / r['last_s']:.0f} a second, against {WORKERS} / {delay_s:g} s = "
                f"{WORKERS / delay_s:.0f}. " + blocking_steps(r["steps"], rounds))
    return None


def async_finding(asyncs, control, n, delay_s):
    """The line on the async models, read against the control run when there is one."""
    lo, hi = min(r["last_s"] for r in asyncs), max(r["last_s"] for r in asyncs)
    text = f"- **the async models**: every answer after one delay, the last between {lo:.2f} and {hi:.2f} s."
    if not control:
        return text
    text += (f" The control (`/delay/0`, {control['name']}) took {control['last_s']:.2f} s with no "
             f"wait at all: one delay plus that is {delay_s + control['last_s']:.2f} s")
    if hi <= (delay_s + control["last_s"]) * 1.1:
        text += (", so what the async panels show past the delay is the cost of the burst itself -- "
                 f"a Python client writing and reading {n:,} requests, one loop answering them -- on "
                 "this machine at that moment, not waiting.")
    else:
        text += (f", less than the slowest async run's {hi:.2f} s: the burst's own cost does not "
                 "account for all of it here; rerun on a quieter machine before reading a model into "
                 "the difference.")
    return text + (" The dashed line in each async panel is the control's own answers, moved right by one "
                   "delay: where an async model's points follow it, the spread is the machine's.")


def readme_findings(doc):
    n, delay_s = doc["connections"], doc["delay_ms"] / 1000
    runs = [r for r in doc["runs"] if "answered" in r and r["last_s"] is not None]
    control = next((r for r in runs if r.get("control")), None)
    lines = ["## What the chart shows, and what is the machine", ""]
    for r in runs:
        finding = None if r.get("control") else run_finding(r, n, delay_s)
        if finding:
            lines.append(finding)
    asyncs = [r for r in runs if not r.get("control") and not r["flags"] and r["model"] != "blocking"]
    if asyncs:
        lines.append(async_finding(asyncs, control, n, delay_s))
    return lines + [""]


def readme_conditions(doc):
    """The core's conditions (a runs.json written before the end time was kept says so), then
    how each server ran, and the note."""
    if doc["server_cpu"] is None:
        pinning = "nothing pinned (one CPU)"
    else:
        pinning = proc.pinning_line([doc["server_cpu"]], [doc["load_cpu"]], "cm-server",
                                    "harness/burst")
    lines = provenance.conditions_markdown(
        doc["provenance"], ended_utc=doc.get("ended_utc") or "(not recorded)",
        load_after=doc["load_average_after"], pinning=pinning, command=doc["command"])
    lines.append("- Each server started fresh on a free port (`--port 0`), async models with their "
                 "default loop count (the CPUs they may run on: 1 here, as pinned), the blocking "
                 f"model with its default {WORKERS} workers; release build (`make build`); the git "
                 "tree hash of each model's folder as measured is in [runs.json](runs.json).")
    if doc["note"]:
        lines.append(f"- {doc['note']}")
    return lines + [""]


def readme_commands(doc):
    server_pin = f"taskset -c {doc['server_cpu']} " if doc["server_cpu"] is not None else ""
    load_pin = f"taskset -c {doc['load_cpu']} " if doc["load_cpu"] is not None else ""
    lines = [
        "Regenerate (from the repository root, after `make build`; the chart needs Debian's "
        "`/usr/bin/python3` with python3-matplotlib):",
        "",
        f"    {doc['command']}",
        "",
        "Each run, as `harness/staircase` ran it (`PORT` is the free port the server picked):",
        "",
    ]
    for r in doc["runs"]:
        if "burst_command" in r:
            lines.append(f"    {server_pin}{r['server_command']} --port 0 &    # {r['name']}")
            lines.append(f"    {load_pin}{r['burst_command']}")
    lines += ["", "What `harness/burst` printed:", ""]
    for r in doc["runs"]:
        for line in r.get("burst_output", r.get("error", "")).splitlines():
            if "timeline of" not in line:
                lines.append(f"    {r['name']}: {line}")
    return lines + [""]


def write_readme(doc, out, chart_ok):
    lines = (readme_intro(doc, chart_ok) + readme_table(doc) + readme_findings(doc)
             + readme_conditions(doc) + readme_commands(doc))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))
