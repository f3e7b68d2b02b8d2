"""The arithmetic of pricing (DESIGN.md, "The harness"): the ceilings a row cannot exceed while
honouring its delay, and its efficiency against the lowest. Pure functions.

    connection ceiling = connections / mean delay     (a server that suspends a waiting request)
    thread ceiling     = threads / mean delay         (one that holds a thread while it waits)
    CPU ceiling        = the server's own /plaintext rps (and /delay/1: price.ceiling_shape),
                         the most of the windows measured back to back with the row;
                         for /cpu/N, the work alone: server CPUs / N us
    database ceiling   = database connections / query time   (/db/sleep/{ms}: each query holds
                         one of the pool's connections for its whole sleep)
    efficiency         = rps / the lowest ceiling that applies

Why not 1 / (1 / plaintext rps + N us) for /cpu/N: it assumes a /cpu/N request's I/O costs what a
/plaintext request's does at saturation, and it need not. asio_coro_uring's ring runs its task
work as soon as a completion arrives (Asio sets up its ring with no flags; uring_coro asks for
DEFER_TASKRUN), so under /plaintext its recvmsg races cm-load's delivery into the same socket and
spins on the socket's lock (perf: a quarter to a third of its CPU in native_queued_spin_lock_slowpath,
under tcp_recvmsg run from task work, 2026-12-07; docs/models/asio_coro.md); under
/cpu/N it is computing when the next request lands, the race is gone, and it answered up to 113%
of that formula (results/offload, 2026-12-02). N us of CPU per request is a bound no server can
pass; what a row falls short of it is what its I/O and its offloading cost.
"""

import dataclasses


@dataclasses.dataclass
class Ceilings:
    connection: "float | None" = None
    thread: "float | None" = None
    cpu: "float | None" = None
    database: "float | None" = None  # database connections / query time

    def named(self):
        return (("connections", self.connection), ("threads", self.thread), ("cpu", self.cpu),
                ("database", self.database))

    def lowest(self):
        present = [c for _, c in self.named() if c is not None]
        return min(present) if present else None

    def bound(self):
        """Which ceiling binds: "connections", "threads", "cpu", "database"; ties name every
        tied one ("connections = threads"), so a tie is never taught as one of them alone."""
        low = self.lowest()
        if low is None:
            return ""
        names = [n for n, c in self.named() if c is not None and abs(c - low) <= 1e-9 * low]
        return " = ".join(names)


def binding_label(bound, connections_requested, mean_delay_ms, thread_ceiling):
    """The ceiling that binds, as a reader should take it. A row whose load could not open every
    connection is priced on the connections that opened (price.price); for the blocking model those
    are its workers' (the rest wait in the listen backlog), so the connection ceiling equals the
    thread ceiling and `bound` says "connections = threads". What bound it is the threads: the
    connections offered would have allowed more. Ties the offered connections do reach, and the
    other ceilings, are left as they are; rounds that differ ("a or b") are relabelled each."""
    if not bound or not thread_ceiling or not mean_delay_ms or not connections_requested:
        return bound
    offered = connections_requested / (mean_delay_ms / 1000)
    if offered <= thread_ceiling * (1 + 1e-9):
        return bound
    parts = []
    for part in bound.split(" or "):
        part = "threads" if part == "connections = threads" else part
        if part not in parts:
            parts.append(part)
    return " or ".join(parts)


def compute(connections, mean_delay_ms, threads=None, cpu_rps=None, compute_us=0.0,
            server_cpus=1, db_connections=None):
    """The ceilings that apply to a row (see the module's docstring)."""
    out = Ceilings()
    if mean_delay_ms > 0:
        delay_s = mean_delay_ms / 1000
        out.connection = connections / delay_s
        if threads is not None:
            out.thread = threads / delay_s
        if db_connections is not None:
            out.database = db_connections / delay_s
    cpus = max(1, server_cpus)
    if compute_us > 0:
        out.cpu = cpus / (compute_us / 1e6)  # the work alone (see the module's docstring)
    elif cpu_rps:
        out.cpu = cpu_rps
    return out


def efficiency(rps, ceilings):
    low = ceilings.lowest()
    return rps / low if low else None


# The threads a peer's /block holds, each for the whole call: Tokio's spawn_blocking pool (512 by
# default, tokio-peer --blocking-threads), and Go's limit on OS threads (debug.SetMaxThreads,
# 10,000 by default) -- a goroutine in nanosleep(2) holds its thread, and past the limit the Go
# runtime ends the program rather than queue. A waiting /delay holds neither (a timer).
PEER_BLOCK_THREADS = {"tokio": 512, "go": 10000}


def waiting_threads(kind, path, *, workers=64, loops=1, pool=64, offload="standard",
                    wait_mode="timer", peer=None, db_mode="readiness"):
    """The threads a request to `path` holds while it waits in a server of this kind, or None
    when a waiting request holds no thread (an async timer, a thread per call, nginx or node).
    `peer` names a peer (kind "peer"): Go's and Tokio's /block hold one (PEER_BLOCK_THREADS).
    A /db/ request in an async model holds its loop with --db-mode blocking (the driver blocks
    it), a thread of the offload pool with pool, and none with readiness."""
    is_delay, is_block = path.startswith("/delay/"), path.startswith("/block/")
    is_db = path.startswith("/db/")
    if kind == "peer":
        return PEER_BLOCK_THREADS.get(peer) if is_block else None
    if kind == "blocking":
        return workers if (is_delay or is_block or is_db) else None  # a worker waits through
    if kind != "async":
        return None
    if is_db:
        return {"blocking": loops, "pool": pool}.get(db_mode)
    if is_delay:
        return loops if wait_mode == "sleep" else None  # the anti-pattern sleeps on the loop
    if is_block:
        return {"inline": loops, "thread": None}.get(offload, pool)
    return None


def database_connections(kind, path, *, db_pool=16, loops=1, db_mode="readiness"):
    """The database connections the /db/ requests of a server share (None for another path): with
    readiness each loop of an async model has a pool of its own (`--db-pool` per loop); the
    blocking model, and an async model whose driver blocks (--db-mode blocking or pool), share
    one of `--db-pool` connections."""
    if not path.startswith("/db/") or kind == "peer":
        return None
    return db_pool * loops if kind == "async" and db_mode == "readiness" else db_pool
