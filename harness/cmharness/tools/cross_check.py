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

Writes results/loadgen.md (--out) and, next to it, results/loadgen.json: the provenance (machine,
commit, load, the tree hash of each model's folder), every run, the ratios and the commands.
Loopback only; every run is bounded by --duration; the server is stopped on the way out.
Run with /usr/bin/python3 (Debian's), which this file names in its first line.
"""
import argparse
import dataclasses
import os
import shlex
import shutil
import sys
import tempfile

from cmharness import (ROOT, load, parsers, proc, processes, provenance, results,
                       servers, stats)
from cmharness.rounds import order as round_order

CLIENTS = ("wrk", "cm-load", "cm-load --spin-us 0")
NO_SPIN = CLIENTS[2]
#: How far cm-load / wrk may stray from 1 on the delay target.
DELAY_TOLERANCE = 0.05
RATIO = "{:.3f}"
PACE = ("The server is the bottleneck, so a client wins by what it costs the server per answer. "
        "A client asleep in `epoll_wait` when an answer arrives must be woken, and the server pays "
        "for the wake-up inside its `send`; cm-load polls without sleeping for `--spin-us` "
        "(100 µs) after each event, so while answers keep coming it is never asleep. wrk does "
        "more work per answer, so it sleeps less than a lean client that sleeps (the "
        "`--spin-us 0` row).")


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

def rounds(n):
    return f"{n} round" + ("" if n == 1 else "s")


def plaintext_verdict(ratio):
    """(passed, why) for cm-load / wrk on /plaintext: cm-load must not be measured slower, i.e.
    the interval reaches 1 (without an interval, the median alone must)."""
    if not ratio.has_interval:
        return ratio.estimate >= 1.0, f"no interval with {rounds(ratio.n)}, the median alone"
    if ratio.high < 1.0:
        return False, "cm-load measured slower than wrk: the whole interval lies below 1"
    if ratio.low > 1.0:
        return True, "cm-load measured faster than wrk: the whole interval lies above 1"
    return True, "no difference measured here: the interval holds 1"


def delay_verdict(ratio, tolerance=DELAY_TOLERANCE):
    """(passed, why) for cm-load / wrk on the delay target: the two agree within `tolerance` when
    the whole interval lies within [1 - tolerance, 1 + tolerance] (the median alone without one)."""
    low, high = (ratio.low, ratio.high) if ratio.has_interval else (ratio.estimate, ratio.estimate)
    bounds = f"[{1 - tolerance:g}, {1 + tolerance:g}]"
    what = "the interval" if ratio.has_interval else \
        f"the median (no interval with {rounds(ratio.n)})"
    if 1 - tolerance <= low and high <= 1 + tolerance:
        return True, f"within {tolerance:.0%}: {what} lies within {bounds}"
    return False, f"not within {tolerance:.0%}: {what} reaches outside {bounds}"


def ratios_to_wrk(results):
    """{target: {client: Estimate of its rps / wrk's rps, paired by round}}, wrk left out."""
    out = {}
    for path, runs in results.items():
        wrk = [r.rps for r in runs["wrk"]]
        out[path] = {}
        for tool in CLIENTS[1:]:
            ratio = stats.paired_ratio([r.rps for r in runs[tool]], wrk)
            out[path][tool] = ratio or stats.Estimate(float("nan"), None, None, 0)  # no pair
    return out


# -- running the clients ------------------------------------------------------------------------

class Clients:
    """Runs each client on the server, pinned to the clients' CPUs, reading the server's CPU
    around every run."""

    def __init__(self, server, args, bin_dir, cpus, workdir):
        self.server, self.args, self.bin_dir, self.cpus = server, args, bin_dir, cpus
        self.json_path = os.path.join(workdir, "out.json")

    def wrk_argv(self, url, duration_s):
        return ["wrk", "-t", str(self.args.threads), "-c", str(self.args.connections),
                "-d", f"{duration_s}s", "--latency", url]

    def cm_load_argv(self, url, duration_s, extra=()):
        return load.command(url, connections=self.args.connections, threads=self.args.threads,
                            duration_s=duration_s, warmup_s=0, json_path=self.json_path,
                            extra=extra, bin_dir=self.bin_dir)

    def shown(self, argv):
        """A command as the page shows it: the repository's paths relative, out.json, PORT."""
        words = [os.path.relpath(a, ROOT) if a.startswith(ROOT + "/") else a for a in argv]
        text = shlex.join(words).replace(self.json_path, "out.json")
        return text.replace(f"127.0.0.1:{self.server.port}", "127.0.0.1:PORT")

    def run(self, tool, path):
        url = self.server.url(path)
        if tool == "wrk":
            argv = self.wrk_argv(url, self.args.duration)
        else:
            argv = self.cm_load_argv(url, self.args.duration,
                                     ("--spin-us", "0") if tool == NO_SPIN else ())
        if os.path.exists(self.json_path):
            os.remove(self.json_path)
        cpu0 = self.server.cpu_seconds()
        done = processes.run(argv, self.cpus, timeout=self.args.duration + 60)
        server_busy = (self.server.cpu_seconds() - cpu0) / done.wall_s
        if tool == "wrk":
            w = parsers.parse_wrk(done.stdout)
            return ClientRun(w["rps"], w["latency_ms"].get(50), w["latency_ms"].get(99),
                             sum(w["errors"].values()),
                             done.cpu_s / done.wall_s / self.args.threads, None, server_busy,
                             self.shown(argv))
        r = load.LoadResult.read(self.json_path)
        window = r.duration_s * r.threads
        return ClientRun(r.rps, r.latency_us.p50 / 1e3, r.latency_us.p99 / 1e3, r.errors_total,
                         r.client_work_s / window if window else 0.0,
                         r.client_spin_s / window if window else 0.0, server_busy,
                         self.shown(argv))

    def syscalls_per_answer(self, path, workdir):
        """Each client once more, 2 s under `strace -f -c`: system calls per answer, by name.
        strace slows both clients, so only the ratios mean anything; wrk's -d is whole seconds."""
        url, found = self.server.url(path), {}
        for tool in ("wrk", "cm-load"):
            trace = os.path.join(workdir, f"strace-{tool}.txt")
            argv = self.wrk_argv(url, 2) if tool == "wrk" else self.cm_load_argv(url, 2)
            done = processes.run(["strace", "-f", "-c", "-o", trace, *argv], self.cpus, timeout=60)
            if tool == "wrk":
                answers = parsers.parse_wrk(done.stdout)["requests"]
            else:
                answers = load.LoadResult.read(self.json_path).responses_total
            with open(trace) as f:
                found[tool] = per_answer(parsers.parse_strace(f.read())[0], answers)
        return found


def measure(clients, targets, runs):
    """{target: {client: [ClientRun, one per round]}}, the order reversed every other round."""
    results = {path: {tool: [] for tool in CLIENTS} for path in targets}
    for path in targets:
        for i in range(runs):
            for tool in round_order(CLIENTS, i, runs, "alternate"):
                r = clients.run(tool, path)
                results[path][tool].append(r)
                print(f"cross-check: {path:<14} {tool:<20} round {i + 1}: {r.rps:>10,.0f} rps, "
                      f"{r.errors} errors", file=sys.stderr)
    return results


# -- the page -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """Everything a page of results says: what ran, where, and what it measured."""

    args: argparse.Namespace
    invoked: str
    model: str
    server_threads: int
    server_command: str
    pinning: str
    prov: dict
    ended_utc: str
    load_after: tuple
    results: dict  # target -> client -> [ClientRun]
    syscalls: "dict | None"
    wrk_version: str

    @property
    def targets(self):
        return list(self.results)

    @property
    def ratios(self):
        return ratios_to_wrk(self.results)

    def verdicts(self):
        plain, delay = self.targets
        return {plain: plaintext_verdict(self.ratios[plain]["cm-load"]),
                delay: delay_verdict(self.ratios[delay]["cm-load"])}

    def passed(self):
        return all(ok for ok, _ in self.verdicts().values())


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def mean(runs, key):
    return sum(getattr(r, key) for r in runs) / len(runs)


def rps_median(runs):
    return stats.estimate([r.rps for r in runs]).format("{:,.0f}")


def verdict_lines(o):
    """The "## Verdict" section: the paired ratios, pass or fail, and who sets the pace."""
    plain, delay = o.targets
    ratios, verdicts, res = o.ratios, o.verdicts(), o.results
    ceiling = o.args.connections / (o.args.delay / 1000)
    lines = ["## Verdict", "",
             f"cm-load / wrk is the median over {rounds(o.args.runs)} of the ratio of their rps in "
             "the same round, with its 95% interval `[low high]`; rps are medians over the rounds."]
    lines.append("")
    for path, extra in ((plain, ""), (delay, f"; the ceiling connections / delay is "
                                             f"{fmt(ceiling, 0)} rps")):
        ok, why = verdicts[path]
        lines.append(f"- `{path}`: cm-load / wrk = {ratios[path]['cm-load'].format(RATIO)}: "
                     f"**{'pass' if ok else 'FAIL'}** ({why}). cm-load "
                     f"{rps_median(res[path]['cm-load'])} rps, wrk {rps_median(res[path]['wrk'])} "
                     f"rps{extra}.")
    lines.append(f"- Without its polling (`--spin-us 0`), cm-load / wrk = "
                 f"{ratios[plain][NO_SPIN].format(RATIO)} on `{plain}`, "
                 f"{ratios[delay][NO_SPIN].format(RATIO)} on `{delay}`.")
    busy = {t: (mean(res[plain][t], "server_busy"), mean(res[plain][t], "client_busy"))
            for t in CLIENTS}
    lines += ["", f"Who sets the pace on `{plain}`: the server's CPU was "
              f"{busy['wrk'][0]:.0%} busy under wrk, {busy['cm-load'][0]:.0%} under cm-load and "
              f"{busy[NO_SPIN][0]:.0%} under cm-load --spin-us 0 (means of the runs), while the "
              f"clients' own work took {busy['wrk'][1]:.0%}, {busy['cm-load'][1]:.0%} and "
              f"{busy[NO_SPIN][1]:.0%} of theirs. " + PACE]
    return lines


def conditions_lines(o, json_name):
    """The "## Conditions" section: provenance.conditions_markdown and what this tool adds."""
    m, a = o.prov["machine"], o.args
    lines = provenance.conditions_markdown(
        o.prov, ended_utc=o.ended_utc, load_after=o.load_after, pinning=o.pinning,
        command=o.invoked, machine_extra=f"; {m['compiler']}; {o.wrk_version}")
    lines += [f"- Build: `{os.path.relpath(a.build_dir, ROOT)}` ({m['build_type']}).",
              f"- Server: `{o.server_command}` (model {o.model}, {o.server_threads} threads).",
              f"- Clients: {a.connections} connections, {a.threads} thread(s), {a.duration} s per "
              f"run, {rounds(a.runs)} per target, each running every client once, the order "
              "reversed every other round.",
              "- cm-load runs with `--warmup 0`, like wrk, which has no warm-up; cm-load checks "
              "every answer (status, body, never early), wrk only counts non-2xx/3xx and socket "
              "errors.",
              f"- Provenance (machine, commit, the tree hash of each model's folder) and every "
              f"run: [`{json_name}`]({json_name})."]
    if a.note:
        lines.append(f"- Note: {a.note}")
    return lines


def runs_lines(o):
    """The "## Runs" table: every run, with its ratio to wrk's run of the same round."""
    lines = ["## Runs", "",
             "Client CPU busy is the client's CPU time over the run's wall time (cm-load's "
             "without its idle polling, which is shown apart); server CPU busy is the server's, "
             "from `/proc`.", "",
             "| target | client | round | rps | / wrk's | p50 latency | p99 latency | errors "
             "| client CPU busy | idle polling | server CPU busy |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path, runs in o.results.items():
        for tool in CLIENTS:
            for i, r in enumerate(runs[tool]):
                ratio = r.rps / runs["wrk"][i].rps if runs["wrk"][i].rps else None
                spin = "n/a" if r.client_spin is None else f"{r.client_spin:.0%}"
                lines.append(f"| `{path}` | {tool} | {i + 1} | {fmt(r.rps, 0)} | {fmt(ratio, 3)} "
                             f"| {fmt(r.p50_ms, 3)} ms | {fmt(r.p99_ms, 3)} ms | {r.errors} "
                             f"| {r.client_busy:.0%} | {spin} | {r.server_busy:.0%} |")
    return lines


def syscall_lines(syscalls, path):
    w, c = syscalls["wrk"], syscalls["cm-load"]
    names = sorted(set(w) | set(c), key=lambda n: -max(w.get(n, 0), c.get(n, 0)))
    lines = [f"## System calls per answer (`{path}`, under `strace -f -c`)", "",
             "Why cm-load costs the client no more than wrk: one `read` and one `send` per "
             "answer, and the epoll set is left alone; wrk adds and removes write interest around "
             "every request. (strace slows both clients; only these ratios are meaningful, not "
             "its rates.)", "",
             "| system call | wrk | cm-load |", "| --- | ---: | ---: |"]
    lines += [f"| `{n}` | {w.get(n, 0):.2f} | {c.get(n, 0):.2f} |" for n in names]
    lines.append(f"| total | {sum(w.values()):.2f} | {sum(c.values()):.2f} |")
    return lines


def markdown(o, json_name):
    """The whole of results/loadgen.md."""
    lines = ["# cm-load against wrk", "",
             "The cross-check: `cm-load` and `wrk` (a load generator nobody here "
             "wrote) on the same targets of the same server, with the same connections, threads "
             "and duration. cm-load must not be measured slower than wrk on `/plaintext` and must "
             "agree with it within 5% on the fixed delay.", "",
             f"Regenerate: `{o.invoked}` (builds `{os.path.relpath(o.args.build_dir, ROOT)}` if "
             "needed).", ""]
    lines += verdict_lines(o) + [""] + conditions_lines(o, json_name) + [""] + runs_lines(o)
    if o.syscalls:
        lines += [""] + syscall_lines(o.syscalls, o.targets[0])
    lines += ["", "## Commands (one run of each)", "", "```"]
    lines += [o.results[path][tool][0].command for path in o.targets for tool in CLIENTS]
    if o.syscalls:
        lines += ["# system calls per answer: each client once more, 2 s, as above but under",
                  "strace -f -c -o FILE <client command with -d 2 / --duration 2>"]
    return "\n".join(lines + ["```", ""])


def record(o):
    """results/loadgen.json: the provenance, the settings, the ratios, the verdicts, every run."""
    a = o.args
    return {
        "tool": "harness/cross-check", "command": o.invoked, "provenance": o.prov,
        "ended_utc": o.ended_utc, "load_average_after": list(o.load_after),
        "settings": {"model": o.model, "server_threads": o.server_threads,
                     "connections": a.connections, "threads": a.threads,
                     "duration_s": a.duration, "delay_ms": a.delay, "rounds": a.runs},
        "server_command": o.server_command, "pinning": o.pinning, "wrk": o.wrk_version,
        "ratios_to_wrk": {p: {t: e.to_json() for t, e in r.items()} for p, r in o.ratios.items()},
        "verdicts": {p: {"passed": ok, "why": why} for p, (ok, why) in o.verdicts().items()},
        "runs": {p: {t: [dataclasses.asdict(r) for r in rs] for t, rs in runs.items()}
                 for p, runs in o.results.items()},
        "syscalls_per_answer": o.syscalls,
    }


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
    """Starts the server, runs every round (and the strace count); an Outcome."""
    server_cpus, client_cpus = proc.split_cpus(1)
    prov = provenance.provenance(bin_dir)
    workdir = tempfile.mkdtemp(prefix="cross-check-")
    try:
        with servers.Server(model, cpus=server_cpus, threads=server_threads,
                            bin_dir=bin_dir) as server:
            clients = Clients(server, args, bin_dir, client_cpus, workdir)
            targets = ["/plaintext", f"/delay/{args.delay}"]
            results = measure(clients, targets, args.runs)
            syscalls = None
            if not args.no_syscalls and shutil.which("strace"):
                syscalls = clients.syscalls_per_answer("/plaintext", workdir)
            shown = clients.shown(server.command[:-2])  # without --port-file PATH
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    invoked = "harness/cross-check " + shlex.join(sys.argv[1:])
    pinning = proc.pinning_line(server_cpus, client_cpus, "cm-server", "the clients")
    wrk = provenance.first_line(["wrk", "-v"]) or "wrk: unknown version"
    return Outcome(args, invoked.strip(), model, server_threads, shown, pinning, prov,
                   provenance.utc_now(), proc.load_average(), results, syscalls, wrk)


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

    outcome = run_all(args, bin_dir, model, server_threads)
    json_name = os.path.basename(results.json_beside(args.out))
    # harness/tsung-check writes its own section of the page: kept as it is.
    json_path = results.write_page(args.out, markdown(outcome, json_name), record(outcome),
                                   keep_blocks=("tsung-check",))
    print("\n".join(verdict_lines(outcome)[4:7]))  # the three verdicts
    print(f"cross-check: wrote {os.path.relpath(args.out)} and {os.path.relpath(json_path)}",
          file=sys.stderr)
    return 0 if outcome.passed() else 1
