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
import os
import shlex
import sys

from cmharness import PYTHON, ROOT, default_bin_dir, proc, processes, servers, timeline
from cmharness.provenance import provenance, utc_now
from cmharness.staircase_report import write_readme

HARNESS = os.path.join(ROOT, "harness")


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


def run_burst(run, port, connections, csv_path, timeout, cpus):
    """harness/burst against the server, pinned to `cpus`, its timeline into csv_path."""
    options = ["--connections", str(connections), "--path", run["path"],
               "--timeout", f"{timeout:g}", "--timeline"]
    argv = [os.path.join(HARNESS, "burst"), "--port", str(port), *options, csv_path]
    run["burst_command"] = processes.shown(argv, replace=((str(port), "PORT"),))
    try:
        done = processes.run(argv, cpus, timeout=timeout + 120, check=False)
    except RuntimeError:  # it did not end, and was stopped
        run["error"] = "harness/burst did not end"
    else:
        run["burst_output"] = (done.stdout + done.stderr).strip()
        run["burst_exit"] = done.returncode
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
        "ended_utc": None,
        "command": shlex.join(["harness/staircase", *sys.argv[1:]]),
        "note": args.note,
        "provenance": provenance(args.bin_dir),
        "runs": runs,
    }


def draw_chart(args):
    """harness/plot-staircase on runs.json; True when it drew staircase.png."""
    argv = [args.python, os.path.join(HARNESS, "plot-staircase"), os.path.join(args.out, "runs.json")]
    try:
        processes.run(argv, timeout=300)
    except RuntimeError as e:  # it failed, or did not end
        print(f"staircase: the chart failed: {e}", file=sys.stderr)
        return False
    return True


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
    doc["ended_utc"] = utc_now()
    with open(os.path.join(args.out, "runs.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    write_readme(doc, args.out, chart_ok=draw_chart(args))
    print(f"staircase: wrote {args.out}")
    return 0 if all("error" not in r for r in doc["runs"]) else 1
