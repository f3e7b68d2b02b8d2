"""cost -- what one request costs each server: its CPU time and its system calls (issue 12).

    harness/cost                            # what `make cost` runs: writes results/cost.md and results/cost/
    harness/cost --rounds 10 --duration 2   # more rounds, longer windows: narrower intervals
    harness/cost --servers asio_coro,nginx --out /tmp/cost.md --data-dir /tmp/cost

Prices every model cm-server was built with (`--threads 1`: one loop), nginx with one worker
(harness/peers/nginx.conf.in), Node.js (harness/peers/delay-server.js) and the Go and Tokio peers
built beside cm-server (GOMAXPROCS 1; the current_thread runtime), each load on a freshly
started server (cmharness.servers) pinned to CPU 0, its client on CPU 1: `/plaintext` with
`wrk -t1 -c256` and with `h2load --h1 -t1 -c256`, and `/delay/100` with `cm-load -c 2000 --delay 100`,
which checks every answer (nginx has no /delay route). One client run holds two windows: the
measured one (the server's CPU from /proc/PID/stat, the whole process tree, over the answers sent
in it), then a shorter one under `strace -c -f -p PID` beside the server (system calls per answer,
by name; the server paused while strace attaches and detaches; no CPU or rps read from it).
Answers are counted where the server sends them: its connections' bytes_acked (ss) over the size
of one answer. The report's "How it was measured" says the rest.

The servers run in --rounds rounds (default 6), in another order each round. Each figure is the
median over the rounds with its distribution-free 95% interval, each ratio to nginx (to node on
/delay) the median of the ratios taken within a round with its interval (cmharness.stats; six
rounds is the fewest that give one). The windows are short -- 1 s measured, 0.4 s under strace,
0.2 s to settle (they were 2 s, 1 s and 0.3 s with 3 rounds) -- so that six rounds of every server
take about six minutes; --duration, --strace-duration and --settle lengthen them.

Loopback only; every run is bounded in time (a client that overstays is killed and its row marked
failed); every process started is stopped by its pid on the way out, even on an error or Ctrl-C
(cmharness.processes). Writes --out (results/cost.md) and --data-dir (results/cost/: runs.csv,
cost.json with provenance() and its tree hashes, machine.md, machine.json). Builds nothing:
`make cost` builds first. Run with /usr/bin/python3 (Debian's), which this file names in line 1.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from cmharness import ROOT, default_bin_dir, proc, processes, provenance, results
from cmharness.cost_report import FIGURES, describe_errors, fmt, summary, write_csv, write_report
from cmharness.cost_run import CONNECT_GIVE_UP_S, LOADS, SlowConnect, run_load
from cmharness.rounds import order as round_order
from cmharness.servers import PACKAGE, PEERS, built_models, find_program, peer_program


def say(text):
    print(f"cost: {text}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Rounds: every server, each load, in another order each round. One load on one server is
# cmharness.cost_run's; the figures over the rounds and the page are cmharness.cost_report's.


def measure(kind, name, args, scratch, allowance, label):
    """run_load(), tried once more when a busy machine opened the connections too slowly
    (allowance: seconds allowed for them, by load and then by (server, load), learned upwards).
    Returns the row, or {"error": why}."""
    row = None
    for attempt in range(2):
        given = allowance.get((name, kind), allowance[kind])
        try:
            row = run_load(kind, name, args, scratch, given)
            allowance[(name, kind)] = max(0.3, 0.2 + 1.5 * row.get("connect_s", 0))
            return row
        except SlowConnect as e:
            allowance[(name, kind)] = max(given * 2, e.seen * 1.5 + 0.5)
            retry = attempt == 0 and e.seen < CONNECT_GIVE_UP_S and "not open" not in str(e)
            say(f"{label} {e}" + (f"; trying again, allowing {allowance[(name, kind)]:.1f} s" if retry else ""))
            row = {"error": str(e)}
            if not retry:
                return row
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            return {"error": (str(e).strip().splitlines() or [repr(e)])[0][:300]}
    return row


def progress(label, row, seconds):
    if "error" in row:
        return f"{label} FAILED: {row['error']}"
    calls = (row.get("strace") or {}).get("per_request")
    text = (f"{label} {row['rps']:>9,.0f} rps  {fmt(row['cpu_us_per_request'], 2):>7} µs/req  "
            f"{fmt(calls, 2):>6} calls/req  errors {describe_errors(row['errors']) or 0}  ({seconds:.1f} s)")
    return text + (f"  strace: {row['strace_error']}" if row.get("strace_error") else "")


def run_rounds(args, servers, scratch):
    rounds = []
    allowance = {kind: 0.5 + (args.delay_connections if kind == "delay" else args.connections) / 1000
                 for kind in LOADS}
    for r in range(args.rounds):
        order = round_order(servers, r, args.rounds, "rotate")
        rnd = {"order": order, "load_average": list(proc.load_average()), "rows": {}}
        rounds.append(rnd)
        for name in order:
            rnd["rows"][name] = {}
            for kind in loads_of(name):
                t0 = time.monotonic()
                label = f"round {r + 1} {name:<16} {kind:<7}"
                row = measure(kind, name, args, scratch, allowance, label)
                rnd["rows"][name][kind] = row
                say(progress(label, row, time.monotonic() - t0))
    return rounds


def loads_of(name):
    return [kind for kind in LOADS if not (name == "nginx" and kind == "delay")]  # nginx: /plaintext only


# ---------------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=default_bin_dir())
    ap.add_argument("--servers", default="", help="comma-separated subset (models, nginx, node, go, tokio); default all")
    ap.add_argument("--rounds", type=int, default=6,
                    help="rounds, each with the servers in another order (6: the fewest for an interval)")
    ap.add_argument("--duration", type=float, default=1.0, help="seconds of each measured window")
    ap.add_argument("--strace-duration", type=float, default=0.4, help="seconds of each strace window")
    ap.add_argument("--settle", type=float, default=0.2,
                    help="seconds between the client's connections being open and the measured window")
    ap.add_argument("--connections", type=int, default=256, help="wrk's and h2load's connections")
    ap.add_argument("--delay-connections", type=int, default=2000)
    ap.add_argument("--delay", type=int, default=100, help="ms of /delay/{ms}")
    ap.add_argument("--blocking-workers", type=int, default=0,
                    help="the blocking model's --threads (default: one per connection of the load)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--no-strace", dest="strace", action="store_false", help="skip the system-call counts")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "cost.md"))
    ap.add_argument("--data-dir", default=None, help="raw data (default: results/cost/ beside --out)")
    ap.add_argument("--note", default="", help="a line about the conditions, written into the result")
    ap.add_argument("--rewrite-report", action="store_true",
                    help="measure nothing: write --out again from the data in --data-dir (cost.json), "
                         "with this --note")
    args = ap.parse_args()
    args.data_dir = args.data_dir or os.path.splitext(os.path.abspath(args.out))[0]
    return args


def rewrite_report(args):
    """The report again from a run's saved data (after the report's wording changed)."""
    with open(os.path.join(args.data_dir, "cost.json")) as f:
        doc = json.load(f)
    if "provenance" not in doc:
        sys.exit("cost: that cost.json was written before harness/cost recorded provenance(); run again")
    doc["settings"]["note"] = args.note or doc["settings"].get("note", "")
    with open(args.out, "w") as f:
        f.write(write_report(doc))
    say(f"rewrote {os.path.relpath(args.out)} from {os.path.relpath(args.data_dir)}/cost.json")
    return 0


def check_setup(args):
    """Exits with what is missing: the binaries, the tools, two CPUs."""
    for b in ("cm-server", "cm-load"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            sys.exit(f"cost: {args.bin_dir}/{b} is missing; run `make build` (or `make cost`) first")
    missing = [t for t in ["wrk", "h2load", "ss"] + (["strace"] if args.strace else []) if not find_program(t)]
    if missing:
        sys.exit(f"cost: {', '.join(missing)} not found; scripts/install-deps installs wrk and h2load "
                 "(nghttp2-client); strace is Debian's `strace`, ss its `iproute2`")
    cpus = proc.allowed_cpus()
    if args.server_cpu not in cpus or args.client_cpu not in cpus or args.server_cpu == args.client_cpu:
        sys.exit(f"cost: needs two different CPUs for the server and the clients (allowed here: {cpus})")


def pick_servers(args):
    servers = built_models(args.bin_dir)
    for peer in PEERS:
        if peer_program(peer, args.bin_dir):
            servers.append(peer)
        else:
            say(f"{peer} is not installed (scripts/install-deps installs {PACKAGE[peer]}); no row")
    if args.servers:
        wanted = args.servers.split(",")
        unknown = [s for s in wanted if s not in servers]
        if unknown:
            sys.exit(f"cost: not built or not installed: {', '.join(unknown)} (have: {', '.join(servers)})")
        servers = [s for s in servers if s in wanted]
    return servers


def client_versions():
    return {"wrk": provenance.first_line(["wrk", "-v"]), "h2load": provenance.first_line(["h2load", "--version"]),
            "strace": provenance.first_line(["strace", "-V"])}


def write_results(args, doc):
    os.makedirs(args.data_dir, exist_ok=True)
    results.write_machine(args.data_dir, dict(doc["provenance"]["machine"], clients=doc["clients"]))
    write_csv(os.path.join(args.data_dir, "runs.csv"), doc["rounds"], doc["servers"])
    with open(os.path.join(args.data_dir, "cost.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
        f.write("\n")
    report = write_report(doc)
    with open(args.out, "w") as f:
        f.write(report)
    print(report[report.index("## Server CPU"):report.index("## Sleeps")].strip())


def main():
    args = parse_args()
    if args.rewrite_report:
        return rewrite_report(args)
    t_start = time.monotonic()
    check_setup(args)
    servers = pick_servers(args)
    processes.install_signal_handlers()
    signal.signal(signal.SIGHUP, lambda signum, _frame: sys.exit(128 + signum))
    processes.raise_open_files()  # the blocking model's 2,000 threads, cm-load's connections
    prov = provenance.provenance(args.bin_dir)  # before this process pins itself: the CPUs allowed
    # This script (its ss and /proc reads) keeps off the server's CPU too: it runs on the client's.
    os.sched_setaffinity(0, {args.client_cpu})
    scratch = tempfile.mkdtemp(prefix="cm-cost-")
    try:
        rounds = run_rounds(args, servers, scratch)
    finally:
        processes.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)
    invoked = shlex.join(["harness/cost"] + sys.argv[1:])
    doc = {"tool": "harness/cost", "command": invoked, "provenance": prov, "clients": client_versions(),
           "ended": {"utc": provenance.utc_now(), "load_average": list(proc.load_average())},
           "elapsed_s": time.monotonic() - t_start, "settings": vars(args), "servers": servers,
           "summary": summary(rounds, servers), "rounds": rounds,
           "units": {key: unit for key, (_, unit) in FIGURES.items()}}
    write_results(args, doc)
    say(f"wrote {os.path.relpath(args.out)} and {os.path.relpath(args.data_dir)}/ in {doc['elapsed_s']:.0f} s")
    failed = any("error" in row for rnd in rounds for rows in rnd["rows"].values() for row in rows.values())
    return 1 if failed else 0
