"""cm-price -- runs a profile across the models and prices each against its ceilings.

    build/bin/cm-price quick                         # what `make compare` runs
    build/bin/cm-price delay-sweep --connections 1000,4000
    build/bin/cm-price arena --connections 30000 --server-cpus 32   # a bigger machine
    build/bin/cm-price latency                       # open loop at 10-110% of each row's capacity:
                                                     #   latency against load (cmharness/latency.py)
    build/bin/cm-price verify quick                  # rerun, and say of each committed claim:
                                                     #   holds, changed, or noise
    build/bin/cm-price check                         # no committed row above its ceiling
    build/bin/cm-price compare A/results.json B/results.json   # do two runs agree?
    build/bin/cm-price reruns quick                  # results.md's section on reruns of its code
    build/bin/cm-price render quick                  # results.md again from results.json (the
                                                     # page's writer changed, not what was measured)

A run validates every server (as HttpArena does), then measures in rounds (harness/cmharness/
price.py says how: servers kept running, ceilings back to back, random order each round), and
writes results/<profile>/: results.md (claims as `estimate [low high]`), results.json, results.csv,
machine.md, charts. Every comparative figure is the median over the rounds of a ratio taken within
a round, with a distribution-free 95% interval (harness/cmharness/stats.py).

verify reruns the profile with the committed run's settings into a scratch folder, compares every
claim with the committed one, appends a record (with the tree hashes it verified) to
results/<profile>/verifications.json, and exits 0 only when every claim holds.
Exit status: 0 done, 1 a server or a row failed (or a claim did not hold), 2 a usage error.
"""

import argparse
import dataclasses
import os
import shlex
import shutil
import sys
import tempfile

from cmharness import ROOT, default_bin_dir, processes, proc, profiles, provenance
from cmharness import database, latency, latency_report, report, results
from cmharness.latency import LatencyRunner
from cmharness.price import (ABOVE_TOLERANCE, MAX_CEILING_WINDOWS, Runner, Settings,
                             plan_targets)
from cmharness.servers import built_models


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="cm-price", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    known = sorted(n[:-len(".json")] for n in os.listdir(profiles.PROFILES_DIR)
                   if n.endswith(".json"))
    ap.add_argument("profile", help=f"a name in harness/profiles/ ({', '.join(known)}) or a file")
    ap.add_argument("--models", default="", help="only these models (and peers), comma-separated")
    ap.add_argument("--connections", default="", help="connections of the sweep rows: 100,1000")
    ap.add_argument("--delay", default="", help="delays of the sweep rows (ms or A:B): 100,10:90")
    ap.add_argument("--rounds", type=int, help="rounds (default: the profile's)")
    ap.add_argument("--max-rounds", type=int, help="more rounds, up to this many, for a row whose "
                    "interval is still too wide to tell a change from the noise (default: the "
                    "profile's; verify: the larger of the committed run's and the profile's)")
    ap.add_argument("--duration", type=float, help="measured seconds of each row's window "
                    "(a variant's min_duration_s, where longer)")
    ap.add_argument("--warmup", type=float, help="warm-up seconds before each row's window")
    ap.add_argument("--timeout", type=int, help="cm-load --timeout in ms")
    ap.add_argument("--blocking-workers", type=int, help="the blocking model's --threads")
    ap.add_argument("--pool", type=int, help="the async models' --blocking-threads")
    ap.add_argument("--loops", type=int, help="the async models' --threads (default: server CPUs)")
    ap.add_argument("--server-cpus", type=int, help="CPUs for the server (default: half)")
    ap.add_argument("--load-threads", type=int, help="cm-load --threads (default: its CPUs)")
    ap.add_argument("--connections-per-load", type=int, help="connections one cm-load process "
                    "holds (default 19,000: the open-files limit); a row with more is spread over "
                    "several, measuring one window, merged")
    ap.add_argument("--peers", choices=("on", "off"), default="on")
    ap.add_argument("--seed", type=int, help="the random order of the rounds (default: random)")
    ap.add_argument("--out", help="results folder (default: <repo>/results)")
    ap.add_argument("--bin-dir", help="where cm-server and cm-load are (default: next to cm-price)")
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("--keep-work", action="store_true", help="keep the scratch folder")
    ap.add_argument("--note", default="", help="the conditions of the run, written into results.md")
    return ap.parse_args(argv)


def bin_dir_of(args):
    if args.bin_dir:
        return args.bin_dir
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    return here if os.path.exists(os.path.join(here, "cm-server")) else default_bin_dir()


def build_profile(args):
    p = profiles.load(args.profile)
    split = (lambda s: [x for x in s.split(",") if x])
    return profiles.apply_overrides(
        p, connections=[int(c) for c in split(args.connections)] or None,
        delays=split(args.delay) or None, rounds=args.rounds, max_rounds=args.max_rounds,
        duration_s=args.duration,
        warmup_s=args.warmup, timeout_ms=args.timeout, blocking_workers=args.blocking_workers,
        pool=args.pool, loops=args.loops, server_cpus=args.server_cpus,
        load_threads=args.load_threads, connections_per_load=args.connections_per_load)


def settings_for(p, args, work_dir):
    server_cpus, load_cpus = proc.split_cpus(p.server_cpus)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    return Settings(bin_dir=bin_dir_of(args), work_dir=work_dir, server_cpus=server_cpus,
                    load_cpus=load_cpus, loops=p.loops or len(server_cpus),
                    load_threads=p.load_threads or len(load_cpus), seed=seed)


def method(p, s):
    pin = (f"Server on CPU {proc.cpu_list(s.server_cpus)}, cm-load on CPU "
           f"{proc.cpu_list(s.load_cpus)} (sched_setaffinity)") if s.server_cpus != s.load_cpus \
        else "One CPU: server and cm-load not pinned apart"
    fresh = "a freshly started server" if p.fresh_server else "the same running server"
    shortcut = "" if p.ceiling_at_row_connections else (
        f" (unless the sprint's is more than {p.ceiling_margin:g} times the row's lowest other "
        "ceiling, so it cannot bind)")
    memory = (f" Before the rounds, bytes per waiting request on fresh servers: {p.memory_waiting:,}"
              f" requests left waiting in each async model and peer, one per worker in the "
              f"blocking model (servers of 1 and {p.blocking_workers} workers)."
              if p.memory_waiting else "")
    return (f"{pin}. The servers in a new random order in every round (seed {s.seed}). In each of "
            f"{p.ceiling_rounds} sprints every server's CPU ceiling is measured in a "
            f"{p.ceiling_warmup_s:g} s + {p.ceiling_duration_s:g} s window, one server after "
            "another (ratios to a peer are taken within a sprint); in each of "
            f"{p.rounds} rounds, each other row, server by server: the server's CPU "
            "ceiling again, back to back on the same server process"
            f"{' with as many connections as the row' if p.ceiling_at_row_connections else ''}"
            f"{shortcut}, then the row itself ({p.warmup_s:g} s warm-up plus a random phase within "
            f"one delay, then {p.duration_s:g} s measured, on {fresh}), then the CPU ceiling once "
            f"more (and up to {MAX_CEILING_WINDOWS} windows in all while the row answered above "
            "the largest so far): the row is priced against the largest, and a round still above "
            f"its ceiling by more than {ABOVE_TOLERANCE:.1%} is a defect, not counted."
            + "".join(f" The rows of {v.name} are measured for {p.window_s(v):g} s."
                      for v in p.variants if p.window_s(v) > p.duration_s)
            + (f" A row whose efficiency interval is still wider than half its estimate gets "
               f"more rounds, up to {p.max_rounds}." if p.max_rounds > p.rounds else "")
            + memory)


def meta_for(p, s, args, runner_orders=None):
    return {
        "profile": p.name, "description": p.description, "summary": p.summary, "chart": p.chart,
        "published": p.published,
        "command": " ".join(shlex.quote(a) for a in ["build/bin/cm-price", *sys.argv[1:]]),
        "note": args.note, "profile_settings": _settings_json(p), "seed": s.seed,
        "server_cpus": proc.cpu_list(s.server_cpus), "load_cpus": proc.cpu_list(s.load_cpus),
        "server_cpu_count": len(s.server_cpus), "load_cpu_count": len(s.load_cpus),
        "loops": s.loops, "load_threads": s.load_threads, "blocking_workers": p.blocking_workers,
        "pool": p.pool, "rounds": p.rounds, "max_rounds": max(p.rounds, p.max_rounds),
        "ceiling_rounds": p.ceiling_rounds,
        "duration_s": p.duration_s, "warmup_s": p.warmup_s,
        "method": method(p, s), "round_orders": runner_orders or [],
    }


def _settings_json(p):
    d = dataclasses.asdict(p)
    d["rows"] = [dataclasses.asdict(r) for r in p.rows]
    return d


def profile_from_settings(d):
    """The Profile a committed run recorded (verify reruns exactly that)."""
    d = dict(d)
    d["variants"] = [profiles.Variant(**v) for v in d["variants"]]
    d["rows"] = [profiles.Row(**r) for r in d["rows"]]
    return profiles.Profile(**d)


def run_profile(p, args, out_dir):
    """Measures profile p and writes out_dir/<name>/; returns (document, failed)."""
    processes.install_signal_handlers()
    processes.raise_open_files()
    work = tempfile.mkdtemp(prefix="cm-price.")
    s = settings_for(p, args, work)
    # cm-price itself (its polling, its /proc reads) runs beside cm-load, never on the server's CPU.
    os.sched_setaffinity(0, s.load_cpus)
    built = built_models(s.bin_dir)
    only = [m for m in args.models.split(",") if m]
    targets, skipped = plan_targets(p, built, only, args.peers == "on", args.bin_dir)
    meta = meta_for(p, s, args)
    if p.kind == "latency":
        meta.update(method=latency_report.method(p, s), rates_percent=p.rates_percent)
    meta["started_utc"] = provenance.utc_now()
    meta["provenance"] = provenance.provenance(s.bin_dir)
    sprints = "" if p.kind == "latency" else f"{p.ceiling_rounds} sprints and "
    print(f"cm-price: profile {p.name}, {len(targets)} servers, {sprints}{p.rounds} rounds; "
          f"{meta['method'].split('.')[0]}", file=sys.stderr)
    if p.database:  # its processes beside cm-load's, never on the server's CPU
        s.db = database.Cluster(cpus=s.load_cpus)
        s.db.start()
        meta["database"] = s.db.describe()
    try:
        runner = (LatencyRunner if p.kind == "latency" else Runner)(p, s, targets).run()
    finally:
        if s.db is not None:
            s.db.stop()
    meta["finished_utc"] = provenance.utc_now()
    meta["load_after"] = list(proc.load_average())
    meta["round_orders"] = runner.orders
    folder = os.path.join(out_dir, p.name)
    if p.kind == "latency":
        doc = latency.document(runner, meta, skipped)
        note = latency_report.write(doc, folder)
    else:
        doc = results.document(runner, meta, skipped)
        note = results.write(doc, folder, report.markdown, results.csv_text(runner),
                             charts=not args.no_charts)
    if note:
        print(note, file=sys.stderr)
    if args.keep_work:
        print(f"scratch (logs, cm-load JSON): {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    failed = any(not t["priced"] for t in doc["targets"]) or any(
        m.get("error") for t in doc["targets"] for r in t["rows"] for m in r["rounds"])
    return doc, folder, failed


def main_run(argv):
    args = parse_args(argv)
    p = build_profile(args)
    doc, folder, failed = run_profile(p, args, args.out or os.path.join(ROOT, "results"))
    compact = latency_report.compact if p.kind == "latency" else report.compact
    print("\n" + compact(doc) + "\n")
    flagged = [c["id"] for c in doc["claims"] if c["above_ceiling"]]
    for c in flagged:
        print(f"above its ceiling (a measurement defect): {c}")
    print(f"results: {folder}/ (results.md, results.json, results.csv, machine.md)")
    return 1 if failed or flagged else 0


VERBS = ("verify", "check", "compare", "reruns", "render")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in VERBS:
        from cmharness import verify

        return verify.main(argv[0], argv[1:], run_profile, profile_from_settings, parse_args)
    try:
        return main_run(argv)
    except profiles.ProfileError as e:
        print(f"cm-price: {e}", file=sys.stderr)
        return 2
