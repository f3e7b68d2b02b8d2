"""Sizing a service from the committed results: N connections, each request waiting D ms on a
backend, C cores -- which ceiling binds each model, the rps and memory to expect, and the row of
results/ each figure comes from. Pure functions over results.json documents; harness/size prints.

    connection ceiling = N / D
    thread ceiling     = threads / D                  (the blocking model: a worker per wait)
    database ceiling   = P / D, with --db-pool P: the wait is a query holding one of P database
                         connections (an async model: P per event loop, one loop per core; the
                         blocking model: P shared by its workers); its efficiency comes from a
                         committed /db/sleep row bound by the same ceiling (results/db)
    CPU ceiling        = C x the model's CPU ceiling at its committed /delay row whose
                         connections are nearest N (its /plaintext rps with that many connections,
                         measured back to back with the row: docs/ceilings.md); one core measured,
                         C cores by multiplication
    expected rps       = the lowest ceiling x the efficiency a committed row of the model reached
                         against the same kind of ceiling (the nearest such row in connections;
                         its 95% interval, so a range, capped at the ceiling)
    memory             = N x the model's bytes per waiting request (cmharness.memory, measured
                         by the profile on fresh servers); the blocking model: its workers x the
                         bytes of a worker holding one (its thread's own RSS included), and the
                         stack each reserves (address space, not RSS) beside it

The C-core CPU ceiling assumes one event loop per core (`--threads C`) and nothing shared between
them; this project measures one core for the server (2 CPUs: the other runs the load), so the
factor C is arithmetic, not a measurement, and the output says so.
"""

import dataclasses
import json
import os

from . import ceilings as ceilings_mod

@dataclasses.dataclass
class Row:
    """What sizing reads from one committed /delay row of a results.json."""
    server: str
    connections: int
    delay_ms: float
    rps: float
    cpu_ceiling: float
    cpu_us_per_request: float
    rss_kib_per_connection: "float | None"  # the RSS growth under load (not the memory sized)
    efficiency: "tuple[float, float, float] | None"  # estimate, low, high
    bound: str
    source: str  # "results/delay-sweep/results.json: asio_coro /delay/100 x 16,000"
    waiting_bytes: "int | None" = None  # bytes per waiting request its profile measured
    stack_bytes: "int | None" = None  # the stack a blocking worker reserves
    waiting_source: "str | None" = None  # the file waiting_bytes comes from
    route: str = "delay"  # "delay": a /delay row; "db": a /db/sleep row (results/db)


@dataclasses.dataclass
class Sizing:
    server: str
    ceilings: dict  # name -> rps (None when it does not apply)
    binds: str
    expected: "tuple[float, float] | None"  # rps, low..high
    memory_mib: "float | None"
    threads_needed: "int | None"
    row: Row  # the nearest row: the CPU ceiling and the memory
    efficiency_row: "Row | None"  # the row whose efficiency against the same ceiling is used
    notes: list


def _median(summary, key):
    s = summary.get(key) or {}
    return s.get("median")


def delay_rows(doc, source):
    """Every priced /delay and /db/sleep row of a results.json document (the CPU-ceiling rows
    left out)."""
    rows = []
    modes = {v["name"] for v in doc.get("meta", {}).get("profile_settings", {}).get("variants", [])
             if "--db-mode" in v.get("server_args", [])}
    for target in doc.get("targets", []):
        if target.get("variant") in modes:  # the driver on a pool or the loop: not a model's own
            continue
        for r in target.get("rows", []):
            s = r.get("summary") or {}
            if r.get("cpu_ceiling_row") or not r.get("delay") and not r.get("mean_delay_ms"):
                continue
            route = {"/delay/": "delay", "/db/sleep/": "db"}.get(
                str(r.get("path", "")).rsplit("/", 1)[0] + "/")
            if route is None:
                continue
            cpu = _median(s, "server_cpu_ms_per_1k")  # ms per 1,000 requests = us per request
            rps = _median(s, "rps")
            cpu_ceiling = _median(s, "cpu_ceiling")
            if not cpu or not rps or not cpu_ceiling:
                continue
            interval = s.get("efficiency_interval")
            eff = (interval["estimate"], interval["low"], interval["high"]) if interval else None
            n = r["connections_requested"]
            cost = target.get("waiting_cost") or {}
            rows.append(Row(target["name"], n, r["mean_delay_ms"], rps, cpu_ceiling, cpu,
                            _median(s, "rss_per_connection_kib"), eff, r.get("bound", ""),
                            f"{source}: {target['name']} {r['path'].replace('{ms}', format(r['mean_delay_ms'], 'g'))}"
                            f" x {n:,}", cost.get("bytes_per_waiting"),
                            cost.get("reserved_bytes_per_waiting"), source, route))
    return rows


def load_rows(results_dir, profiles=("delay-sweep", "arena", "db")):
    """The /delay rows of the profiles (and results/db's /db/sleep rows); a server whose profiles measured no bytes per waiting
    request (a peer priced only in arena: go, tokio) takes them from harness/waiting-cost's file,
    results/waiting-cost/SERVER.json, when there is one."""
    rows = []
    for profile in profiles:
        path = os.path.join(results_dir, profile, "results.json")
        if os.path.isfile(path):
            with open(path) as f:
                rows += delay_rows(json.load(f), os.path.relpath(path, os.path.dirname(results_dir)))
    for server in dict.fromkeys(r.server for r in rows):
        if waiting_row(rows, server) is None:
            path = os.path.join(results_dir, "waiting-cost", f"{server}.json")
            if os.path.isfile(path):
                with open(path) as f:
                    measured = json.load(f).get("rss_per_waiting_request_bytes")
                where = os.path.relpath(path, os.path.dirname(results_dir))
                for r in rows:
                    if r.server == server and measured is not None:
                        r.waiting_bytes, r.waiting_source = measured, where
    return rows


def _ratio(a, b):
    return max(a, b) / min(a, b) if a > 0 and b > 0 else (1.0 if a == b else float("inf"))


def nearest(rows, server, connections, route="delay", delay_ms=None):
    """The server's committed row on this route ("delay", "db") whose connections are nearest
    (by ratio) the service's, then whose delay is (when delay_ms is given; results/db measured a
    1 ms and a 10 ms query at the same connections), the first in the files' order on a tie."""
    mine = [r for r in rows if r.server == server and r.route == route]
    if not mine:
        return None
    return min(mine, key=lambda r: (_ratio(r.connections, connections),
                                    _ratio(r.delay_ms, delay_ms) if delay_ms else 1.0,
                                    -r.connections))


def row_binds(row):
    """What bound a committed row, as a reader takes it (ceilings.binding_label)."""
    threads = None
    if row.server == "blocking" and row.delay_ms:
        threads = 64 / (row.delay_ms / 1000)
    return ceilings_mod.binding_label(row.bound, row.connections, row.delay_ms, threads)


def database_ceiling(server, db_pool, delay_s, cores):
    """P / D for a wait on P database connections (an async model: P per loop, a loop per core;
    the blocking model: P in all), or None without a pool or a delay."""
    if not db_pool or delay_s <= 0:
        return None
    pools = 1 if server == "blocking" else cores
    return db_pool * pools / delay_s


def waiting_row(rows, server):
    """The server's committed row whose profile measured its bytes per waiting request."""
    return next((r for r in rows if r.server == server and r.waiting_bytes is not None), None)


def size(rows, server, connections, delay_ms, cores, *, workers=64, db_pool=None):
    """One model's sizing for N connections, D ms, C cores, from its committed rows (None when
    it has none); with db_pool, each wait a query on that many database connections."""
    row = nearest(rows, server, connections)
    if row is None:
        return None
    d = delay_ms / 1000
    is_blocking = server == "blocking"
    ceilings = {"connections": connections / d if d > 0 else None,
                "threads": workers / d if is_blocking and d > 0 else None,
                "cpu": cores * row.cpu_ceiling,
                "database": database_ceiling(server, db_pool, d, cores)}
    present = {k: v for k, v in ceilings.items() if v is not None}
    low = min(present.values())
    binds = " = ".join(k for k, v in present.items() if abs(v - low) <= 1e-9 * low)
    notes = []
    route = "db" if db_pool else "delay"
    same_kind = [r for r in rows if r.server == server and r.efficiency and row_binds(r) == binds
                 and r.route == route]
    eff_row = nearest(same_kind, server, connections, route, delay_ms) if same_kind else None
    if eff_row is None and row.efficiency:
        eff_row = row
        notes.append(f"no committed row of {server} was bound by {binds}: the efficiency is the "
                     f"nearest row's against its {row_binds(row)}, a guide, not a measurement of this case")
    expected = None
    if eff_row is not None:
        _, lo, hi = eff_row.efficiency
        expected = (low * lo, low * min(hi, 1.0))
    if cores > 1 and "cpu" in binds:
        notes.append(f"cpu: {cores} x the one core measured (one loop per core assumed, not measured here)")
    threads_needed = None
    waiting = waiting_row(rows, server)
    per = waiting.waiting_bytes / 2**20 if waiting else None
    if is_blocking:
        threads_needed = connections
        memory = workers * per if per is not None else None
        if waiting is not None and waiting.stack_bytes:
            notes.append(f"to lift the thread ceiling to N / D it needs {connections:,} workers "
                         f"(--threads {connections}): {connections * waiting.stack_bytes / 2**20:,.0f} "
                         f"MiB of address space for their stacks and {connections * per:,.0f} MiB "
                         "of RSS")
    else:
        memory = connections * per if per is not None else None
    return Sizing(server, ceilings, binds, expected, memory, threads_needed, row, eff_row, notes)
