"""waiting-cost -- what does a waiting request cost a server, in memory?

    harness/waiting-cost --model blocking --waiting 512
    harness/waiting-cost --model asio_coro --waiting 10000 --threads 1
    harness/waiting-cost --model uring_coro --waiting 10000 --threads 1 --json /tmp/uring_coro.json
    harness/waiting-cost --model node --waiting 10000
    harness/waiting-cost --model go --waiting 10000 --threads 1      # GOMAXPROCS 1
    harness/waiting-cost --model tokio --waiting 10000 --threads 1   # the current_thread runtime

The method is the harness core's (cmharness/memory.py), the same cm-price uses for its "bytes
per waiting request": a freshly started server (build/bin/cm-server, or --server, on a free port),
its RSS read, --waiting connections each sending GET /delay/60000 (so they all wait together), its
RSS read again; the difference over the requests. The blocking model holds a whole worker thread
per waiting request, and its workers start with the server, so it is measured across two fresh
servers, 1 worker holding 1 request and N holding N: the difference over N - 1, the thread's own
resident memory included, and beside it the stack each thread reserves (from /proc/PID/maps):

    model=blocking threads=514 waiting=512 rss_before=...KiB rss_after=...KiB
        rss_per_waiting_request=...B vm_size=...KiB stack_reserved=8392704B     (one line)

--json FILE writes the same figures with provenance() (the machine, the commit, the git tree hash
of each model's folder), so they can live under results/ and be checked for freshness;
`harness/waiting-cost --summary results/waiting-cost` writes that folder's README.md, a table of
every JSON in it (`make waiting-cost` runs every model, then the summary). Bounded: loopback only;
every connection is closed, then the server is stopped (SIGTERM: it drains for its --drain-ms, then
SIGKILL after 15 s).
"""
import argparse
import json
import os
import shlex
import sys

from cmharness import default_bin_dir, memory, processes, servers
from cmharness.provenance import provenance


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a model of cm-server, or a peer: node, go, tokio")
    ap.add_argument("--summary", metavar="DIR", help="only write DIR/README.md from DIR/*.json")
    ap.add_argument("--waiting", type=int, default=1000, help="requests left waiting (max ~19,000)")
    ap.add_argument("--threads", type=int, default=None,
                    help="an async model's event loops (default 1); the blocking model runs one "
                    "worker per waiting request, so for it only --threads equal to --waiting")
    ap.add_argument("--timers", choices=("model", "wheel"), default="model",
                    help="cm-server --timers: the model's own timer structure, or the wheel")
    ap.add_argument("--server", default=os.path.join(default_bin_dir(), "cm-server"),
                    help="the cm-server executable (or a script that runs it)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures and provenance() here")
    ap.add_argument("--standing-s", type=float, default=0.0, metavar="S",
                    help="also read the server's CPU for S seconds while the requests wait and "
                    "none is due: its standing cost (sweeps, ticks), in ms a second")
    return ap.parse_args(argv)


def figures_of(cost, args):
    """The figures of a memory.WaitingCost, as the line and the JSON name them."""
    return {
        "model": args.model,
        "timers": args.timers,
        "threads_asked": args.threads,
        "threads": cost.threads,
        "waiting": cost.waiting,
        "rss_before_kib": cost.rss_before_kib,
        "rss_after_kib": cost.rss_after_kib,
        "rss_per_waiting_request_bytes": cost.bytes_per_waiting,
        "vm_size_kib": cost.vm_size_kib,
        "stack_reserved_bytes": cost.reserved_bytes_per_waiting,
        "method": cost.method,
        "standing_cpu_ms_per_s": cost.standing_cpu_ms_per_s,
    }


def figures_line(f):
    """The one line waiting-cost prints (docs/exercises/10 reads it)."""
    line = (f"model={f['model']} threads={f['threads']} waiting={f['waiting']} "
            f"rss_before={f['rss_before_kib']}KiB rss_after={f['rss_after_kib']}KiB "
            f"rss_per_waiting_request={f['rss_per_waiting_request_bytes']}B "
            f"vm_size={f['vm_size_kib']}KiB")
    if f.get("stack_reserved_bytes"):
        line += f" stack_reserved={f['stack_reserved_bytes']}B"
    if f.get("standing_cpu_ms_per_s") is not None:
        line += f" standing_cpu={f['standing_cpu_ms_per_s']}ms/s"
    return line


def write_json(path, figures, bin_dir):
    doc = {"tool": "harness/waiting-cost",
           "command": " ".join(["harness/waiting-cost", *map(shlex.quote, sys.argv[1:])]),
           **figures, "provenance": provenance(bin_dir)}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def standing_text(ms_per_s):
    return "-" if ms_per_s is None else f"{ms_per_s:g}"


def summary(folder):
    """DIR/README.md: one line per JSON that --json wrote there, with its command and commit."""
    docs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                docs.append(json.load(f))
    lines = ["# Bytes per waiting request", "",
             "Written by `harness/waiting-cost --summary` from the JSON beside it (`make "
             "waiting-cost` regenerates them), by the harness core's method "
             "([cmharness/memory.py](../../harness/cmharness/memory.py)): a fresh server's RSS "
             "before and after N requests wait together in `/delay/60000`, over N. The blocking "
             "model holds a worker thread per waiting request and starts its workers with the "
             "server: it is measured across a server of 1 worker holding 1 request and one of N "
             "holding N, the difference over N - 1 -- the thread's own resident memory included "
             "-- and the stack each thread reserves (virtual, mostly never touched) beside it. "
             "The peers run on one core as the models do: go with GOMAXPROCS 1 (a goroutine per "
             "connection, parked on the runtime's netpoller and timers), tokio on its "
             "current_thread runtime (a task per connection); `threads` counts every thread the "
             "process has, its runtime's own included.", "",
             "The standing cost is the server's CPU, in ms a second, over --standing-s seconds "
             "while the requests wait and none is due (its sweeps and ticks, what runs "
             "regardless): read from /proc, whose 10 ms ticks make 0 mean less than 10 ms over "
             "the window; - where it was not read.", "",
             "| model | timers | threads | waiting | RSS before KiB | RSS after KiB | bytes per "
             "waiting request | stack reserved per request | standing CPU, ms/s | commit | "
             "command |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|"]
    for d in docs:
        timers = "-"
        if d["model"] not in ("blocking", *servers.PEERS):
            timers = d.get("timers", "model")
        stack = d.get("stack_reserved_bytes")
        lines.append(f"| {d['model']} | {timers} | {d['threads']} | {d['waiting']:,} | "
                     f"{d['rss_before_kib']:,} | {d['rss_after_kib']:,} | "
                     f"{d['rss_per_waiting_request_bytes']:,} | "
                     f"{memory.mib_text(stack) if stack else '-'} | "
                     f"{standing_text(d.get('standing_cpu_ms_per_s'))} | "
                     f"`{d['provenance']['commit']['head'][:7]}` | `{d['command']}` |")
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    args = parse_args()
    if args.summary:
        return summary(args.summary)
    if not args.model:
        sys.exit("waiting-cost: --model is required (or --summary DIR)")
    if args.model == "blocking" and args.threads not in (None, args.waiting):
        sys.exit("waiting-cost: the blocking model is measured with one worker per waiting "
                 "request: leave --threads out, or make it --waiting")
    processes.install_signal_handlers()
    hard = processes.raise_open_files()
    if args.waiting > hard - 100:
        sys.exit(f"waiting-cost: at most {hard - 100} connections fit under the open-files limit")
    is_peer = args.model in servers.PEERS
    extra = ("--timers", args.timers) if args.model != "blocking" and not is_peer else ()
    logs = []
    try:
        cost = memory.measure(args.model, args.waiting, loops=args.threads or 1,
                              program=None if is_peer else args.server, args=extra, logs=logs,
                              bin_dir=os.path.dirname(os.path.abspath(args.server)),
                              standing_s=args.standing_s)
    except (RuntimeError, ValueError) as e:
        sys.exit(f"waiting-cost: {e}")
    figures = figures_of(cost, args)
    print(figures_line(figures), flush=True)
    sys.stderr.write("".join(logs))  # what each server printed (its drain), as on a terminal
    if args.json:
        write_json(args.json, figures, os.path.dirname(os.path.abspath(args.server)))
