"""Bytes per waiting request: what one request left waiting costs a server in memory, measured.

The method (harness/waiting-cost, cm-price's profiles with a "memory" key): a freshly started
server, its resident set read, N connections each sending `GET /delay/60000` so that N requests
wait together, the resident set read again; the difference over N. A waiting request in an async
model holds a connection object, a coroutine frame or a callback's state, its timer and its read
buffer, all in the one process's heap, so that difference is its cost.

A waiting request in the blocking model holds a whole worker thread, and the workers are started
with the server -- before any "before" reading could be taken. So the blocking model is measured
across two servers: one with 1 worker holding 1 waiting request, one with N workers holding N;
the difference over N - 1 is one worker with its request (its stack's touched pages, its
thread-local state, its connection). A thread also reserves its stack (8 MiB by default, most of
it never touched, so not resident): read from /proc/PID/maps as the size of the anonymous
read-write mapping that N - 1 more threads add N - 1 of (each after its guard page), it is
reported beside the resident bytes, never added to them. (The difference in virtual size would
also count the malloc arenas new threads reserve, 64 MiB each, shared, up to 8 per CPU.)

An idle keep-alive connection is measured the same way (`idle=True`): each connection asks
`GET /plaintext` once, reads its answer whole, and then sends nothing, as a browser's or a client
pool's spare connection does. What it holds between requests is the whole cost of keeping it: a
connection object, its deadline's timer, and whatever buffer the model keeps lent while it waits.
The connections still open at the end are counted: a server that closed some of them meanwhile
would show a smaller cost than keeping them has.

Pure measurement: no figure here is computed from anything but two /proc readings.
"""

import collections
import dataclasses
import socket
import time

from . import proc, servers

WAIT = b"GET /delay/60000 HTTP/1.1\r\nHost: x\r\n\r\n"
#: An idle connection's one request: answered at once, then the connection is kept and sends nothing.
ASK_ONCE = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
ANSWER_TIMEOUT_S = 10.0
#: Time for every request sent to be read, parsed and waiting before the second reading.
SETTLE_S = 1.0


@dataclasses.dataclass
class WaitingCost:
    server: str
    waiting: int
    threads: int  # the server process's threads with every request waiting
    rss_before_kib: int
    rss_after_kib: int
    bytes_per_waiting: int  # resident
    reserved_bytes_per_waiting: "int | None" = None  # virtual (the blocking model's stacks)
    method: str = ""
    vm_size_kib: int = 0  # the server's address space with every request waiting
    # The standing cost: ms of CPU a second the server spent while the requests waited and none
    # was due (its sweeps and ticks), read from /proc over standing_s (10 ms ticks); None: not read.
    standing_cpu_ms_per_s: "float | None" = None
    # What each connection held: "waiting" (a request in /delay/60000) or "idle" (a keep-alive
    # connection after its one answer); the connections the server still had open at the end.
    holding: str = "waiting"
    still_open: "int | None" = None

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d):
        return cls(**{k: d[k] for k in (f.name for f in dataclasses.fields(cls)) if k in d})

    def text(self):
        """"2.1 KiB", or "31 KiB (+8.0 MiB of stack reserved)" for a thread per request."""
        out = kib_text(self.bytes_per_waiting)
        if self.reserved_bytes_per_waiting:
            out += f" (+{mib_text(self.reserved_bytes_per_waiting)} of stack reserved)"
        return out


def kib_text(n_bytes):
    return f"{n_bytes / 1024:.1f} KiB"


def mib_text(n_bytes):
    return f"{n_bytes / 1024 / 1024:.1f} MiB"


def per_request(before, after, n):
    """Whole bytes each of n waiting requests added between two readings in KiB."""
    return (after - before) * 1024 // n if n > 0 else 0


def hold(port, n, socks, idle=False):
    """Opens n connections to the server, appended to `socks` (the caller closes them): each sends
    a request that waits a minute or, `idle`, one answered at once (read whole) and then nothing.
    Then waits SETTLE_S."""
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
        if idle:
            s.settimeout(ANSWER_TIMEOUT_S)
            s.sendall(ASK_ONCE)
            servers.read_answer(s)
            s.settimeout(None)
        else:
            s.sendall(WAIT)
    time.sleep(SETTLE_S)


def still_open(socks):
    """How many of the connections the server has neither closed nor reset."""
    count = 0
    for s in socks:
        try:
            data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:  # nothing to read: open, and quiet
            count += 1
            continue
        except OSError:  # reset
            continue
        if data:  # an unasked-for byte, but open
            count += 1
    return count


def anonymous_mappings(pid):
    """Counter of (size in bytes, permissions) of the process's anonymous private mappings."""
    out = collections.Counter()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 5 and fields[1].endswith("p"):  # no path: anonymous
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                out[(hi - lo, fields[1])] += 1
    return out


def stack_size(fewer, more, added):
    """The size of the mapping each of `added` more threads brought: the largest read-write size
    whose count grew by at least `added` between the two Counters (anonymous_mappings), plus the
    guard page before it when the guards grew as much. None when no size grew so."""
    grown = [size for (size, perms), n in more.items()
             if perms == "rw-p" and n - fewer.get((size, perms), 0) >= added]
    if not grown:
        return None
    size = max(grown)
    guards = [g for (g, perms), n in more.items()
              if perms == "---p" and g <= 64 * 1024 and n - fewer.get((g, perms), 0) >= added]
    return size + (min(guards) if guards else 0)


def _reading(server):
    r = server.readings()
    return (r.rss_kib, r.threads, anonymous_mappings(server.pid),
            proc.status_kib(server.pid, "VmSize"))


def standing_cpu(server, seconds):
    """ms of CPU a second the server spends over `seconds` with nothing to do but hold what it
    holds; None for no window."""
    if seconds <= 0:
        return None
    start = server.readings().cpu_s
    time.sleep(seconds)
    return round((server.readings().cpu_s - start) * 1000 / seconds, 1)


def _held_on(start, n, stop_grace_s=15.0, logs=None, standing_s=0.0, idle=False):
    """(before, after, standing, still open) of a server start() gives: readings around n
    connections held (hold(): requests left waiting, or `idle` connections), its standing_cpu()
    while they are held, and how many it still had open after that. The server is stopped with
    SIGTERM (it drains: none of the models notices that a waiting request's client left, so it
    waits out its --drain-ms), then SIGKILL after stop_grace_s; what it printed is appended to
    `logs` when one is given."""
    socks = []
    with start() as server:
        try:
            time.sleep(0.5)  # its threads started, its first allocations done
            before = _reading(server)
            hold(server.port, n, socks, idle)
            after = _reading(server)
            standing = standing_cpu(server, standing_s)
            still = still_open(socks)
        finally:
            for s in socks:
                s.close()
            server.stop(grace=stop_grace_s)
            if logs is not None:
                with open(server.log_path, errors="replace") as f:
                    logs.append(f.read())
    return before, after, standing, still


def _holding(idle):
    return "idle" if idle else "waiting"


def measure_async(name, n, start, idle=False, **stop):
    """One server, n requests waiting (or n idle connections): (after - before) / n. `start()`
    starts a fresh server."""
    before, after, standing, still = _held_on(start, n, idle=idle, **stop)
    held = (f"{n:,} keep-alive connections are each answered once (/plaintext) and left idle"
            if idle else f"{n:,} requests wait in /delay/60000")
    return WaitingCost(name, n, after[1], before[0], after[0], per_request(before[0], after[0], n),
                       None, f"one fresh server, RSS before and after {held}, over their number",
                       after[3], standing, _holding(idle), still)


def measure_threads(name, n, start_with, idle=False, **stop):
    """A thread per waiting request (or idle connection): a server of 1 worker holding 1, one of n
    holding n, the difference over n - 1 (resident and reserved). `start_with(threads)` starts a
    fresh one."""
    if n < 2:
        raise ValueError("a thread per waiting request is measured across 1 and n > 1 workers")
    # The N-worker server first (its threads exist from its start until its drain ends: a reader
    # of /proc/meminfo meanwhile sees their kernel stacks), then the 1-worker reference, cut short.
    _, many, standing, still = _held_on(lambda: start_with(n), n, idle=idle, **stop)
    short = dict(stop, stop_grace_s=min(1.0, stop.get("stop_grace_s", 1.0)), logs=None,
                 standing_s=0.0)
    _, one, _, _ = _held_on(lambda: start_with(1), 1, idle=idle, **short)
    held = "idle connection" if idle else "waiting request"
    return WaitingCost(name, n, many[1], one[0], many[0], per_request(one[0], many[0], n - 1),
                       stack_size(one[2], many[2], n - 1),
                       f"two fresh servers, 1 worker holding 1 {held} and {n:,} "
                       f"holding {n:,}: the difference in RSS over {n - 1:,}; the "
                       "stack each thread reserves, from /proc/PID/maps", many[3], standing,
                       _holding(idle), still)


def measure(name, n, *, loops=1, cpus=(), bin_dir=None, program=None, args=(), pool=None,
            workdir=None, stop_grace_s=15.0, logs=None, standing_s=0.0, idle=False):
    """The cost of n requests waiting (or, `idle`, n idle keep-alive connections) in a server of
    this name (a model of cm-server, or a peer): an async model with `loops` event loops; the
    blocking model with one worker per connection. Each server is stopped as _held_on says (a
    short stop_grace_s cuts its drain); standing_s > 0 also reads its standing_cpu() meanwhile."""
    stop = {"stop_grace_s": stop_grace_s, "logs": logs, "standing_s": standing_s, "idle": idle}
    def server(threads):
        return servers.Server(name, cpus=cpus, threads=threads, pool=pool, args=args,
                              bin_dir=bin_dir, program=program, workdir=workdir)

    if servers.kind_of(name) == "blocking":
        return measure_threads(name, n, server, **stop)
    threads = None if name in ("node", "nginx") else loops  # one process, its own threads
    return measure_async(name, n, lambda: server(threads), **stop)
