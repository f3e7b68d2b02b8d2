"""staircase -- 2,000 requests for /delay/500 at once, against every model: when does each answer come?

    harness/staircase                          # every built model, one with --wait-mode sleep, a control
    harness/staircase --models blocking,libuv_callbacks --sleep-model none --out /tmp/stairs

For each model (and once more for --sleep-model with `--wait-mode sleep`), starts cm-server through
the harness core (cmharness.servers.Server: a free port, pinned to CPU 0, stopped by its pid with
SIGTERM, then SIGKILL after 15 s, even when something failed), runs harness/burst pinned to CPU 1
with --timeline, and reads the server's threads and RSS from /proc after the burst. Writes into
--out (default results/staircase/):

  <run>.csv        one line per request: when it was sent, when it was answered (harness/burst)
  staircase.png    every run on one page, each request a point (harness/plot-staircase)
  runs.json        what ran, the figures of the table, and provenance(): the machine, the commit
                   and the git tree hash of each model's folder as measured
  README.md        the machine, the load average, the command, the commit, and the table:
                   time until the last answer, and the steps seen

A blocking pool of 64 workers answers 2,000 waiting requests in ceil(2000 / 64) = 32 steps of 64,
one delay apart; an async model answers them in one step; an async model that sleeps on its loop
(--wait-mode sleep) answers one per delay, a slope, and would need 2,000 delays -- so that run is cut
at --sleep-timeout and the table says how far it got. A control run sends the same burst for
/delay/0 (--control-model): no wait at all, so its time is what the burst itself costs the machine
(the Python client, the loop, the kernel), the part of an async model's time that is not the delay.
Needs /usr/bin/python3 with matplotlib for the chart (Debian's python3-matplotlib).
"""
import argparse
import dataclasses
import datetime
import json
import math
import os
import shlex
import subprocess
import sys

from cmharness import PYTHON, ROOT, default_bin_dir, proc, processes, servers, timeline
from cmharness.provenance import provenance

HARNESS = os.path.join(ROOT, "harness")

WORKERS = servers.BLOCKING_WORKERS


def summarise(csv_path, delay_s):
    """The figures of one run's timeline: answers, correct ones, first and last, the steps."""
    requests = timeline.read(csv_path)
    answered = timeline.answer_times(requests)
    steps = timeline.steps_of(answered, gap=delay_s / 2)
    sizes = sorted(len(s) for s in steps)
    return {
        "requests": len(requests),
        "answered": len(answered),
        "correct": sum(1 for r in requests if r.ok),
        "first_s": min(answered, default=None),
        "last_s": max(answered, default=None),
        "steps": len(steps),
        "largest_step": sizes[-1] if sizes else 0,
        "median_step": sizes[len(sizes) // 2] if sizes else 0,
    }


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


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated (default: every model cm-server was built with)")
    ap.add_argument("--sleep-model", default="libuv_callbacks",
                    help="run this async model once more with --wait-mode sleep ('none': no such run)")
    ap.add_argument("--control-model", default="libuv_callbacks",
                    help="run this model once more on /delay/0, the burst's own cost ('none': no such run)")
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--delay", type=int, default=500, help="ms: each request is /delay/<this>")
    ap.add_argument("--timeout", type=float, default=60.0, help="burst --timeout for each run, s")
    ap.add_argument("--sleep-timeout", type=float, default=20.0,
                    help="burst --timeout for the --wait-mode sleep run (it would need connections x delay)")
    ap.add_argument("--bin-dir", default=default_bin_dir())
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "staircase"))
    ap.add_argument("--python", default=PYTHON, help="the Python with matplotlib, for the chart")
    ap.add_argument("--note", default="", help="the conditions of the run, written into README.md")
    return ap.parse_args(argv)


def plan_runs(args, models):
    """Every run: each model, the --sleep-model with --wait-mode sleep, the control on /delay/0."""
    path = f"/delay/{args.delay}"
    runs = [{"name": m, "model": m, "flags": [], "path": path} for m in models]
    if args.sleep_model != "none":
        runs.append({"name": f"{args.sleep_model}-sleep", "model": args.sleep_model,
                     "flags": ["--wait-mode", "sleep"], "path": path})
    if args.control_model != "none":
        # The same burst with no wait at all: what 2,000 requests and answers cost this machine
        # (the client, the loop, the kernel) right now, apart from any delay.
        runs.append({"name": f"{args.control_model}-delay0", "model": args.control_model,
                     "flags": [], "path": "/delay/0", "control": True})
    return runs


def pinning():
    """(server CPUs, burst CPUs): the first allowed CPU and the second; unpinned with one CPU."""
    cpus = proc.allowed_cpus()
    if len(cpus) < 2:
        return [], []
    return [cpus[0]], [cpus[1]]


def shown(path):
    """A path as the README shows it: relative to the repository when it is inside."""
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def run_child(argv, cpus=(), timeout=None):
    """Runs a child (pinned to `cpus`) to its end: (exit status, stdout and stderr), or
    (None, "") when it did not end within `timeout` s and was stopped."""
    p = processes.start(argv, cpus, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.stop(p)
        return None, ""
    processes.stop(p)  # it has ended: this only forgets it
    return p.returncode, (out + err).strip()


def run_burst(run, port, connections, csv_path, timeout, cpus):
    """harness/burst against the server, pinned to `cpus`, its timeline into csv_path."""
    options = ["--connections", str(connections), "--path", run["path"],
               "--timeout", f"{timeout:g}", "--timeline"]
    run["burst_command"] = " ".join(["harness/burst", "--port", "PORT", *options, shown(csv_path)])
    argv = [os.path.join(HARNESS, "burst"), "--port", str(port), *options, csv_path]
    status, output = run_child(argv, cpus, timeout=timeout + 120)
    if status is None:
        run["error"] = "harness/burst did not end"
    else:
        run["burst_output"] = output
        run["burst_exit"] = status
    print("\n".join("  " + line for line in run.get("burst_output", run.get("error", "")).splitlines()))


def run_one(run, args, server_cpus, load_cpus):
    """One run: a fresh server pinned to server_cpus, the burst, the server's readings, the figures."""
    timeout = args.sleep_timeout if "sleep" in run["flags"] else args.timeout
    csv_path = os.path.join(args.out, run["name"] + ".csv")
    if os.path.exists(csv_path):
        os.remove(csv_path)  # a timeline left by an earlier run is not this run's
    run["server_command"] = " ".join(["build/bin/cm-server", "--model", run["model"], *run["flags"]])
    print(f"staircase: {run['name']}: {args.connections} x {run['path']} ...", flush=True)
    try:
        server = servers.Server(run["model"], cpus=server_cpus, bin_dir=args.bin_dir,
                                args=["--drain-ms", "2000", *run["flags"]])
    except RuntimeError as e:
        run["error"] = f"cm-server did not start: {e}"
        print(f"staircase: {run['name']}: {run['error']}")
        return
    with server:
        run_burst(run, server.port, args.connections, csv_path, timeout, load_cpus)
        try:
            run["server_readings"] = dataclasses.asdict(server.readings())  # threads, RSS, CPU
        except (RuntimeError, ProcessLookupError) as e:
            run.setdefault("error", f"the server did not outlive the burst: {e}")
        run["server_end"] = server.stop()
    if os.path.exists(csv_path):
        run.update(summarise(csv_path, args.delay / 1000))
        run["csv"] = os.path.basename(csv_path)
        run["cut_at_s"] = timeout if run["answered"] < run["requests"] else None


def new_doc(args, runs, server_cpus, load_cpus):
    """runs.json before the runs: what will run, where, and provenance() read now."""
    started = datetime.datetime.now(datetime.timezone.utc)
    return {
        "tool": "harness/staircase",
        "started_utc": started.strftime("%Y-%m-%d %H:%M:%S"),
        "connections": args.connections,
        "delay_ms": args.delay,
        "path": f"/delay/{args.delay}",
        "server_cpu": server_cpus[0] if server_cpus else None,
        "load_cpu": load_cpus[0] if load_cpus else None,
        "load_average_before": list(proc.load_average()),
        "load_average_after": None,
        "command": " ".join(["harness/staircase", *map(shlex.quote, sys.argv[1:])]),
        "note": args.note,
        "provenance": provenance(args.bin_dir),
        "runs": runs,
    }


def draw_chart(args):
    """harness/plot-staircase on runs.json; True when it drew staircase.png."""
    argv = [args.python, os.path.join(HARNESS, "plot-staircase"), os.path.join(args.out, "runs.json")]
    status, output = run_child(argv, timeout=300)
    if status != 0:
        print(f"staircase: the chart failed: {output}", file=sys.stderr)
    return status == 0


def main():
    args = parse_args()
    processes.install_signal_handlers()
    server_bin = os.path.join(args.bin_dir, "cm-server")
    if not os.access(server_bin, os.X_OK):
        sys.exit(f"staircase: {server_bin} is missing: run `make build` first")
    models = args.models.split(",") if args.models else servers.built_models(args.bin_dir)
    server_cpus, load_cpus = pinning()
    os.makedirs(args.out, exist_ok=True)
    doc = new_doc(args, plan_runs(args, models), server_cpus, load_cpus)
    for run in doc["runs"]:
        run_one(run, args, server_cpus, load_cpus)
    doc["load_average_after"] = list(proc.load_average())
    with open(os.path.join(args.out, "runs.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    write_readme(doc, args.out, chart_ok=draw_chart(args))
    print(f"staircase: wrote {args.out}")
    return 0 if all("error" not in r for r in doc["runs"]) else 1


# -- README.md ------------------------------------------------------------------------------------


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
    p = doc["provenance"]
    m, c = p["machine"], p["commit"]
    la_b = " ".join(f"{x:.2f}" for x in doc["load_average_before"])
    la_a = " ".join(f"{x:.2f}" for x in doc["load_average_after"])
    pin = (f"server pinned to CPU {doc['server_cpu']}, `harness/burst` to CPU {doc['load_cpu']}"
           if doc["server_cpu"] is not None else "nothing pinned (one CPU)")
    lines = [
        "## Conditions",
        "",
        f"- Run: {doc['started_utc']} UTC, {pin}; each server started fresh on a free port "
        "(`--port 0`), async models with their default loop count (the CPUs they may run on: 1 here, "
        f"as pinned), the blocking model with its default {WORKERS} workers.",
        f"- Load average (1, 5, 15 min) before: {la_b}; after: {la_a}.",
    ]
    if doc["note"]:
        lines.append(f"- {doc['note']}")
    dirty = " (with uncommitted changes)" if c["dirty"] else ""
    return lines + [
        f"- Machine: {m['cpu_model']}, {m['logical_cpus']} CPUs, {m['memory']}, {m['os']}, "
        f"kernel {m['kernel']}.",
        f"- Commit `{c['head']}`{dirty}, release build (`make build`); the git tree hash of each "
        "model's folder as measured is in [runs.json](runs.json).",
        "",
    ]


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
