"""cross-check -- cm-load against wrk, a load generator nobody here wrote, on the same targets.

    harness/cross-check             # build (release) if needed, run, write results/loadgen.md
    harness/cross-check --model blocking --connections 200 --duration 10 --runs 9
    harness/cross-check --no-build --duration 1 --runs 1 --no-syscalls --out /tmp/lg.md  # smoke

Starts one cm-server through cmharness.servers.Server (asio_coro when it was built, else blocking;
--model to choose), then runs wrk and cm-load, in turn, on the same targets with the same
connections, threads and duration:
  - /plaintext: the server answers at once, so this is the highest rate either client can drive;
  - /delay/10 (--delay): a fixed delay, so the rate is set by connections / delay and both
    clients must agree on it.
With two or more CPUs the server is pinned to the first and the clients to the others.

A round runs every client once on a target, the order reversed every other round (so wrk runs
right before cm-load in one round and right after it in the next). The machine's speed drifts
between rounds (on the 2-CPU VM of results/loadgen.md, /plaintext flips between about 120k and
145k rps for either client), so the figure is a ratio taken within the round: the median over the
rounds of cm-load's rps / wrk's rps, with its 95% distribution-free interval
(cmharness.stats.paired_ratio; an interval needs at least 6 rounds, --runs is 7 by default).

The acceptance (issue 6): on /plaintext cm-load is not measured slower than wrk (the interval of
the ratio reaches 1); on the delay target the two agree within 5% (the whole interval lies within
[0.95, 1.05]). A third client, cm-load --spin-us 0 (sleeping in epoll_wait between answers), shows
what cm-load's polling buys: each run also records the client's CPU (cm-load's without its idle
polling) and the server's, read from /proc. Exit status 0 when both checks pass.

Writes results/loadgen.json (beside --out): the provenance (machine, commit, load, the tree hash
of each model's folder), every run, the ratios and the commands; and from it results/loadgen.md
(--out; cmharness.loadgen), keeping the section harness/tsung-check wrote there.
Loopback only; every run is bounded by --duration; the server is stopped on the way out.
Run with /usr/bin/python3 (Debian's), which this file names in its first line.
"""
import argparse
import dataclasses
import functools
import os
import shutil
import sys
import tempfile

from cmharness import ROOT, load, loadgen, parsers, proc, processes, provenance, results, \
    servers, stats
from cmharness.loadgen import CLIENTS, NO_SPIN, TSUNG_BLOCK, against_one, \
    cross_check_page, rounds_text, verdict_lines

#: How far cm-load / wrk may stray from 1 on the delay target.
DELAY_TOLERANCE = 0.05


@dataclasses.dataclass
class ClientRun:
    """One run of one client on one target, and what the server's CPU did meanwhile."""

    rps: float
    p50_ms: "float | None"
    p99_ms: "float | None"
    errors: int
    client_busy: float  # the client's CPU over (wall time x its threads); cm-load's without polling
    client_spin: "float | None"  # cm-load's idle polling, the same unit; None for wrk
    server_busy: float  # the server's CPU over the run's wall time
    command: str


# -- what strace counted ------------------------------------------------------------------------

def per_answer(calls, answers, floor=0.01):
    """Calls per answer of each system call made at least `floor` times per answer."""
    return {name: n / answers for name, n in calls.items() if n / answers >= floor}


# -- the verdicts -------------------------------------------------------------------------------

PLAINTEXT_WHY = {  # where the interval of cm-load / wrk lies against 1 -> (passed, why)
    "lower": (False, "cm-load measured slower than wrk: the whole interval lies below 1"),
    "higher": (True, "cm-load measured faster than wrk: the whole interval lies above 1"),
    "no difference measured here": (True, "no difference measured here: the interval holds 1"),
}


def plaintext_verdict(ratio):
    """(passed, why) for cm-load / wrk on /plaintext: cm-load must not be measured slower, i.e.
    the interval reaches 1 (without an interval, the median alone must)."""
    if not ratio.has_interval:
        return ratio.estimate >= 1.0, f"no interval with {rounds_text(ratio.n)}, the median alone"
    return PLAINTEXT_WHY[against_one(ratio)]


def delay_verdict(ratio, tolerance=DELAY_TOLERANCE):
    """(passed, why) for cm-load / wrk on the delay target: the two agree within `tolerance` when
    the whole interval lies within [1 - tolerance, 1 + tolerance] (the median alone without one)."""
    low, high = (ratio.low, ratio.high) if ratio.has_interval else (ratio.estimate, ratio.estimate)
    bounds = f"[{1 - tolerance:g}, {1 + tolerance:g}]"
    what = "the interval" if ratio.has_interval else \
        f"the median (no interval with {rounds_text(ratio.n)})"
    if 1 - tolerance <= low and high <= 1 + tolerance:
        return True, f"within {tolerance:.0%}: {what} lies within {bounds}"
    return False, f"not within {tolerance:.0%}: {what} reaches outside {bounds}"


def ratios_to_wrk(found):
    """{target: {client: Estimate of its rps / wrk's rps, paired by round}}, wrk left out."""
    out = {}
    for path, runs in found.items():
        wrk = [r.rps for r in runs["wrk"]]
        out[path] = {}
        for tool in CLIENTS[1:]:
            ratio = stats.paired_ratio([r.rps for r in runs[tool]], wrk)
            out[path][tool] = ratio or stats.Estimate(float("nan"), None, None, 0)  # no pair
    return out


def record(args, found, syscalls, *, command, prov, ended_utc, load_after, model,
           server_threads, server_command, pinning, wrk):
    """results/loadgen.json, all its page is written from (loadgen.cross_check_page): the
    provenance, the settings, the ratios, the verdicts, every run (`found`: {target: {client:
    [ClientRun per round]}}), the system calls per answer (None when not counted)."""
    ratios = ratios_to_wrk(found)
    plain, delay = ratios
    verdicts = {plain: plaintext_verdict(ratios[plain]["cm-load"]),
                delay: delay_verdict(ratios[delay]["cm-load"])}
    return {
        "tool": "harness/cross-check", "command": command, "provenance": prov,
        "ended_utc": ended_utc, "load_average_after": list(load_after),
        "settings": {"model": model, "server_threads": server_threads,
                     "connections": args.connections, "threads": args.threads,
                     "duration_s": args.duration, "delay_ms": args.delay, "rounds": args.runs,
                     "build_dir": os.path.relpath(args.build_dir, ROOT), "note": args.note},
        "server_command": server_command, "pinning": pinning, "wrk": wrk,
        "ratios_to_wrk": {p: {t: e.to_json() for t, e in r.items()} for p, r in ratios.items()},
        "verdicts": {p: {"passed": ok, "why": why} for p, (ok, why) in verdicts.items()},
        "runs": {p: {t: [dataclasses.asdict(r) for r in rs] for t, rs in runs.items()}
                 for p, runs in found.items()},
        "syscalls_per_answer": syscalls,
    }


# -- running the clients ------------------------------------------------------------------------

class Clients:
    """Runs each client on the server, pinned to the clients' CPUs, reading the server's CPU
    around every run."""

    def __init__(self, server, args, bin_dir, cpus, workdir):
        self.server, self.args, self.bin_dir, self.cpus = server, args, bin_dir, cpus
        self.json_path = os.path.join(workdir, "out.json")

    def argv(self, tool, path, duration_s):
        """The command of one run of a client on the target `path`, `duration_s` long."""
        url = self.server.url(path)
        if tool == "wrk":
            return ["wrk", "-t", str(self.args.threads), "-c", str(self.args.connections),
                    "-d", f"{duration_s}s", "--latency", url]
        return load.command(url, connections=self.args.connections, threads=self.args.threads,
                            duration_s=duration_s, warmup_s=0, json_path=self.json_path,
                            extra=("--spin-us", "0") if tool == NO_SPIN else (),
                            bin_dir=self.bin_dir)

    def shown(self, argv):
        return loadgen.shown(argv, self.server.port, self.json_path)

    def run(self, tool, path):
        argv = self.argv(tool, path, self.args.duration)
        timeout = self.args.duration + 60
        cpu0 = self.server.cpu_seconds()
        if tool == "wrk":
            done = processes.run(argv, self.cpus, timeout=timeout)
        else:
            r, done = loadgen.run_cm_load(argv, self.json_path, self.cpus, timeout)
        server_busy = (self.server.cpu_seconds() - cpu0) / done.wall_s
        if tool == "wrk":
            w = parsers.parse_wrk(done.stdout)
            return ClientRun(w["rps"], w["latency_ms"].get(50), w["latency_ms"].get(99),
                             sum(w["errors"].values()),
                             done.cpu_s / done.wall_s / self.args.threads, None, server_busy,
                             self.shown(argv))
        window = r.duration_s * r.threads
        return ClientRun(r.rps, r.latency_us.p50 / 1e3, r.latency_us.p99 / 1e3, r.errors_total,
                         r.client_work_s / window if window else 0.0,
                         r.client_spin_s / window if window else 0.0, server_busy,
                         self.shown(argv))

    def syscalls_per_answer(self, path, workdir):
        """Each client once more, 2 s under `strace -f -c`: system calls per answer, by name.
        strace slows both clients, so only the ratios mean anything; wrk's -d is whole seconds."""
        found = {}
        for tool in ("wrk", "cm-load"):
            trace = os.path.join(workdir, f"strace-{tool}.txt")
            argv = ["strace", "-f", "-c", "-o", trace, *self.argv(tool, path, 2)]
            if tool == "wrk":
                done = processes.run(argv, self.cpus, timeout=60)
                answers = parsers.parse_wrk(done.stdout)["requests"]
            else:
                answers = loadgen.run_cm_load(argv, self.json_path, self.cpus, 60)[0] \
                    .responses_total
            with open(trace) as f:
                found[tool] = per_answer(parsers.parse_strace(f.read())[0], answers)
        return found


def progress(path, tool, i, r):
    print(f"cross-check: {path:<14} {tool:<20} round {i}: {r.rps:>10,.0f} rps, "
          f"{r.errors} errors", file=sys.stderr)


def measure(clients, targets, runs):
    """{target: {client: [ClientRun, one per round]}}, the order reversed every other round."""
    return {path: loadgen.in_rounds(CLIENTS, runs, functools.partial(clients.run, path=path),
                                    functools.partial(progress, path))
            for path in targets}


# -- main ---------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries as they are")
    ap.add_argument("--model", default="auto",
                    help="cm-server model (auto: asio_coro if built, else blocking)")
    ap.add_argument("--server-threads", type=int, default=0,
                    help="cm-server --threads (default: 1 loop for an async model; one worker per "
                         "connection for blocking, which serves a connection until it closes)")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="client threads, for both clients")
    ap.add_argument("--duration", type=int, default=3, help="seconds per run")
    ap.add_argument("--delay", type=int, default=10, help="ms of the fixed delay target")
    ap.add_argument("--runs", type=int, default=7,
                    help="rounds per target, each running every client once; the median of the "
                         "rounds' ratios counts, with a 95%% interval from 6 rounds on")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "loadgen.md"))
    ap.add_argument("--note", default="",
                    help="a line about the conditions, written into the result")
    ap.add_argument("--no-syscalls", action="store_true",
                    help="skip the strace count of system calls per answer")
    return ap.parse_args(argv)


def build(build_dir):
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        print(f"cross-check: configuring {build_dir} (Release)", file=sys.stderr)
        processes.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                       "-DCMAKE_BUILD_TYPE=Release"])
    print(f"cross-check: building cm-server and cm-load in {build_dir}", file=sys.stderr)
    processes.run(["cmake", "--build", build_dir, "--target", "cm-server", "cm-load"])


def run_all(args, bin_dir, model, server_threads):
    """Starts the server, runs every round (and the strace count); the record (record())."""
    server_cpus, client_cpus = proc.split_cpus(1)
    prov = provenance.provenance(bin_dir)
    workdir = tempfile.mkdtemp(prefix="cross-check-")
    try:
        with servers.Server(model, cpus=server_cpus, threads=server_threads,
                            bin_dir=bin_dir) as server:
            clients = Clients(server, args, bin_dir, client_cpus, workdir)
            found = measure(clients, ["/plaintext", f"/delay/{args.delay}"], args.runs)
            syscalls = None
            if not args.no_syscalls and shutil.which("strace"):
                syscalls = clients.syscalls_per_answer("/plaintext", workdir)
            shown = clients.shown(server.command[:-2])  # without --port-file PATH
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return record(args, found, syscalls, command=loadgen.invocation("cross-check"), prov=prov,
                  ended_utc=provenance.utc_now(), load_after=proc.load_average(), model=model,
                  server_threads=server_threads, server_command=shown,
                  pinning=proc.pinning_line(server_cpus, client_cpus, "cm-server", "the clients"),
                  wrk=provenance.first_line(["wrk", "-v"]) or "wrk: unknown version")


def main():
    args = parse_args()
    processes.install_signal_handlers()
    if not args.no_build:
        build(args.build_dir)
    bin_dir = os.path.join(args.build_dir, "bin")
    for name in ("cm-server", "cm-load"):
        if not os.access(os.path.join(bin_dir, name), os.X_OK):
            sys.exit(f"cross-check: {bin_dir}/{name} is missing (build it, or drop --no-build)")
    model = args.model
    if model == "auto":
        model = "asio_coro" if "asio_coro" in servers.built_models(bin_dir) else "blocking"
    server_threads = args.server_threads or (args.connections if model == "blocking" else 1)

    doc = run_all(args, bin_dir, model, server_threads)
    json_name = os.path.basename(results.json_beside(args.out))
    # harness/tsung-check writes its own section of the page: kept as it is.
    json_path = results.write_page(args.out, cross_check_page(doc, json_name), doc,
                                   keep_blocks=(TSUNG_BLOCK,))
    print("\n".join(verdict_lines(doc)[4:7]))  # the three verdicts
    print(f"cross-check: wrote {os.path.relpath(args.out)} and {os.path.relpath(json_path)}",
          file=sys.stderr)
    return 0 if all(v["passed"] for v in doc["verdicts"].values()) else 1
