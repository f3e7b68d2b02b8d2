"""Runs a profile: every server validated, then measured in rounds, each figure priced within its
round. This is how cm-price measures, and why (issue 20: "a figure is a claim"):

- The servers are started once and kept running. In each round, in a new random order, every
  server's CPU-ceiling row (/plaintext) is measured in a short window, one server after another
  (the *sprint*): a ratio between two servers is taken within one sprint, seconds apart, so the
  machine's drift over minutes does not enter it.
- Then every other row, server by server in a new random order: the server's CPU ceiling again,
  in a short window right before the row (back to back), then the row itself -- on the same server,
  or on a freshly started one when the profile asks for `fresh_server` (so its RSS per connection
  starts from nothing). The row's efficiency is its rps over the lowest of its ceilings, with the
  CPU ceiling of that back-to-back window.
- A row where a thread ceiling applies and the connections outnumber the threads (200 connections
  on a pool of 64) answers in waves of the pool's size unless its first requests are spread: its
  stagger spreads them over delay x connections / threads, so each thread's phase differs and the
  answers flow evenly; a window of any length then counts whole waves' worth.
- A row's CPU ceiling brackets it: a window right before the row and one right after, on the same
  server in the same state (as many connections, and every other window /delay/N, where the
  profile asks: ceiling_shape), and the row is priced against the larger. The machine's speed
  moves by tens of percent within seconds, and a slower moment only ever lowers what a window
  measures, so the most the server answered around the row is the better reading of what it could
  answer. A row that still answered more than its ceiling
  gets more windows after it, up to MAX_CEILING_WINDOWS; a round above its ceiling by more than
  ABOVE_TOLERANCE after that is a defect of the measurement, shown as one and not counted in any
  figure (a window that counted a wave of answers can do it to connections / delay too).
- A row whose efficiency interval is still wider than half its estimate after the planned rounds
  (stats.NOISE_WIDTH: too wide to tell a change from the noise), or that counts fewer than the
  planned rounds because some were defects, gets more rounds, each with its ceiling back to back,
  up to the profile's max_rounds: with 6 rounds the 95% interval of a median
  is the least and the greatest round, so one disturbed window sets it; with 12 it is the 3rd and
  the 10th, and two disturbed windows at either end no longer do.
"""

import dataclasses
import http.client
import os
import random
import resource
import sys
import time

from . import ceilings, load, memory, proc, profiles, stats, validate
from .ceilings import Ceilings
from .rounds import order as round_order
from .servers import PACKAGE, PEERS, Server, kind_of, peer_answers, peer_program

#: A round whose rps passes its ceiling by more than this share is a defect of the measurement.
ABOVE_TOLERANCE = stats.ABOVE_TOLERANCE
#: The most CPU-ceiling windows around one row: the one before, the one after, and more after
#: while the row still answered above the largest of them.
MAX_CEILING_WINDOWS = 4


@dataclasses.dataclass
class Settings:
    bin_dir: str
    work_dir: str
    server_cpus: list
    load_cpus: list
    loops: int = 1
    load_threads: int = 1
    seed: int = 0
    progress: bool = True
    db: object = None  # the database.Cluster every server queries (a profile with "database")


@dataclasses.dataclass
class Target:
    """One server to price: a model of cm-server in one variant, or a reference peer."""

    name: str
    variant: profiles.Variant

    @property
    def kind(self):
        return kind_of(self.name)

    @property
    def label(self):
        v = self.variant.name
        return self.name if v in ("standard", "-") else f"{self.name} ({v})"

    def arg(self, flag, default):
        a = self.variant.server_args
        return a[a.index(flag) + 1] if flag in a[:-1] else default


@dataclasses.dataclass
class Measurement:
    """One window of one row on one server in one round, priced."""

    round: int
    sequence: int
    row: profiles.Row
    result: "load.LoadResult | None" = None
    error: str = ""
    window_s: float = 0.0
    server_cpu_s: float = 0.0
    server_busy: float = 0.0
    load_busy: float = 0.0  # cm-load's own work, over the load CPUs' time in the window
    load_cpus_busy: float = 0.0  # the load CPUs busy in the window, by whatever ran there
    rss_before_kib: int = 0
    peak_rss_kib: int = 0
    steal: "float | None" = None
    others: "float | None" = None
    load_average: "float | None" = None
    cpu_ceiling_rps: "float | None" = None  # the largest of the windows around the row
    ceiling_windows: list = dataclasses.field(default_factory=list)  # their rps, in order
    defect: str = ""  # above its ceiling after every window: not counted in any figure
    ceilings: Ceilings = dataclasses.field(default_factory=Ceilings)
    efficiency: "float | None" = None
    stagger_ms: float = 0.0
    fresh_server: bool = False
    is_ceiling: bool = False  # this window is the server's own CPU ceiling (not priced)
    phase_s: float = 0.0  # added to the warm-up: a random phase within one delay
    settle_s: float = 0.0  # how long the server took to answer promptly before the window
    notes: list = dataclasses.field(default_factory=list)  # (kind, text)
    # A /db/ row: the queries the database completed over the run (cm-load drained: each request
    # sent was answered or an error), the CPU seconds the database spent meanwhile, and the
    # milliseconds it spent executing those queries.
    db_queries: "int | None" = None
    db_cpu_s: "float | None" = None
    db_exec_ms: "float | None" = None  # the database's time executing them (pg_stat_statements)

    @property
    def ok(self):
        return self.result is not None and not self.error

    @property
    def rps(self):
        return self.result.rps if self.ok else None

    @property
    def counted(self):
        """Measured, and not a defect: a round the row's figures are made of."""
        return self.ok and not self.defect


def plan_targets(profile, built, only=(), peers=True, bin_dir=None):
    """The targets of a profile (models in each variant, then installed peers) and what was
    skipped, with why. `only` must name built models or peers."""
    for name in only:
        if name not in built and name not in PEERS:
            raise profiles.ProfileError(
                f'--models: "{name}" is not a built model (built: {", ".join(built)})')
    wanted = (lambda n: not only or n in only)
    targets, skipped = [], []
    for name in built:
        if wanted(name) and profiles.prices_model(profile, name):
            targets += [Target(name, v) for v in profile.variants
                        if profiles.takes(v.models, name)]
    for peer in profile.peers if peers else ():
        if not wanted(peer):
            continue
        if peer_program(peer, bin_dir):
            targets.append(Target(peer, profiles.Variant("-")))
        else:
            skipped.append(f"{peer}: not installed (scripts/install-deps installs {PACKAGE[peer]})")
    return targets, skipped


def rows_for(target, rows):
    """The rows a target is priced on: a model and the Go and Tokio peers every row, nginx
    /plaintext only, node /plaintext and /delay (servers.PEER_PATHS)."""
    return [r for r in rows if peer_answers(target.name, r.path)]


def waiting_threads(target, profile, settings, path):
    return ceilings.waiting_threads(
        target.kind, path, workers=profile.blocking_workers, loops=settings.loops,
        pool=profile.pool, offload=target.arg("--offload", "standard"),
        wait_mode=target.arg("--wait-mode", "timer"), peer=target.name,
        db_mode=target.arg("--db-mode", "readiness"))


def database_connections(target, settings, path):
    """The database connections a /db/ row's requests share in this target (--db-pool, 16 by
    default as in cm-server), or None for another row."""
    return ceilings.database_connections(
        target.kind, path, db_pool=int(target.arg("--db-pool", 16)), loops=settings.loops,
        db_mode=target.arg("--db-mode", "readiness"))


def stagger_ms(row, threads, cap_ms):
    """The spread of a row's first requests: none unless the row asks; one mean delay; or, where
    the connections outnumber the threads that hold a waiting request, delay x connections /
    threads (so the threads' phases spread over one delay), at most cap_ms."""
    if not row.stagger or row.mean_delay_ms <= 0:
        return 0.0
    waves = row.connections / threads if threads and row.connections > threads else 1
    return min(row.mean_delay_ms * waves, float(cap_ms))


def cpu_between(samples, t0, t1):
    """Server CPU seconds between two instants, interpolated from (time, cpu) samples."""
    if not samples:
        return 0.0

    def at(t):
        if t <= samples[0][0]:
            return samples[0][1]
        if t >= samples[-1][0]:
            return samples[-1][1]
        for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
            if ta <= t <= tb:
                return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
        return samples[-1][1]

    return max(0.0, at(t1) - at(t0))


class Runner:
    """Measures every target of a profile in rounds (see the module's docstring)."""

    def __init__(self, profile, settings, targets):
        self.profile, self.settings, self.targets = profile, settings, targets
        self.rng = random.Random(settings.seed)
        self.servers = {}  # label -> the long-running Server
        self.refused = {}  # label -> why it is not priced
        self.validations = {}  # label -> Validation
        self.threads = {}  # label -> "1 loop, pool 64", "64 workers", ...
        self.waiting_costs = {}  # label -> memory.WaitingCost (a profile with "memory")
        self.measurements = {}  # (label, row key) -> [Measurement per round]
        self.sequence = 0
        self.orders = []  # the order of each round's sprint, for the record
        self.ceiling_row = next((r for r in profile.rows if r.cpu_ceiling), None)

    def log(self, text):
        if self.settings.progress:
            print(f"cm-price: {text}", file=sys.stderr, flush=True)

    def start_server(self, target):
        p, s = self.profile, self.settings
        threads = p.blocking_workers if target.kind == "blocking" else s.loops
        db = ["--db", s.db.conninfo] if s.db is not None and target.kind != "peer" else []
        return Server(target.name, cpus=s.server_cpus, threads=threads, pool=p.pool,
                      args=db + target.variant.server_args, bin_dir=s.bin_dir,
                      workdir=s.work_dir, settle_s=0.2)

    def is_ceiling(self, target, row):
        """A CPU-ceiling row of a target that is its own ceiling source: measured in the sprint,
        not priced. Another variant's /plaintext is an ordinary row, priced against it."""
        return row.cpu_ceiling and self.ceiling_source(target) is target

    def ceiling_source(self, target):
        """The target whose /plaintext is this one's CPU ceiling: the first variant of the same
        server (offload: inline, where the trivial request runs on the loop), or itself when the
        profile measures a ceiling per variant (timers: the variants differ only in their waits)."""
        if self.profile.ceiling_per_variant:
            return target
        return next(t for t in self.targets if t.name == target.name)

    # -- validation -----------------------------------------------------------------------------

    def validate_all(self):
        for t in self.targets:
            rows = rows_for(t, self.profile.rows)
            try:
                server = self.start_server(t)
            except (RuntimeError, OSError) as e:
                self.refused[t.label] = f"could not start: {e}"
                continue
            self.servers[t.label] = server
            self.threads[t.label] = server.threads_label
            v = validate.validate(
                server.port, plaintext=any(r.path == "/plaintext" for r in rows),
                delay=t.kind != "peer" or any(r.path.startswith("/delay/") for r in rows),
                block=any(r.path.startswith("/block/") for r in rows),
                cpu_us=sorted({int(r.compute_us) for r in rows if r.compute_us > 0}),
                echo_bodies=sorted({r.body for r in rows if r.body is not None}),
                db_sleep=any(r.path.startswith("/db/sleep/") for r in rows),
                db_rows=sorted({r.path for r in rows if r.path.startswith("/db/row/")}))
            self.validations[t.label] = v
            self.log(f"{t.label}: " + ("valid" if v.ok else f"refused: {v.failure}"))
            if not v.ok:
                self.refused[t.label] = f"failed validation: {v.failure}"
                server.close()
                del self.servers[t.label]

    def priced(self):
        return [t for t in self.targets if t.label not in self.refused]

    def measure_memory(self):
        """Bytes per waiting request of every priced server that answers /delay, each on fresh
        servers of its own (cmharness.memory): the blocking model with as many requests as its
        workers, the others with the profile's memory.waiting."""
        p, s = self.profile, self.settings
        for t in self.priced():
            if not p.memory_waiting or not any(r.path.startswith("/delay/")
                                               for r in rows_for(t, p.rows)):
                continue
            n = p.blocking_workers if t.kind == "blocking" else p.memory_waiting
            self.log(f"{t.label}: bytes per waiting request, {n:,} waiting")
            try:
                self.waiting_costs[t.label] = memory.measure(
                    t.name, n, loops=s.loops, cpus=s.server_cpus, bin_dir=s.bin_dir, pool=p.pool,
                    args=t.variant.server_args, workdir=s.work_dir, stop_grace_s=1.0)
            except (RuntimeError, OSError, ValueError) as e:
                self.log(f"{t.label}: bytes per waiting request not measured: {e}")

    # -- one window -----------------------------------------------------------------------------

    def measure(self, target, server, row, rnd, *, duration_s, warmup_s, extra=()):
        """One cm-load window of `row` on `server`, with the server's CPU over the window; `extra`
        is more of cm-load's flags (the latency profile's --rate)."""
        p, s = self.profile, self.settings
        self.sequence += 1
        m = Measurement(rnd, self.sequence, row)
        threads = waiting_threads(target, p, s, row.path)
        m.stagger_ms = stagger_ms(row, threads, p.stagger_cap_ms)
        # A random phase within one delay: answers that come in waves are then counted, on
        # average, at their true rate, whatever the window's length.
        m.phase_s = self.rng.uniform(0, row.mean_delay_ms / 1000) if not m.is_ceiling else 0.0
        warmup_s += m.phase_s
        tag = os.path.join(s.work_dir, f"{self.sequence:05d}")
        common = dict(threads=s.load_threads, duration_s=duration_s, warmup_s=warmup_s,
                      timeout_ms=profiles.timeout_ms(p, row), delay=row.delay,
                      stagger_ms=m.stagger_ms, bin_dir=s.bin_dir, body=row.body)
        db_row = s.db is not None and row.path.startswith("/db/") and not m.is_ceiling
        if db_row:
            common["drain"] = True  # every request sent answered: the database's count is exact
        limit = warmup_s + duration_s + m.stagger_ms / 1000 + 120
        parts = load.parts_of(row.connections, p.connections_per_load)
        if len(parts) == 1:
            argv = load.command(server.url(row.path), connections=row.connections,
                                json_path=tag + ".json", extra=extra, **common)
            launch = (lambda on_poll: load.run(argv, tag + ".json", cpus=s.load_cpus,
                                               log_path=tag + ".log", limit_s=limit,
                                               on_poll=on_poll))
        else:
            launch = self._parts(server.url(row.path), parts, tag, common, extra, limit)
            m.notes.append(("parts", f"spread over {len(parts)} cm-load processes "
                            f"({' + '.join(f'{n:,}' for n in parts)} connections: one process "
                            f"holds at most {p.connections_per_load:,}), measuring one window "
                            "(--window-at), merged by `cm-load merge`"))
        try:
            m.settle_s = settle(server)
            server.reset_peak_rss()
            m.rss_before_kib = server.readings().rss_kib
            tally = s.db.tally() if db_row else None
            self._run_window(m, server, launch)
            if tally is not None:
                count = tally.finish()
                m.db_queries, m.db_cpu_s, m.db_exec_ms = count.queries, count.cpu_s, count.exec_ms
                if not tally.quiet_at_start:
                    m.notes.append(("db-busy-before", "the database was still running the "
                                    "row before's queries a minute after it: some of them are "
                                    "in this row's count"))
                if not count.idle:
                    m.notes.append(("db-busy", "the database still ran queries 10 s after "
                                    "cm-load ended: those were not counted"))
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            m.error = m.error or str(e)
        return m

    def _parts(self, url, parts, tag, common, extra, limit):
        """A launcher of the cm-load processes of one row too big for one: apart source
        addresses, one window for all, set when it is launched (the connect phase of the whole
        row at 2,500 connections a second -- 18,000 took 2 to 3.5 s here -- and 2 s to spare,
        then the warm-up and stagger)."""
        s = self.settings
        ranges = load.source_ranges(parts, load.connections_per_source())
        lead_s = 2.0 + sum(parts) / 2500 + common["warmup_s"] + common["stagger_ms"] / 1000

        def launch(on_poll):
            window_at = time.monotonic() + lead_s
            paths = [f"{tag}.part{k + 1}.json" for k in range(len(parts))]
            argvs = [load.command(url, connections=n, json_path=path,
                                  extra=[*extra, "--source-addresses", f"{a}-{b}",
                                         "--window-at", str(int(window_at * 1e9))], **common)
                     for n, path, (a, b) in zip(parts, paths, ranges)]
            return load.run_parts(argvs, paths, tag + ".json", window_at_s=window_at,
                                  cpus=s.load_cpus, log_prefix=tag, limit_s=limit + lead_s,
                                  on_poll=on_poll, bin_dir=s.bin_dir)

        return launch

    def _run_window(self, m, server, launch):
        samples, load_samples, last = [], [], [0.0]
        load_cpus = self.settings.load_cpus

        def sample(now):
            if now - last[0] >= 0.05:
                last[0] = now
                samples.append((now, server.cpu_seconds()))
                load_samples.append((now, proc.cpus_busy_seconds(load_cpus)))

        ticks = proc.machine_ticks()
        cpu0 = server.cpu_seconds()
        kids0 = _children_cpu()
        run = launch(sample)
        if run.result is None or run.result.duration_s <= 0:  # a server that took no connection
            m.error = f"cm-load {run.status}, no window measured: {run.log_tail}"
            return
        sample(time.monotonic() + 1)
        m.result, m.window_s = run.result, run.result.duration_s
        m.server_cpu_s = cpu_between(samples, *run.window)
        m.server_busy = m.server_cpu_s / (m.window_s * max(1, len(self.settings.server_cpus)))
        m.load_busy = m.result.client_work_s / (m.window_s * max(1, len(self.settings.load_cpus)))
        m.load_cpus_busy = cpu_between(load_samples, *run.window) / (
            m.window_s * max(1, len(load_cpus)))
        m.steal, m.others = proc.machine_share(ticks, proc.machine_ticks(),
                                               server.cpu_seconds() - cpu0, _children_cpu() - kids0)
        m.load_average = proc.load_average()[0]
        m.peak_rss_kib = server.readings().peak_rss_kib
        if run.status != "exit 0":
            m.notes.append(("load-status", f"cm-load {run.status}: {run.log_tail}"))

    # -- the rounds -----------------------------------------------------------------------------

    def record(self, target, m):
        size = self.profile.ceiling_rounds if m.is_ceiling else self.profile.rounds
        rounds = self.measurements.setdefault((target.label, m.row.key), [None] * size)
        rounds.extend([None] * (m.round + 1 - len(rounds)))  # a round beyond the planned ones
        rounds[m.round] = m

    def ceiling_window(self, target, rnd, ceiling_row=None):
        """A short /plaintext window on the ceiling source's running server (with as many
        connections as `ceiling_row` says, the sprint's by default)."""
        source = self.ceiling_source(target)
        if source.label in self.refused or self.ceiling_row is None:
            return None
        return self.measure(source, self.servers[source.label], ceiling_row or self.ceiling_row, rnd,
                            duration_s=self.profile.ceiling_duration_s,
                            warmup_s=self.profile.ceiling_warmup_s)

    def sprint(self, rnd):
        order = [t for t in self.priced() if self.ceiling_row in rows_for(t, self.profile.rows)
                 and self.ceiling_source(t) is t]
        order = round_order(order, rnd, self.profile.ceiling_rounds, "shuffle", self.rng)
        self.orders.append([t.label for t in order])
        for t in order:
            self.log(f"sprint {rnd + 1}/{self.profile.ceiling_rounds}: {t.label} "
                     f"{self.ceiling_row.label()}")
            m = self.ceiling_window(t, rnd)
            m.is_ceiling = True
            m.cpu_ceiling_rps = m.rps
            price(m, t, self.profile, self.settings)
            self.record(t, m)

    def row_round(self, row, rnd, only=None):
        order = [t for t in self.priced() if row in rows_for(t, self.profile.rows)
                 and not self.is_ceiling(t, row) and (only is None or t.label in only)]
        order = round_order(order, rnd, self.profile.rounds, "shuffle", self.rng)
        for t in order:
            which = f"{rnd + 1}/{self.profile.rounds}" if only is None else \
                f"{rnd + 1} (more, up to {self.profile.max_rounds})"
            self.log(f"round {which}: {t.label} {row.label()}")
            m = self.measure_row(t, row, rnd)
            price(m, t, self.profile, self.settings)
            self.record(t, m)

    def ceiling_for(self, target, server, row, rnd, fresh=False):
        """The CPU ceiling a row about to run on `server` is priced against: this round's sprint
        window when it cannot bind; else a window back to back (bracket() adds the ones after)."""
        sprinted = self.sprint_ceiling(target, row, rnd)
        if sprinted:
            return sprinted, ("ceiling-from-sprint", "its CPU ceiling is this round's sprint "
                              "window: more than twice the lowest other ceiling, it cannot bind, "
                              "so no window was spent on it back to back")
        if self.ceiling_row is None or row.compute_us > 0:  # /cpu/N: the work alone bounds it
            return None, None
        c = self.ceiling_window_at(target, server, row, rnd, fresh=fresh)
        if c is not None and not c.ok:  # no ceiling to price the row against: not a figure
            return None, ("ceiling-failed", f"its CPU ceiling window failed: {c.error}")
        return (c.rps if c is not None else None), None

    def ceiling_window_at(self, target, server, row, rnd, index=0, fresh=False):
        """The `index`th CPU-ceiling window around `row` (ceiling_shape) on its server (a variant's:
        its ceiling source's), warmed longer on a fresh one when the profile asks (a cold JIT)."""
        p, ceiling_row = self.profile, ceiling_shape(self.profile, self.ceiling_row, row, index)
        if self.ceiling_source(target) is not target:
            return self.ceiling_window(target, rnd, ceiling_row)
        warm_s = p.ceiling_fresh_warmup_s if fresh else 0.0
        return self.measure(target, server, ceiling_row, rnd, duration_s=p.ceiling_duration_s,
                            warmup_s=p.ceiling_warmup_s + warm_s)

    def bracket(self, m, target, server, rnd):
        """The windows after a row priced against a back-to-back CPU ceiling: one, then more while
        the row answered above the largest so far (up to MAX_CEILING_WINDOWS in all); the row's
        ceiling is the largest."""
        m.ceiling_windows = [m.cpu_ceiling_rps]
        while len(m.ceiling_windows) < MAX_CEILING_WINDOWS and (
                len(m.ceiling_windows) < 2
                or m.rps > (1 + ABOVE_TOLERANCE) * max(m.ceiling_windows)):
            c = self.ceiling_window_at(target, server, m.row, rnd, len(m.ceiling_windows))
            if c is None or not c.ok:
                m.notes.append(("ceiling-after-failed", "a CPU-ceiling window after the row "
                                f"failed ({c.error if c is not None else 'no server'}): priced "
                                "against the windows that were measured"))
                break
            m.ceiling_windows.append(c.rps)
        m.cpu_ceiling_rps = max(m.ceiling_windows)
        if len(m.ceiling_windows) > 2:
            m.notes.append(("more-ceiling-windows", "the row answered above the CPU ceiling "
                            "measured before and after it, so more windows were measured after "
                            "it; priced against the largest"))

    def row_on(self, target, server, row, rnd, fresh=False):
        p = self.profile
        idle_kib = server.readings().rss_kib if fresh else None
        ceiling, note = self.ceiling_for(target, server, row, rnd, fresh)
        m = self.measure(target, server, row, rnd, duration_s=p.window_s(target.variant),
                         warmup_s=p.warmup_s)
        if note and note[0] == "ceiling-failed":
            m.error = m.error or note[1]
        if idle_kib is not None:  # RSS per connection from the fresh server's idle RSS, not from
            m.rss_before_kib = idle_kib  # after the ceiling window, which had opened as many
        m.cpu_ceiling_rps = ceiling
        if note:
            m.notes.append(note)
        elif ceiling is not None and m.ok:  # measured back to back: bracket the row
            self.bracket(m, target, server, rnd)
        return m

    def sprint_ceiling(self, target, row, rnd):
        """This round's sprint ceiling of the target when it exceeds the row's lowest other
        ceiling by more than the profile's ceiling_margin (so it cannot bind whatever the machine
        does between the two), else None: the row needs its ceiling back to back."""
        source = self.ceiling_source(target)
        rounds = self.measurements.get((source.label, getattr(self.ceiling_row, "key", None)))
        m = rounds[rnd] if rounds and rnd < len(rounds) else None
        if m is None or not m.ok or row.compute_us > 0 or self.profile.ceiling_at_row_connections:
            return None  # at the row's connections: measured at its shape, wherever it lies
        threads = waiting_threads(target, self.profile, self.settings, row.path)
        other = ceilings.compute(row.connections, row.mean_delay_ms, threads).lowest()
        return m.rps if other and m.rps > self.profile.ceiling_margin * other else None

    def measure_row(self, target, row, rnd):
        if not self.profile.fresh_server:
            return self.row_on(target, self.servers[target.label], row, rnd)
        try:
            with self.start_server(target) as server:
                m = self.row_on(target, server, row, rnd, fresh=True)
                m.fresh_server = True
                ended = server.stop()
                if ended != "exit 0":
                    m.notes.append(("server-stop", f"the server ended with {ended} on SIGTERM"))
                return m
        except (RuntimeError, OSError) as e:
            self.sequence += 1
            return Measurement(rnd, self.sequence, row, error=f"could not start: {e}")

    def run(self):
        self.validate_all()
        self.measure_memory()
        p = self.profile
        for rnd in range(max(p.rounds, p.ceiling_rounds if self.ceiling_row else 0)):
            if self.ceiling_row is not None and rnd < p.ceiling_rounds:
                self.sprint(rnd)
            for row in p.rows if rnd < p.rounds else ():
                self.row_round(row, rnd)
        for rnd in range(p.rounds, p.max_rounds):
            wide = undecided(self.measurements, planned=p.rounds)
            if not wide:
                break
            for row in p.rows:
                labels = {label for label, key in wide if key == row.key}
                if labels:
                    self.row_round(row, rnd, only=labels)
        for server in self.servers.values():
            server.close()
        return self


def ceiling_shape(profile, ceiling_row, row, index):
    """What the `index`th CPU-ceiling window around `row` measures: the ceiling row (/plaintext),
    with as many connections as the row when the profile asks; every odd one /delay/N instead when
    the profile names N (ceiling_window.delay_ms) and the row waits on /delay too. A server may
    answer /delay/100 more cheaply than /plaintext with as many connections, and the larger of the
    two then bounds it."""
    if profile.ceiling_at_row_connections:  # the CPU's ceiling with as many clients
        ceiling_row = dataclasses.replace(ceiling_row, connections=row.connections)
    if index % 2 and profile.ceiling_delay_ms and row.path.startswith("/delay/"):
        ceiling_row = dataclasses.replace(ceiling_row, path="/delay/{ms}",
                                          delay=str(profile.ceiling_delay_ms))
    return ceiling_row


def undecided(measurements, width=stats.NOISE_WIDTH, planned=0):
    """{(label, row key)} of every priced row whose efficiency interval is wider than `width` of
    its estimate, or that counts fewer than `planned` rounds because some were defects (above
    their ceiling: measured again, not left out of a smaller sample): the rows a further round
    could decide. A row no round of which was measured is left alone: more rounds would not
    help."""
    out = set()
    for key, rounds in measurements.items():
        done = [m for m in rounds if m is not None]
        if not done or done[0].is_ceiling:
            continue
        counted = [m.efficiency for m in done if m.counted]
        if len(counted) < planned and any(m.defect for m in done):
            out.add(key)
            continue
        est = stats.estimate(counted)
        if est is not None and est.relative_width() > width:
            out.add(key)
    return out


def settle(server, prompt_s=0.05, limit_s=30.0):
    """Waits until the server answers GET /plaintext within prompt_s (a server still working off a
    previous row's backlog -- the blocking model serving requests of clients already gone -- is not
    measured until it is done); returns how long that took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        t = time.monotonic()
        try:
            server.get("/plaintext", timeout=limit_s)
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() - t < prompt_s:
            break
    return time.monotonic() - t0


def database_mismatch(m):
    """What differs between the queries the database completed and the answers cm-load read
    ("" when they are equal): each correct answer is a query the database ran, and with cm-load
    draining each request sent was answered, so the two are equal unless requests failed."""
    r = m.result
    if m.db_queries is None or m.db_queries == r.responses_total:
        return ""
    return (f"the database completed {m.db_queries:,} queries and cm-load read "
            f"{r.responses_total:,} correct answers ({r.errors_total:,} errors, "
            f"{r.unanswered_at_end:,} unanswered at the end)")


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def price(m, target, profile, settings):
    """Prices one measurement against its ceilings; adds the notes its numbers alone do not say."""
    if not m.ok:
        return
    r, row = m.result, m.row
    offered = r.connections_open if r.connect_failures else row.connections
    threads = waiting_threads(target, profile, settings, row.path)
    mean_delay = r.delay_mean_ms or row.mean_delay_ms
    m.ceilings = ceilings.compute(offered, mean_delay, threads, m.cpu_ceiling_rps, row.compute_us,
                                  len(settings.server_cpus) or 1,
                                  database_connections(target, settings, row.path))
    m.efficiency = None if m.is_ceiling else ceilings.efficiency(r.rps, m.ceilings)
    _notes(m, target, offered, threads, mean_delay, profile)


def _notes(m, target, offered, threads, mean_delay, profile):
    r = m.result
    if database_mismatch(m):
        m.notes.append(("db-count", database_mismatch(m) + ": an answer without its query, or a "
                        "query whose answer was lost"))
    if r.connect_failures:
        why = ", ".join(f"{k} x{v}" for k, v in r.connect_failures.items())
        m.notes.append(("connect-failed", f"cm-load could not open every connection ({why}); "
                        f"{r.connections_open} of {m.row.connections} were open at the end, and "
                        "the ceilings use that"))
    served = r.served_connections
    if offered > 0 and served < 0.9 * offered:
        text = f"about {served:,.0f} of {offered:,} connections were served (rps x mean latency)"
        if target.kind == "blocking":
            text += (f"; with keep-alive a worker serves one connection until it closes, so the "
                     f"connections beyond the {profile.blocking_workers} workers wait in the "
                     "accept queue (a property of the model, not a validation failure)")
        elif r.errors.get("timeout", 0):
            text += f"; {r.errors['timeout']} requests waited past cm-load's timeout"
        m.notes.append(("unserved", text))
    if target.kind == "async" and threads and offered > threads and mean_delay > 0:
        m.notes.append(("pool-queue", f"{offered:,} connections share {threads} threads for a "
                        f"{mean_delay:g} ms blocking call: a request queues about "
                        f"({offered} / {threads} - 1) x {mean_delay:g} = "
                        f"{(offered / threads - 1) * mean_delay:,.0f} ms, its overshoot"))
    if m.efficiency is not None and m.efficiency > 1.0 + ABOVE_TOLERANCE:
        m.defect = (f"{m.efficiency:.1%} of its {m.ceilings.bound()} ceiling: more than a server "
                    "can answer while honouring the delay, so the window or the ceiling was "
                    "mismeasured in this round (a defect: not counted in the row's figures)")
        m.notes.append(("above-ceiling", m.defect))
