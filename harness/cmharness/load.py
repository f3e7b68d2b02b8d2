"""cm-load, the C++ instrument: its command line, running it pinned, and LoadResult -- the one
reader of its JSON (harness/load/README.md says what each field means). No other module reads
cm-load's JSON by key.
"""

import dataclasses
import json
import os
import subprocess
import time

from . import default_bin_dir, processes


@dataclasses.dataclass
class Percentiles:
    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    max: float

    @classmethod
    def of(cls, d):
        return cls(*(float(d[k]) for k in ("mean", "p50", "p90", "p99", "p999", "max")))


@dataclasses.dataclass
class OpenLoop:
    """What an open-loop run (cm-load --rate) adds: the rate asked and kept, the requests due and
    how many went late, cm-load's own lag behind its schedule (harness/load/README.md, "Open loop")."""

    rate: float
    rate_ratio: float | None  # answered / due
    valid: bool  # cm-load kept its schedule (its own lag within bounds)
    late: int | None
    offered: int | None  # requests due in the window
    backlog_max: int | None
    pace_lag_us: dict  # cm-load's own lag behind the schedule: mean, p50, p99, ...
    unsent: int | None
    arrival: str | None  # constant or poisson

    @classmethod
    def of(cls, d):
        """From the "open_loop" object of cm-load's JSON; None for a closed-loop run."""
        if not d:
            return None
        return cls(rate=float(d["rate"]), rate_ratio=d.get("rate_ratio"), valid=d.get("valid", True),
                   late=d.get("late"), offered=d.get("offered"), backlog_max=d.get("backlog_max"),
                   pace_lag_us=d.get("pace_lag_us") or {}, unsent=d.get("unsent"),
                   arrival=d.get("arrival"))


#: What cm-load writes only so that runs can be merged (`cm-load merge`): every histogram bucket and
#: every connection's count, thousands of numbers a round. A results file keeps the figures.
MERGE_ONLY = ("histograms", "slot_answers")


@dataclasses.dataclass
class LoadResult:
    """One cm-load run, typed. Latencies and overshoots in microseconds, as cm-load writes them."""

    url: str
    connections_requested: int
    connections_open: int
    connect_failures: dict
    delay_mean_ms: float  # of --delay, 0 when the URL has no {ms}
    warmup_s: float
    duration_s: float
    requests: int
    rps: float
    errors: dict  # kind -> count: connect, reset, timeout, status, body, early
    errors_total: int
    reconnects: int
    connections_in_window: int
    starved_connections: int
    fairness_jain: float
    max_gap_ms: float
    latency_us: Percentiles
    overshoot_us: Percentiles
    client_cpu_s: float
    client_spin_s: float
    responses_total: int | None  # correct answers over the whole run (connect and warm-up too)
    unanswered_at_end: int  # requests sent, not answered when the run ended (0 after --drain)
    threads: int  # cm-load's --threads (its event loops)
    stagger_s: float  # how long the connections' first requests were spread over (--stagger)
    open_loop: OpenLoop | None
    kept: dict  # the JSON as a results file keeps it: all of it but MERGE_ONLY

    @classmethod
    def from_json(cls, d):
        """From cm-load's JSON document; KeyError / ValueError naming what is missing or wrong."""
        if d.get("tool") != "cm-load":
            raise ValueError("not cm-load's JSON (no \"tool\": \"cm-load\")")
        delay = d["delay_ms"]
        if delay is not None and not isinstance(delay, dict):
            raise ValueError("delay_ms is neither null nor an object")
        if not isinstance(d["connect_failures"], dict):
            raise ValueError("connect_failures is not an object")
        return cls(
            url=d["url"], connections_requested=int(d["connections_requested"]),
            connections_open=int(d["connections_open"]),
            connect_failures={k: int(v) for k, v in d["connect_failures"].items()},
            delay_mean_ms=float(delay["mean"]) if delay else 0.0,
            warmup_s=float(d["warmup_s"]), duration_s=float(d["duration_s"]),
            requests=int(d["requests"]), rps=float(d["rps"]),
            errors={k: int(v) for k, v in d["errors"].items()},
            errors_total=int(d["errors_total"]), reconnects=int(d.get("reconnects", 0)),
            connections_in_window=int(d["connections_in_window"]),
            starved_connections=int(d["starved_connections"]),
            fairness_jain=float(d["fairness_jain"]), max_gap_ms=float(d["max_gap_ms"]),
            latency_us=Percentiles.of(d["latency_us"]),
            overshoot_us=Percentiles.of(d["overshoot_us"]),
            client_cpu_s=float(d["client_cpu_s"]), client_spin_s=float(d.get("client_spin_s", 0)),
            responses_total=None if d.get("responses_total") is None else int(d["responses_total"]),
            unanswered_at_end=int(d.get("unanswered_at_end", 0)),
            threads=int(d.get("threads", 1)),
            stagger_s=float(d.get("stagger_ms") or 0) / 1000 if d.get("stagger") else 0.0,
            open_loop=OpenLoop.of(d.get("open_loop")),
            kept={k: v for k, v in d.items() if k not in MERGE_ONLY})

    @classmethod
    def read(cls, path):
        with open(path) as f:
            return cls.from_json(json.load(f))

    @property
    def served_connections(self):
        """Little's law: rps x mean latency, the connections that had a request in flight on
        average (a closed loop keeps one in flight on each connection it serves)."""
        return self.rps * self.latency_us.mean / 1e6

    @property
    def client_work_s(self):
        """cm-load's CPU in the window, less the polling with nothing to do (--spin-us)."""
        return max(0.0, self.client_cpu_s - self.client_spin_s)


def command(url, *, connections, threads=1, duration_s=2.0, warmup_s=1.0, timeout_ms=None,
            delay=None, stagger_ms=None, json_path=None, quiet=True, extra=(), bin_dir=None,
            body=None, drain=False):
    """The cm-load command line for one run. `stagger_ms` spreads the first requests (0: no
    stagger; None: with a delay, cm-load's own --stagger over the mean delay is not asked);
    `body`: each request a POST of it, its answer expected to carry it back (POST /echo);
    `drain`: after the window, wait for the answers in flight (every request sent is answered)."""
    argv = [os.path.join(bin_dir or default_bin_dir(), "cm-load"), url,
            "--connections", str(connections), "--threads", str(threads),
            "--duration", f"{duration_s:g}", "--warmup", f"{warmup_s:g}"]
    if timeout_ms is not None:
        argv += ["--timeout", str(int(timeout_ms))]
    if delay is not None:
        argv += ["--delay", str(delay)]
    if stagger_ms:
        argv += ["--stagger-ms", str(int(round(stagger_ms)))]
    if body is not None:
        argv += ["--body", body]
    if json_path:
        argv += ["--json", json_path]
    if drain:
        argv.append("--drain")
    if quiet:
        argv.append("--quiet")
    return argv + list(extra)


@dataclasses.dataclass
class LoadRun:
    """A run of cm-load: its result (None when it wrote none), how it ended, and when its measured
    window was, on time.monotonic(), so the server's CPU can be read over that window."""

    result: "LoadResult | None"
    status: str  # "exit 0", "killed by signal 9", "timed out"
    window: tuple  # (start, end) on time.monotonic()
    log_tail: str
    wall_s: float


def run(argv, json_path, *, cpus=(), log_path, limit_s, on_poll=None, poll_s=0.005,
        stop_when=None):
    """Runs cm-load to its end (killed after limit_s), pinned to `cpus`. on_poll(now) is called
    every poll_s while it runs (a server's CPU sampler). The window starts warmup_s after cm-load
    says it "opened" its connections (after its stagger, when it staggers); without that line it is
    the last duration_s before it exited. stop_when(), when given, is asked at every poll: once it
    returns true cm-load is stopped (status "stopped early"), as when the server it loads died."""
    if os.path.exists(json_path):
        os.remove(json_path)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = processes.start(argv, cpus, stdout=subprocess.DEVNULL, stderr=log)
    opened = None
    deadline = t0 + limit_s
    status = None
    while True:
        now = time.monotonic()
        if p.poll() is not None:
            status = processes.describe(p.returncode)
            break
        if now > deadline:
            processes.stop(p)
            status = "timed out"
            break
        if stop_when is not None and stop_when():
            processes.stop(p)
            status = "stopped early"
            break
        if opened is None and "opened" in _read(log_path):
            opened = now
        if on_poll:
            on_poll(now)
        time.sleep(poll_s)
    exited = time.monotonic()
    result = LoadResult.read(json_path) if os.path.exists(json_path) else None
    window = None
    if result is not None:
        start = (opened + result.stagger_s + result.warmup_s) if opened is not None else \
            exited - result.duration_s
        window = (start, start + result.duration_s)
    return LoadRun(result, status, window, tail(log_path), exited - t0)


#: Connections one cm-load process holds here: the open-files limit is 20,000 a process.
CONNECTIONS_PER_PROCESS = 19_000


def parts_of(connections, per_process=CONNECTIONS_PER_PROCESS):
    """The connections of each cm-load process a row of `connections` needs: as few processes as
    hold them, as even as can be ([30000] -> [15000, 15000])."""
    n = max(1, -(-connections // per_process))
    return [connections // n + (1 if k < connections % n else 0) for k in range(n)]


def connections_per_source(port_range="/proc/sys/net/ipv4/ip_local_port_range"):
    """As cm-load reckons it: a quarter of the ephemeral port range per source address."""
    try:
        with open(port_range) as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    return max((hi - lo + 1) // 4, 1)


def source_ranges(sizes, per_source):
    """Apart 127.0.0.A-B ranges, one per process, each with enough addresses for its part."""
    out, first = [], 1
    for size in sizes:
        count = max(1, -(-size // per_source))
        if first + count - 1 > 254:
            raise ValueError(f"{sum(sizes):,} connections need more than 254 source addresses")
        out.append((first, first + count - 1))
        first += count
    return out


def run_parts(argvs, json_paths, merged_path, *, window_at_s, cpus=(), log_prefix, limit_s,
              on_poll=None, poll_s=0.005, bin_dir=None):
    """Runs several cm-load processes side by side (each argv with its own --connections,
    --source-addresses and the same --window-at), then `cm-load merge` of their JSON into
    merged_path: one LoadRun, its window the one they shared (window_at_s on time.monotonic(),
    which is CLOCK_MONOTONIC as --window-at is). A process that failed fails the whole run."""
    for path in [*json_paths, merged_path]:
        if os.path.exists(path):
            os.remove(path)
    t0 = time.monotonic()
    procs, logs = [], []
    for k, argv in enumerate(argvs):
        logs.append(f"{log_prefix}.part{k + 1}.log")
        with open(logs[-1], "w") as log:
            procs.append(processes.start(argv, cpus, stdout=subprocess.DEVNULL, stderr=log))
    status = None
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        if now - t0 > limit_s:
            for p in procs:
                processes.stop(p)
            status = "timed out"
            break
        if on_poll:
            on_poll(now)
        time.sleep(poll_s)
    ended = [processes.describe(p.returncode) for p in procs]
    status = status or next((e for e in ended if e not in ("exit 0", "exit 3")), ended[0])
    tails = " || ".join(f"part {k + 1}: {tail(log)}" for k, log in enumerate(logs))
    result, window = None, None
    if all(os.path.exists(p) for p in json_paths):
        merge = [os.path.join(bin_dir or default_bin_dir(), "cm-load"), "merge", *json_paths,
                 "--json", merged_path]
        done = processes.run(merge, cpus, timeout=60, check=False)
        if os.path.exists(merged_path):
            result = LoadResult.read(merged_path)
            window = (window_at_s, window_at_s + result.duration_s)
        else:
            tails += f" || cm-load merge: {(done.stderr or done.stdout).strip()[-300:]}"
    return LoadRun(result, status, window, tails, time.monotonic() - t0)


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(path, lines=3):
    text = [line for line in _read(path).splitlines() if line.strip()]
    return " | ".join(text[-lines:]) or "(no output)"
