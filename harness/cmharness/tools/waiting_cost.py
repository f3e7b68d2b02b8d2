"""waiting-cost -- what does a waiting request (or an idle connection) cost a server, in memory?

    harness/waiting-cost --model blocking --waiting 512
    harness/waiting-cost --model asio_coro --waiting 10000 --threads 1
    harness/waiting-cost --model uring_coro --waiting 10000 --threads 1 --json /tmp/uring_coro.json
    harness/waiting-cost --model node --waiting 10000
    harness/waiting-cost --model go --waiting 10000 --threads 1      # GOMAXPROCS 1
    harness/waiting-cost --model tokio --waiting 10000 --threads 1   # the current_thread runtime
    harness/waiting-cost --model libuv_callbacks --idle --waiting 10000 --threads 1 --standing-s 5
    harness/waiting-cost --model nginx --idle --waiting 10000

The method is the harness core's (cmharness/memory.py), the same cm-price uses for its "bytes
per waiting request": a freshly started server (build/bin/cm-server, or --server, on a free port),
its RSS read, --waiting connections each sending GET /delay/60000 (so they all wait together), its
RSS read again; the difference over the requests. The blocking model holds a whole worker thread
per waiting request, and its workers start with the server, so it is measured across two fresh
servers, 1 worker holding 1 request and N holding N: the difference over N - 1, the thread's own
resident memory included, and beside it the stack each thread reserves (from /proc/PID/maps):

    model=blocking threads=514 waiting=512 rss_before=...KiB rss_after=...KiB
        rss_per_waiting_request=...B vm_size=...KiB stack_reserved=8392704B     (one line)

--idle measures an idle keep-alive connection instead: each connection asks GET /plaintext once,
reads the answer, and then sends nothing (nginx answers that too). A model of cm-server is started
with --header-timeout 60000, so no connection reaches its idle deadline while it is measured (the
peers keep theirs open for 300 s); the line says how many were still open at the end:

    model=nginx holding=idle threads=2 connections=10000 ... rss_per_idle_connection=...B still_open=10000

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

#: --idle: cm-server's --header-timeout (ms), longer than any measurement, so that no idle
#: connection is closed at its deadline while it is measured.
IDLE_HEADER_TIMEOUT_MS = 60_000


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a model of cm-server, or a peer: node, go, tokio")
    ap.add_argument("--summary", metavar="DIR", help="only write DIR/README.md from DIR/*.json")
    ap.add_argument("--waiting", type=int, default=1000,
                    help="requests left waiting, or with --idle idle connections (max ~19,000)")
    ap.add_argument("--idle", action="store_true",
                    help="idle keep-alive connections (each answered once, then silent) instead "
                    "of waiting requests")
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
        "holding": cost.holding,
        "still_open": cost.still_open,
    }


def figures_line(f):
    """The one line waiting-cost prints (docs/exercises/10 reads it)."""
    if f.get("holding") == "idle":
        line = (f"model={f['model']} holding=idle threads={f['threads']} "
                f"connections={f['waiting']} rss_before={f['rss_before_kib']}KiB "
                f"rss_after={f['rss_after_kib']}KiB "
                f"rss_per_idle_connection={f['rss_per_waiting_request_bytes']}B "
                f"vm_size={f['vm_size_kib']}KiB still_open={f['still_open']}")
    else:
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


WAITING_INTRO = (
    "Written by `harness/waiting-cost --summary` from the JSON beside it (`make waiting-cost` "
    "regenerates them), by the harness core's method "
    "([cmharness/memory.py](../../harness/cmharness/memory.py)): a fresh server's RSS before and "
    "after N requests wait together in `/delay/60000`, over N. The blocking model holds a worker "
    "thread per waiting request and starts its workers with the server: it is measured across a "
    "server of 1 worker holding 1 request and one of N holding N, the difference over N - 1 -- "
    "the thread's own resident memory included -- and the stack each thread reserves (virtual, "
    "mostly never touched) beside it. The peers run on one core as the models do: go with "
    "GOMAXPROCS 1 (a goroutine per connection, parked on the runtime's netpoller and timers), "
    "tokio on its current_thread runtime (a task per connection); `threads` counts every thread "
    "the process has, its runtime's own included.")
STANDING = (
    "The standing cost is the server's CPU, in ms a second, over --standing-s seconds while the "
    "connections are held and nothing is due (its sweeps and ticks, what runs regardless): read "
    "from /proc, whose 10 ms ticks make 0 mean less than 10 ms over the window; - where it was "
    "not read.")
IDLE_INTRO = (
    "The same method with `--idle`: each of N connections asks `GET /plaintext` once, reads its "
    "answer, and then sends nothing -- a keep-alive connection kept for a next request that has "
    "not come. The models run with `--header-timeout 60000` (the peers keep an idle connection "
    "300 s), so none reaches its idle deadline while it is measured; `still open` counts the "
    "connections the server had not closed when the measurement ended.")


def summary(folder):
    """DIR/README.md: one line per JSON that --json wrote there, with its command and commit; the
    waiting requests' table, then the idle connections' when there are any."""
    docs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                docs.append(json.load(f))
    idle = [d for d in docs if d.get("holding") == "idle"]
    lines = ["# Bytes per waiting request", "", WAITING_INTRO, "", STANDING, "",
             *_table([d for d in docs if d not in idle], idle=False)]
    if idle:
        lines += ["", "## An idle keep-alive connection", "", IDLE_INTRO, "",
                  *_table(idle, idle=True)]
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _table(docs, idle):
    held, per = ("idle connections", "bytes per idle connection") if idle else \
        ("waiting", "bytes per waiting request")
    lines = [f"| model | timers | threads | {held} | RSS before KiB | RSS after KiB | {per} | "
             f"stack reserved per {'connection' if idle else 'request'} | "
             f"{'still open | ' if idle else ''}standing CPU, ms/s | commit | command |",
             f"|---|---|--:|--:|--:|--:|--:|--:|{'--:|' if idle else ''}--:|---|---|"]
    for d in docs:
        timers = "-"
        if d["model"] not in ("blocking", *servers.PEERS):
            timers = d.get("timers", "model")
        stack = d.get("stack_reserved_bytes")
        still = f"{d['still_open']:,} | " if idle else ""
        lines.append(f"| {d['model']} | {timers} | {d['threads']} | {d['waiting']:,} | "
                     f"{d['rss_before_kib']:,} | {d['rss_after_kib']:,} | "
                     f"{d['rss_per_waiting_request_bytes']:,} | "
                     f"{memory.mib_text(stack) if stack else '-'} | {still}"
                     f"{standing_text(d.get('standing_cpu_ms_per_s'))} | "
                     f"`{d['provenance']['commit']['head'][:7]}` | `{d['command']}` |")
    return lines


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
    if args.model == "nginx" and not args.idle:
        sys.exit("waiting-cost: nginx answers only /plaintext here: measure it with --idle")
    is_peer = args.model in servers.PEERS
    extra = ("--timers", args.timers) if args.model != "blocking" and not is_peer else ()
    if args.idle and not is_peer:  # no idle deadline while it is measured
        extra += ("--header-timeout", str(IDLE_HEADER_TIMEOUT_MS))
    logs = []
    try:
        cost = memory.measure(args.model, args.waiting, loops=args.threads or 1,
                              program=None if is_peer else args.server, args=extra, logs=logs,
                              bin_dir=os.path.dirname(os.path.abspath(args.server)),
                              standing_s=args.standing_s, idle=args.idle)
    except (RuntimeError, ValueError, OSError) as e:  # OSError: a connection refused, timed out
        sys.exit(f"waiting-cost: {e}")
    figures = figures_of(cost, args)
    print(figures_line(figures), flush=True)
    sys.stderr.write("".join(logs))  # what each server printed (its drain), as on a terminal
    if args.json:
        write_json(args.json, figures, os.path.dirname(os.path.abspath(args.server)))
