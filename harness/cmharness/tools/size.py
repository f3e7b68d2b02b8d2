"""size -- which model for N connections waiting D ms each on C cores, and how much headroom?

    harness/size 10000 100           # 10,000 connections, a 100 ms backend call, one core
    harness/size 500 20 4 --rate 8000
    harness/size 2000 10 --db-pool 16   # each wait a 10 ms query on 16 database connections

For each model with a committed /delay row (results/delay-sweep and results/arena; the bytes per
waiting request of a peer neither measured, from results/waiting-cost), prints the
three ceilings for the service -- connections / D, threads / D (the blocking model's workers), and
C times the model's CPU ceiling at its committed row nearest N connections -- which one binds, the rps to expect (that ceiling times the efficiency the row
reached, its 95% interval), the memory its waiting requests hold, and the row every figure comes
from. With --rate R (the rps the service must answer) it adds the headroom: expected / R. With
--db-pool P the wait is a query on P database connections: P / D is a fourth ceiling (P per event
loop in an async model, P in all in the blocking model), priced by results/db's rows.
Nothing is measured here; harness/cmharness/sizing.py says how each figure is worked out.

    harness/size --examples results/sizing.md

writes the three services docs/choosing.md works through (EXAMPLES), each sized from the
committed results, to a page; a test keeps that page equal to what the results say now.
"""
import argparse
import os
import sys

from cmharness import ROOT, sizing
ORDER = ("blocking", "asio_coro", "asio_coro_uring", "libuv_callbacks", "uring_coro", "node", "go",
         "tokio")
# The services docs/choosing.md works through: (title, argv).
EXAMPLES = (
    ("An API gateway: 10,000 clients, a 100 ms call to a backend each", ["10000", "100"]),
    ("Long polls: 16,000 clients, each answered after 5 s", ["16000", "5000"]),
    ("An internal service: 200 connections, a 20 ms database call, 4 cores, 5,000 rps to answer",
     ["200", "20", "4", "--rate", "5000"]),
    ("The same, the blocking model given a worker per connection",
     ["200", "20", "4", "--rate", "5000", "--workers", "200"]),
    ("The same, each call a query on a pool of 32 database connections (per event loop)",
     ["200", "20", "4", "--rate", "5000", "--db-pool", "32"]),
)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("connections", type=int, nargs="?", help="N: connections the service holds")
    ap.add_argument("delay_ms", type=float, nargs="?", help="D: ms each request waits on its backend")
    ap.add_argument("cores", type=int, nargs="?", default=1, help="C: cores for the server (default 1)")
    ap.add_argument("--rate", type=float, help="the rps the service must answer: prints the headroom")
    ap.add_argument("--workers", type=int, default=64, help="the blocking model's --threads (default 64)")
    ap.add_argument("--db-pool", type=int, metavar="P",
                    help="each wait is a query on P database connections (cm-server --db-pool)")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"), help="the results folder")
    ap.add_argument("--examples", metavar="FILE.md", help="write docs/choosing.md's worked services to FILE.md")
    args = ap.parse_args(argv)
    if args.examples:
        return args
    if args.connections is None or args.delay_ms is None:
        ap.error("N and D are needed (or --examples FILE.md)")
    if args.connections < 1 or args.delay_ms < 0 or args.cores < 1 or args.workers < 1:
        ap.error("N and C must be at least 1, D at least 0, --workers at least 1")
    if args.rate is not None and args.rate <= 0:
        ap.error("--rate must be above 0")
    if args.db_pool is not None and args.db_pool < 1:
        ap.error("--db-pool must be at least 1")
    return args


def rps(x):
    return "-" if x is None else f"{x:,.0f}"


def report(args):
    """The sizing of one service, as lines of text (a Markdown table and its sources)."""
    out = []
    print = out.append  # noqa: A001 -- the lines below read as the report they write
    rows = sizing.load_rows(args.results)
    if not rows:
        sys.exit(f"size: no /delay rows in {args.results}/delay-sweep or arena: run build/bin/cm-price delay-sweep")
    n, d, c = args.connections, args.delay_ms, args.cores
    print(f"size: {n:,} connections, each request waiting {d:g} ms, {c} core(s) for the server"
          + (f", {args.rate:,.0f} rps to answer" if args.rate else "")
          + (f", {args.workers} blocking workers" if args.workers != 64 else "")
          + (f", each wait a query on {args.db_pool} database connections" if args.db_pool else ""))
    print("")
    db = args.db_pool is not None
    print("| model | connections / D | threads / D |" + (" database / D |" if db else "")
          + " cpu | binds | expect rps | memory MiB |" + (" headroom |" if args.rate else ""))
    print("| --- | --: | --: |" + (" --: |" if db else "") + " --: | --- | --: | --: |"
          + (" --: |" if args.rate else ""))
    sized = []
    for server in ORDER:
        s = sizing.size(rows, server, n, d, c, workers=args.workers, db_pool=args.db_pool)
        if s is None:
            continue
        sized.append(s)
        expect = f"{rps(s.expected[0])}-{rps(s.expected[1])}" if s.expected else "-"
        memory = "-" if s.memory_mib is None else f"{s.memory_mib:,.1f}"
        line = (f"| {server} | {rps(s.ceilings['connections'])} | {rps(s.ceilings['threads'])} | "
                + (f"{rps(s.ceilings['database'])} | " if db else "")
                + f"{rps(s.ceilings['cpu'])} | {s.binds} | {expect} | {memory} |")
        if args.rate:
            line += (f" {s.expected[0] / args.rate:.2f}-{s.expected[1] / args.rate:.2f} |"
                     if s.expected else " - |")
        print(line)
    print("")
    print("Where each figure comes from:")
    for s in sized:
        r, e = s.row, s.efficiency_row
        w = sizing.waiting_row(rows, s.server)
        print(f"- {s.server}: {r.source} -- CPU ceiling {r.cpu_ceiling:,.0f} rps, "
              f"{r.cpu_us_per_request:.1f} us of server CPU per request"
              + (f"; {w.waiting_bytes:,} bytes per waiting request ({w.waiting_source})"
                 if w else "; bytes per waiting request not measured"))
        if e is not None:
            print(f"    efficiency {e.efficiency[0]:.0%} [{e.efficiency[1]:.0%} {e.efficiency[2]:.0%}] "
                  f"against its {sizing.row_binds(e)}" + ("" if e is r else f" at {e.source}"))
        for note in s.notes:
            print(f"    {note}")
    print("")
    print("One core was measured for the server (the other ran the load); a cpu ceiling for C cores is "
          "C times it, which assumes one event loop per core and nothing shared: arithmetic, not a "
          "measurement.")
    return out


def examples(results):
    """docs/choosing.md's worked services, each sized from the committed results, as a page."""
    lines = ["# Sizing three services from the committed results", "",
             "Written by `harness/size --examples results/sizing.md` from "
             "[delay-sweep](delay-sweep/results.md) (its rows, and the bytes per waiting request it "
             "measured), [arena](arena/results.md) (go and tokio, whose bytes per waiting request come from "
             "[waiting-cost](waiting-cost/README.md)); [docs/choosing.md](../docs/choosing.md) reads it. "
             "Nothing here is measured: each figure is a committed row's, worked out as "
             "`harness/cmharness/sizing.py` says.", ""]
    for title, argv in EXAMPLES:
        args = parse_args(argv + ["--results", results])
        lines += [f"## {title}", "", "```", "$ harness/size " + " ".join(argv), "```", ""]
        body = report(args)
        table = [l for l in body if l.startswith("|")]
        rest = [l for l in body if not l.startswith("|") and l and not l.startswith("size:")]
        lines += table + [""] + rest[:-1] + ["", rest[-1], ""]
    return "\n".join(lines).replace(os.path.dirname(os.path.abspath(results)) + "/", "")


def main(argv=None):
    args = parse_args(argv)
    if args.examples:
        with open(args.examples, "w") as f:
            f.write(examples(args.results))
        print(f"size: wrote {args.examples}")
        return 0
    print("\n".join(report(args)))
    return 0
