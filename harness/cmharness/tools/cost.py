"""cost -- what one request costs each server: its CPU time and its system calls (issue 12).

    harness/cost                            # what `make cost` runs: writes results/cost.md and results/cost/
    harness/cost --rounds 10 --duration 2   # more rounds, longer windows: narrower intervals
    harness/cost --servers asio_coro,nginx --out /tmp/cost.md --data-dir /tmp/cost

Prices every model cm-server was built with (`--threads 1`: one loop), nginx with one worker
(harness/peers/nginx.conf.in) and Node.js (harness/peers/delay-server.js), each load on a freshly
started server (cmharness.servers) pinned to CPU 0, its client on CPU 1: `/plaintext` with
`wrk -t1 -c256` and with `h2load --h1 -t1 -c256`, and `/delay/100` with `cm-load -c 2000 --delay 100`,
which checks every answer (nginx has no /delay route). One client run holds two windows: the
measured one (the server's CPU from /proc/PID/stat, the whole process tree, over the answers sent
in it), then a shorter one under `strace -c -f -p PID` beside the server (system calls per answer,
by name; the server paused while strace attaches and detaches; no CPU or rps read from it).
Answers are counted where the server sends them: its connections' bytes_acked (ss) over the size
of one answer. The report's "How it was measured" says the rest.

The servers run in --rounds rounds (default 6), in another order each round. Each figure is the
median over the rounds with its distribution-free 95% interval, each ratio to nginx (to node on
/delay) the median of the ratios taken within a round with its interval (cmharness.stats; six
rounds is the fewest that give one). The windows are short -- 1 s measured, 0.4 s under strace,
0.2 s to settle (they were 2 s, 1 s and 0.3 s with 3 rounds) -- so that six rounds of every server
take about six minutes; --duration, --strace-duration and --settle lengthen them.

Loopback only; every run is bounded in time (a client that overstays is killed and its row marked
failed); every process started is stopped by its pid on the way out, even on an error or Ctrl-C
(cmharness.processes). Writes --out (results/cost.md) and --data-dir (results/cost/: runs.csv,
cost.json with provenance() and its tree hashes, machine.md, machine.json). Builds nothing:
`make cost` builds first. Run with /usr/bin/python3 (Debian's), which this file names in line 1.
"""
import argparse
import collections
import contextlib
import csv
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from cmharness import ROOT, default_bin_dir, proc, processes, provenance, results, stats
from cmharness import load as cm_load
from cmharness.rounds import order as round_order
from cmharness.parsers import parse_h2load, parse_ss, parse_strace, parse_wrk
from cmharness.servers import PEERS, Server, built_models, find_program

PLAINTEXT_BODY = b"Hello, World!"
LOADS = ("wrk", "h2load", "delay")
# Calls that only strace's coming and going makes: a call blocked when the server is paused
# (or attached to) is resumed through restart_syscall. Counted, shown, left out of the totals.
ARTIFACTS = ("restart_syscall",)
WRK_BOUND_S = 120  # wrk's -d: it is stopped (SIGINT) as soon as both windows are done
CONNECT_GIVE_UP_S = 20  # connections slower than this to open: the machine is too busy, no retry
TAIL_S = 0.2  # the windows end this long before the client's run does
SLACK_S = 0.2  # on a busy machine every step runs late; the strace window, last, gets shorter


def say(text):
    print(f"cost: {text}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Counting answers where the server sends them. Every answer to one path is the same bytes (the
# Date header has a fixed width), so the bytes the server's connections sent in a window, over
# the size of one answer, is the answers it sent in that window: the same count for every
# client and every server, leaving out opening and closing the connections.


def answer_size(port, path, timeout=5.0):
    """The bytes of one keep-alive answer to GET path, read whole."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError(f"GET {path}: the connection closed before the answer's head")
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        if not m or not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"GET {path}: {head.splitlines()[0]!r}, not a 200 with Content-Length")
        while len(body) < int(m.group(1)):
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        return len(head) + 4 + int(m.group(1))


def established(port, info):
    argv = ["ss", "-tnH" + ("i" if info else ""), "state", "established", f"( sport = :{port} )"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout


def open_connections(port):
    return sum(1 for line in established(port, info=False).splitlines() if line.strip())


def voluntary_switches(pids):
    """How often the server's threads went to sleep: voluntary context switches of every thread."""
    total = 0
    for p in pids:
        try:
            total += proc.context_switches(p)[0]
        except (OSError, ProcessLookupError):
            pass
    return total


class Snapshot:
    """The server's CPU seconds, its threads' sleeps and its connections' bytes sent, at one moment
    (the middle of the reads; `cost` is how long they took)."""

    def __init__(self, server, switches=True):
        t0, c0 = time.monotonic(), server.cpu_seconds()
        self.switches = voluntary_switches(server.pids()) if switches else None
        self.socks = parse_ss(established(server.port, info=True))
        t1, c1 = time.monotonic(), server.cpu_seconds()
        self.t, self.cpu_s, self.cost = (t0 + t1) / 2, (c0 + c1) / 2, t1 - t0


def bytes_between(before, after):
    """Bytes sent between two parse_ss() readings, and the connections gone by the second (their
    bytes after the first are lost). A connection whose count went down was reopened on the same
    ports: a new one, all of whose bytes count."""
    sent = 0
    for key, acked in after.items():
        earlier = before.get(key)
        sent += acked - earlier if earlier is not None and acked >= earlier else acked
    return sent, sum(1 for key in before if key not in after)


def window_figures(a, b, size):
    """The measured window between snapshots a and b, answers being `size` bytes each."""
    sent, lost = bytes_between(a.socks, b.socks)
    secs, cpu_s, answers = b.t - a.t, b.cpu_s - a.cpu_s, sent / size
    return {"answers": answers, "window_s": secs, "cpu_s": cpu_s, "rps": answers / secs,
            "cpu_busy": cpu_s / secs, "connections_lost": lost, "edge_read_s": a.cost,
            "cpu_us_per_request": cpu_s * 1e6 / answers if answers else None,
            "sleeps_per_request": (b.switches - a.switches) / answers if answers else None}


def traced_figures(calls, call_errors, answers, secs):
    """The strace window: calls per request in all (strace's ARTIFACTS left out) and by name."""
    counted = sum(v for k, v in calls.items() if k not in ARTIFACTS)
    return {"calls": calls, "call_errors": call_errors, "answers": answers, "window_s": secs,
            "rps_traced": answers / secs, "per_request": counted / answers if answers else None,
            "per_request_by_call": {k: v / answers for k, v in calls.items()} if answers else {}}


# ---------------------------------------------------------------------------------------------
# strace beside the server, which is paused while strace comes and goes.


@contextlib.contextmanager
def paused(server):
    """SIGSTOP to the server's processes until the block ends (SIGCONT, whatever happened); the
    block runs once every thread has stopped (three reads in a row: a traced thread passes
    through a stop of strace's on its way to the group stop)."""
    pids = server.pids()
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    try:
        deadline, stable = time.monotonic() + 30, 0
        while stable < 3:
            stable = stable + 1 if all(st in "Tt" for st in proc.thread_states(pids)) else 0
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not stop within 30 s of SIGSTOP")
            time.sleep(0.01)
        yield
    finally:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)


class Strace:
    """strace -c -f -p, attached to every process of the server's tree, on the server's CPU (the
    server stops at each call until strace lets it go on, so the two take turns there);
    detached with SIGINT. Attaching to a paused server leaves it paused; so does detaching."""

    def __init__(self, server, cpu, scratch):
        self.out = os.path.join(scratch, "strace.txt")
        self.err = os.path.join(scratch, "strace.err")
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.out)
        pids = server.pids()
        self.tasks = sum(proc.thread_count(p) for p in pids)
        self.command = ["strace", "-c", "-f", "-o", self.out] + [a for p in pids for a in ("-p", str(p))]
        with open(self.err, "w") as err:
            self.proc = processes.start(self.command, [cpu], stdout=subprocess.DEVNULL, stderr=err)
        # One "attached" line per -p (with "with N threads" for a threaded process).
        deadline = time.monotonic() + 30
        while self._stderr().count("attached") < len(pids):
            problem = None
            if self.proc.poll() is not None:
                problem = f"strace exited at attach: {self._stderr().strip()[-300:]}"
            elif time.monotonic() > deadline:
                problem = "strace did not attach within 30 s"
            if problem:
                self.close()
                raise RuntimeError(problem)
            time.sleep(0.005)

    def _stderr(self):
        with open(self.err) as f:
            return f.read()

    def close(self):
        processes.stop(self.proc, signal.SIGINT, grace=60)

    def detach(self):
        """SIGINT: strace writes its table and leaves. Returns parse_strace() of the table."""
        self.close()
        with open(self.out) as f:
            return parse_strace(f.read())


# ---------------------------------------------------------------------------------------------
# One load on one server: one client run holding a measured window, then a strace window.

Plan = collections.namedtuple("Plan", "seconds each_way edge")


def client_plan(kind, args, tasks, connect_allowance):
    """How long the client runs once its connections are open (wrk: a bound; h2load: from its start,
    so the time its connections take to open on top), and the time allowed for strace to attach
    or detach (`each_way`: a server's threads one at a time) and for a read at a window's edge
    (`edge`: a 2,000-thread server's /proc takes a while). On a quiet machine strace took 0.1 s to
    attach to one loop and 0.4-0.5 s to 2,002 threads; an edge's reads 0.03 s and 0.2-0.3 s."""
    each_way = 0.15 + tasks / 3000 if args.strace else 0
    edge = 0.05 + tasks / 5000
    traced = 2 * each_way + args.strace_duration + 2 * edge if args.strace else 0
    seconds = round(args.settle + args.duration + 2 * edge + TAIL_S + SLACK_S + traced, 1)
    if kind == "wrk":
        seconds = WRK_BOUND_S
    elif kind == "h2load":
        seconds = round(seconds + connect_allowance, 1)
    return Plan(seconds, each_way, edge)


def client_command(kind, port, args, seconds, json_path):
    """The client's command line (processes.start pins it to the client CPU)."""
    target = f"http://127.0.0.1:{port}"
    if kind == "wrk":
        return ["wrk", "-t1", f"-c{args.connections}", f"-d{math.ceil(seconds)}s", f"{target}/plaintext"]
    if kind == "h2load":
        return ["h2load", "--h1", "-t1", f"-c{args.connections}", "-D", f"{round(seconds * 1000)}ms",
                f"{target}/plaintext"]
    return cm_load.command(target + "/delay/{ms}", connections=args.delay_connections, threads=1,
                           duration_s=round(seconds, 1), warmup_s=0, delay=args.delay,
                           json_path=json_path, bin_dir=args.bin_dir)


def sleep_until(t):
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


class SlowConnect(RuntimeError):
    """The client's connections took longer to open than the run allowed for."""

    def __init__(self, seen, message):
        super().__init__(message)
        self.seen = seen


def run_client(argv, cpu, limit_s, scratch, during, check):
    """Runs a client pinned to `cpu` to its end (killed after limit_s); during(popen, stderr_path)
    runs meanwhile. Returns (stdout, wall seconds). check: a non-zero exit status is an error (wrk
    and h2load are not checked: their counts say what went wrong)."""
    out_path, err_path = os.path.join(scratch, "client.out"), os.path.join(scratch, "client.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.monotonic()
        p = processes.start(argv, [cpu], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            during(p, err_path)
            p.wait(timeout=max(1.0, limit_s - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            processes.stop(p, signal.SIGKILL)
            raise RuntimeError(f"{shlex.join(argv)} did not end within {limit_s:.0f} s; killed") from None
        finally:
            processes.stop(p)
        wall = time.monotonic() - t0
    with open(out_path) as f, open(err_path) as g:
        stdout, stderr = f.read(), g.read()
    if check and p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {p.returncode}: {(stderr or stdout).strip()[-300:]}")
    return stdout, wall


def start_server(name, kind, args, scratch):
    """A fresh server on the server CPU that answers /plaintext right. --threads is the event loops
    of an async model (1), the worker pool of the blocking model (one per connection)."""
    conns = args.delay_connections if kind == "delay" else args.connections
    threads = None if name in PEERS else 1
    if name == "blocking":
        threads = args.blocking_workers or conns
    server = Server(name, cpus=[args.server_cpu], threads=threads, bin_dir=args.bin_dir, workdir=scratch)
    try:
        status, body = server.get("/plaintext")
        if status != 200 or body != PLAINTEXT_BODY:
            raise RuntimeError(f"{name}: /plaintext answered {status} {body[:60]!r}, not 200 'Hello, World!'")
    except BaseException:
        server.close()
        raise
    return server


class Run:
    """One client run on a freshly started server, long enough to hold both windows:
      connections open -> settle -> measured window (CPU, answers) -> server paused, strace
      attached, server continued -> strace window -> server paused, strace detached, continued.
    Its row of figures is self.row; run() raises SlowConnect when h2load's connections took longer
    to open than `allowance` seconds (the caller retries with more)."""

    def __init__(self, kind, server, args, scratch, allowance):
        self.kind, self.server, self.args, self.scratch = kind, server, args, scratch
        self.allowance = allowance
        self.conns = args.delay_connections if kind == "delay" else args.connections
        self.size = answer_size(server.port, f"/delay/{args.delay}" if kind == "delay" else "/plaintext")
        self.plan = client_plan(kind, args, sum(proc.thread_count(p) for p in server.pids()), allowance)
        self.json_path = os.path.join(scratch, "cm-load.json")
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.json_path)  # a run that writes none must not read the last one's
        self.command = client_command(kind, server.port, args, self.plan.seconds, self.json_path)
        self.trace = None
        self.t_start = self.t_open = self.client_end = None
        self.row = {"server_command": server.command, "threads": server.threads_label,
                    "answer_bytes": self.size, "client_seconds": self.plan.seconds,
                    "command": [c if c != self.json_path else "out.json" for c in self.command]}

    def run(self):
        limit = self.plan.seconds + 3 * CONNECT_GIVE_UP_S + 30
        row = self.row
        try:
            out, wall = run_client(self.command, self.args.client_cpu, limit, self.scratch, self.during,
                                   check=self.kind == "delay")
        except RuntimeError:
            if "connect_error" in row:  # the client was stopped early, on purpose
                raise SlowConnect(row.get("connect_s", CONNECT_GIVE_UP_S), row["connect_error"]) from None
            raise
        row["client_seconds"] = wall if self.kind == "wrk" else self.plan.seconds
        row["client_wall_s"] = wall
        if "connect_error" in row:
            raise SlowConnect(row.get("connect_s", wall), row["connect_error"])
        client = self.client_counts(out)
        row["errors"] = client.pop("errors")
        row["client"] = client  # the whole run, the strace window included: context only
        if "window_error" in row:
            raise RuntimeError(row["window_error"])
        return row

    def close(self):
        if self.trace is not None:
            self.trace.close()

    def client_counts(self, out):
        if self.kind == "wrk":
            return parse_wrk(out)
        if self.kind == "h2load":
            return parse_h2load(out)
        r = cm_load.LoadResult.read(self.json_path)
        return {"requests": r.requests, "rps": r.rps, "latency_p50_ms": r.latency_us.p50 / 1e3,
                "latency_p99_ms": r.latency_us.p99 / 1e3,
                "errors": dict(r.errors, not_open=r.connections_requested - r.connections_open)}

    def during(self, client, err_path):
        """What runs while the client does: both windows; then the client is told to end."""
        if self.wait_connected(client, err_path):
            a = self.measured_window(client)
            if a is not None and self.args.strace:
                self.strace_window(client, a)
        if "connect_error" in self.row:
            processes.stop(client)  # its windows no longer fit in its run: no use waiting for its end
        elif self.kind == "wrk" and client.poll() is None:
            client.send_signal(signal.SIGINT)  # wrk reports what it counted, then exits

    def connected(self, err_path):
        # cm-load says when its connect phase is over (it reopens a connection that timed out, so
        # on a starved server the count may never stand at 2,000); for wrk and h2load, the server's
        # established connections.
        if self.kind == "delay":
            with open(err_path) as f:
                return "cm-load: opened" in f.read()
        return open_connections(self.server.port) >= self.conns

    def wait_connected(self, client, err_path):
        """True once the client's connections are open; else False with row["connect_error"]."""
        self.t_start = time.monotonic()
        give_up = CONNECT_GIVE_UP_S if self.kind == "h2load" else 3 * CONNECT_GIVE_UP_S
        problem = None
        while not self.connected(err_path):
            waited = time.monotonic() - self.t_start
            if client.poll() is not None:
                problem = f"the client ended before its {self.conns} connections were open ({waited:.1f} s)"
            elif waited > give_up:
                problem = f"its {self.conns} connections were not open after {waited:.0f} s"
            if problem:
                self.row["connect_error"] = problem
                return False
            time.sleep(0.05)
        self.t_open = time.monotonic()
        self.row["connect_s"] = connect_s = self.t_open - self.t_start
        if self.kind == "h2load" and connect_s > self.allowance:
            self.row["connect_error"] = (f"its {self.conns} connections took {connect_s:.1f} s to open, "
                                         f"more than the {self.allowance:.1f} s allowed")
            return False
        return True

    def measured_window(self, client):
        """The server's CPU and answers over args.duration; the first snapshot, or None on a problem
        (row["window_error"])."""
        end = {"wrk": self.t_open + WRK_BOUND_S, "h2load": self.t_start + self.plan.seconds,
               "delay": self.t_open + self.plan.seconds}
        self.client_end = end[self.kind] - TAIL_S
        time.sleep(self.args.settle)
        a = Snapshot(self.server)
        # The window ends in time for its closing read to finish before the client does.
        sleep_until(min(a.t + self.args.duration, self.client_end - 2 * a.cost))
        b = Snapshot(self.server)
        if client.poll() is not None:
            self.row["window_error"] = "the client ended inside the measured window"
        elif b.t - a.t < self.args.duration / 2:
            self.row["window_error"] = (f"the measured window shrank to {b.t - a.t:.1f} s: reading the "
                                        f"server's /proc and sockets took {a.cost:.1f} s")
        else:
            self.row.update(window_figures(a, b, self.size))
            return a
        return None

    def strace_window(self, client, a):
        """System calls per answer, the server paused while strace attaches and while it detaches,
        so the calls counted are exactly those made for the answers sent between the two pauses.
        The window ends in time for the detach before the client's run does."""
        each_way, cost = self.plan.each_way, a.cost
        if self.kind == "wrk":
            self.client_end = time.monotonic() + 2 * each_way + self.args.strace_duration + 2 * cost + 1
        if self.client_end - time.monotonic() - 2 * each_way - 2 * cost < 0.3:
            self.row["strace_error"] = "no time left in the client's run for the strace window"
            return
        t0 = time.monotonic()
        with paused(self.server):
            s0 = Snapshot(self.server, switches=False)
            try:
                self.trace = Strace(self.server, self.args.server_cpu, self.scratch)
            except RuntimeError as e:
                self.row["strace_error"] = str(e)
                return
            t_resume = time.monotonic()
        # Detaching takes about as long as attaching did.
        end = min(t_resume + self.args.strace_duration, self.client_end - max(each_way, t_resume - t0) - cost)
        sleep_until(max(end, t_resume + 0.3))
        t_pause = time.monotonic()
        with paused(self.server):
            s1 = Snapshot(self.server, switches=False)
            calls, call_errors = self.trace.detach()
        sent, lost = bytes_between(s0.socks, s1.socks)
        traced = traced_figures(calls, call_errors, sent / self.size, t_pause - t_resume)
        traced.update({"connections_lost": lost, "tasks": self.trace.tasks, "attach_pause_s": t_resume - t0,
                       "strace_command": self.trace.command})
        self.judge_trace(client, traced)

    def judge_trace(self, client, traced):
        problem = None
        if client.poll() is not None:
            problem = "the client ended inside the strace window"
        elif traced["connections_lost"]:
            problem = f"{traced['connections_lost']} connections closed inside the strace window"
        elif not traced["answers"]:
            problem = (f"no answer in the {traced['window_s']:.1f} s strace window: the traced server, "
                       f"{traced['tasks']} threads, did not keep up")
        if problem:
            self.row["strace_error"] = problem
            self.row["strace_discarded"] = traced
        else:
            self.row["strace"] = traced


def run_load(kind, name, args, scratch, allowance):
    """One load on a freshly started server; the server is stopped whatever happens."""
    server = start_server(name, kind, args, scratch)
    run = None
    try:
        run = Run(kind, server, args, scratch, allowance)
        return run.run()
    finally:
        if run is not None:
            run.close()
        server.close()


# ---------------------------------------------------------------------------------------------
# Rounds: every server, each load, in another order each round.


def measure(kind, name, args, scratch, allowance, label):
    """run_load(), tried once more when a busy machine opened the connections too slowly
    (allowance: seconds allowed for them, by load and then by (server, load), learned upwards).
    Returns the row, or {"error": why}."""
    row = None
    for attempt in range(2):
        given = allowance.get((name, kind), allowance[kind])
        try:
            row = run_load(kind, name, args, scratch, given)
            allowance[(name, kind)] = max(0.3, 0.2 + 1.5 * row.get("connect_s", 0))
            return row
        except SlowConnect as e:
            allowance[(name, kind)] = max(given * 2, e.seen * 1.5 + 0.5)
            retry = attempt == 0 and e.seen < CONNECT_GIVE_UP_S and "not open" not in str(e)
            say(f"{label} {e}" + (f"; trying again, allowing {allowance[(name, kind)]:.1f} s" if retry else ""))
            row = {"error": str(e)}
            if not retry:
                return row
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            return {"error": (str(e).strip().splitlines() or [repr(e)])[0][:300]}
    return row


def progress(label, row, seconds):
    if "error" in row:
        return f"{label} FAILED: {row['error']}"
    calls = (row.get("strace") or {}).get("per_request")
    text = (f"{label} {row['rps']:>9,.0f} rps  {fmt(row['cpu_us_per_request'], 2):>7} µs/req  "
            f"{fmt(calls, 2):>6} calls/req  errors {describe_errors(row['errors']) or 0}  ({seconds:.1f} s)")
    return text + (f"  strace: {row['strace_error']}" if row.get("strace_error") else "")


def run_rounds(args, servers, scratch):
    rounds = []
    allowance = {kind: 0.5 + (args.delay_connections if kind == "delay" else args.connections) / 1000
                 for kind in LOADS}
    for r in range(args.rounds):
        order = round_order(servers, r, args.rounds, "rotate")
        rnd = {"order": order, "load_average": list(proc.load_average()), "rows": {}}
        rounds.append(rnd)
        for name in order:
            rnd["rows"][name] = {}
            for kind in loads_of(name):
                t0 = time.monotonic()
                label = f"round {r + 1} {name:<16} {kind:<7}"
                row = measure(kind, name, args, scratch, allowance, label)
                rnd["rows"][name][kind] = row
                say(progress(label, row, time.monotonic() - t0))
    return rounds


def loads_of(name):
    return [kind for kind in LOADS if not (name == "nginx" and kind == "delay")]  # nginx: /plaintext only


# ---------------------------------------------------------------------------------------------
# The figures over the rounds (cmharness.stats).

FIGURES = {  # name -> (its value in a run's row, what it is)
    "cpu": (lambda row: row["cpu_us_per_request"], "server CPU µs per request"),
    "rps": (lambda row: row["rps"], "answers per second in the measured window"),
    "busy": (lambda row: row["cpu_busy"], "server CPU time / wall time"),
    "sleeps": (lambda row: row.get("sleeps_per_request"), "voluntary context switches per request"),
    "calls": (lambda row: (row.get("strace") or {}).get("per_request"), "system calls per request"),
    "rps_traced": (lambda row: (row.get("strace") or {}).get("rps_traced"), "answers per second under strace"),
}


def per_round(rounds, server, kind, key):
    """The figure `key` of one server and load in each round, None where that run failed."""
    out = []
    for rnd in rounds:
        row = rnd["rows"].get(server, {}).get(kind)
        out.append(FIGURES[key][0](row) if row and "error" not in row else None)
    return out


def value(rounds, server, kind, key):
    """The median over the rounds with its interval (None: never measured)."""
    return stats.estimate(per_round(rounds, server, kind, key))


def ratio(rounds, server, kind, key, ref):
    """The median of the within-round ratios server / ref, with its interval."""
    return stats.paired_ratio(per_round(rounds, server, kind, key), per_round(rounds, ref, kind, key))


def reference(kind):
    return "node" if kind == "delay" else "nginx"  # nginx's config answers /plaintext only


def summary(rounds, servers):
    out = {}
    for s in servers:
        out[s] = {}
        for kind in LOADS:
            out[s][kind] = {}
            for key in FIGURES:
                to = ratio(rounds, s, kind, key, reference(kind))
                out[s][kind][key] = {"value": as_json(value(rounds, s, kind, key)), "reference": reference(kind),
                                     "ratio": as_json(to)}
    return out


def as_json(estimate):
    return None if estimate is None else estimate.to_json()


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def cell(e, digits=2):
    """"17.19 [16.80 17.52]", "17.19 [n=3]" with too few rounds for an interval, "-" if none."""
    return "-" if e is None else e.format(f"{{:,.{digits}f}}")


def median_of(e, digits):
    return "-" if e is None else fmt(e.estimate, digits)


def describe_errors(errors):
    return ", ".join(f"{k} {v}" for k, v in errors.items() if v)


# ---------------------------------------------------------------------------------------------
# The report: a View of a run's cost.json, and one function per section.


class View:
    def __init__(self, doc):
        self.doc = doc
        self.args = argparse.Namespace(**doc["settings"])
        self.servers, self.rounds = doc["servers"], doc["rounds"]
        self.models = [s for s in self.servers if s not in PEERS]
        self.machine = doc["provenance"]["machine"]
        a = self.args
        self.titles = {"wrk": "`/plaintext`, wrk", "h2load": "`/plaintext`, h2load --h1",
                       "delay": f"`/delay/{a.delay}`, cm-load, {a.delay_connections:,} conns"}

    def rows_of(self, server, kind):
        for rnd in self.rounds:
            row = rnd["rows"].get(server, {}).get(kind)
            if row and "error" not in row:
                yield row

    def flagged(self, server, kind):
        return " ⚠" if any(sum(row["errors"].values()) for row in self.rows_of(server, kind)) else ""

    def value(self, server, kind, key):
        return value(self.rounds, server, kind, key)

    def ratio(self, server, kind, key):
        return ratio(self.rounds, server, kind, key, reference(kind))

    def threads(self, server):
        return next((row["threads"] for kind in LOADS for row in self.rows_of(server, kind)), "-")

    def table(self, columns, threads=False):
        """A row per server and, for each load, a cell per column: (title, cell(server, load))."""
        head = "| server | threads |" if threads else "| server |"
        rule = "|---|---|" if threads else "|---|"
        for kind in LOADS:
            for title, _ in columns:
                head += f" {title.format(load=self.titles[kind], ref=reference(kind))} |"
                rule += "--:|"
        out = [head, rule]
        for s in self.servers:
            line = f"| {s} | {self.threads(s)} |" if threads else f"| {s} |"
            out.append(line + "".join(f" {cell_of(s, kind)} |" for kind in LOADS for _, cell_of in columns))
        return out + [""]


def header_section(v):
    a, doc = v.args, v.doc
    la = provenance.load_average_text(doc["provenance"]["load_average"])
    le = provenance.load_average_text(doc["ended"]["load_average"])
    return [
        "# What one request costs: server CPU and system calls per request", "",
        "For each model (`cm-server --threads 1`: one loop; the blocking model one worker per",
        "connection, see the notes), nginx (one worker) and Node.js, in one run: the server's CPU time per",
        "request and its system calls per request, on `/plaintext` with two clients nobody here wrote",
        f"(`wrk -t1 -c{a.connections}`, `h2load --h1 -t1 -c{a.connections}`) and on `/delay/{a.delay}` with "
        f"{a.delay_connections:,}",
        "connections (`cm-load`, which checks every answer). The `/delay` column's CPU per request is what a",
        "waiting request costs the server: read the request, arm a timer, wake, write the answer.", "",
        f"**Conditions**: {a.note or 'not stated (this run was given no --note)'}; load average {la} at the "
        f"start and {le} at the end.",
        "CPU time counts only while the server runs, so it suffers less from a noisy machine than rps does;",
        "but a server that shares its CPU with other work is woken more often for less work and finds its",
        "caches cold, so its figures read high. Read the ratios to nginx (taken within a round) before the",
        "absolute figures.", "",
        f"Regenerate: `make cost` (builds, then `{doc['command']}`); {doc['elapsed_s'] / 60:.1f} minutes for "
        "this run.", "",
        f"Each figure is the median over {len(v.rounds)} round{'s' if len(v.rounds) != 1 else ''} with its 95% "
        "interval in brackets, `[low high]`",
        "(distribution-free, from the order statistics; `[n=5]` where fewer than six rounds measured it, too",
        "few for an interval). Each ratio is the server's figure over the reference's in the same round: the",
        "median of those within-round ratios, with its interval. The reference is nginx; its config answers",
        "`/plaintext` only, so on `/delay` the reference is Node. **Two intervals that overlap mean no",
        "difference measured here**; a ratio whose interval holds 1.00 is no different from its reference.",
        "⚠ marks a figure from a client run that reported errors (see the notes).", ""]


def figure_tables(v):
    out = []
    for key, title, unit in (("cpu", "Server CPU per request", "µs"), ("calls", "System calls per request",
                                                                        "calls")):
        if key == "calls" and not v.args.strace:
            continue
        def figure(s, kind, key=key):
            e = v.value(s, kind, key)
            return cell(e) + (v.flagged(s, kind) if e else "")

        out += [f"## {title} ({unit})", ""] + v.table(
            [("{load}", figure), ("× {ref}", lambda s, kind, key=key: cell(v.ratio(s, kind, key)))], threads=True)
    return out


def summary_section(v):
    lines = []
    for kind in ("wrk", "h2load"):
        ranked = [(v.ratio(x, kind, "cpu"), x) for x in v.models]
        ranked = sorted([(r, x) for r, x in ranked if r], key=lambda rx: rx[0].estimate)
        if len(ranked) < 2 or not v.ratio("nginx", kind, "cpu"):
            continue

        def about(x):
            return (f"{median_of(v.value(x, kind, 'calls'), 2)} system calls and "
                    f"{median_of(v.value(x, kind, 'sleeps'), 3)} sleeps per request")

        (low, closest), (high, furthest) = ranked[0], ranked[-1]
        same = ""
        if low.has_interval and low.low <= 1.0 <= low.high:
            same = "; its interval holds 1.00: no difference from nginx measured here"
        lines.append(f"- {v.titles[kind]}: furthest from nginx, **{furthest}** at {high.format()}× nginx's CPU "
                     f"per request ({about(furthest)}); closest, **{closest}** at {low.format()}× "
                     f"({about(closest)}{same}); nginx: {median_of(v.value('nginx', kind, 'calls'), 2)} "
                     "calls per request.")
    if not lines:
        return []
    return ["In short (computed from the tables; the mix below says which calls):", ""] + lines + [""]


def sleeps_section(v):
    out = ["## Sleeps per request", "",
           "How often the server's threads went to sleep per answer in the measured window: the",
           "`voluntary_ctxt_switches` of every thread (`/proc/PID/task/*/status`), over the answers. A thread",
           "that blocks and is woken again costs the server a trip through the scheduler that no system-call",
           "count shows; a loop that finds work waiting each time it looks sleeps far less than once per",
           "request.", ""]
    return out + v.table([("{load}", lambda s, kind: cell(v.value(s, kind, "sleeps"), 3))])


def context_section(v):
    out = ["## Context: the rate, and how much of CPU 0 the server got", "",
           "Answers per second and the server's CPU busy (its CPU time over the window's length) in the",
           "measured window, and the rate under strace (how much strace slowed it), medians over the rounds.",
           "A server busy well under 100% on `/plaintext` was waiting for CPU 0, not for work: on a busy",
           "machine these say how much of the CPU each server got. They are not the comparison of speed",
           "(`results/quick/` is, from a quiet machine).", ""]
    def busy(s, kind):
        e = v.value(s, kind, "busy")
        return "-" if e is None else f"{e.estimate:.0%}"

    return out + v.table([("{load}: rps", lambda s, kind: median_of(v.value(s, kind, "rps"), 0)),
                          ("busy", busy),
                          ("rps under strace", lambda s, kind: median_of(v.value(s, kind, "rps_traced"), 0))])


def mix_rows(v, kind, shown):
    """The rows of one load's mix table: each call's median per request, and the share that failed."""
    traced = {s: [row["strace"] for row in v.rows_of(s, kind) if row.get("strace")] for s in shown}
    most = collections.Counter()
    for s in shown:
        for st in traced[s]:
            for name, per in st["per_request_by_call"].items():
                most[name] = max(most[name], per)
    out = []
    for name, top in most.most_common():
        if top < 0.01:
            continue
        vals, fails = [], []
        for s in shown:
            per = [st["per_request_by_call"].get(name, 0.0) for st in traced[s]]
            failed = [st["call_errors"].get(name, 0) / st["calls"][name] for st in traced[s] if st["calls"].get(name)]
            m = stats.median(per) if per else None
            vals.append("-" if m is None else ("·" if m < 0.005 else f"{m:.2f}"))
            f = stats.median(failed) if failed else 0
            fails.append(f"{f * 100:.0f}%" if m is not None and m >= 0.005 and f >= 0.005 else "")
        if all(x in ("·", "-") for x in vals):
            continue
        out.append(f"| `{name}` | " + " | ".join(vals) + " |")
        if any(fails):
            out.append("| &nbsp;&nbsp;% failed | " + " | ".join(fails) + " |")
    return out


def mix_section(v):
    if not v.args.strace:
        return []
    out = ["## The system-call mix per request", "",
           "Calls per request by name, medians over the rounds (a call under 0.01 per request everywhere is",
           "left out; `·` is under 0.005). The `% failed` rows are the share of those calls that returned an",
           "error (`EAGAIN` on a read that found nothing, for instance), where any did. `restart_syscall` is",
           "strace's (see the notes) and not in the totals.", ""]
    for kind in LOADS:
        shown = [s for s in v.servers if any(row.get("strace") for row in v.rows_of(s, kind))]
        if not shown:
            continue
        out += [f"### {v.titles[kind]}", "", "| call | " + " | ".join(shown) + " |", "|---|" + "--:|" * len(shown)]
        out += mix_rows(v, kind, shown)
        totals = [f"**{median_of(v.value(s, kind, 'calls'), 2)}**" for s in shown]
        out += ["| **total** | " + " | ".join(totals) + " |", ""]
    return out


def run_notes(v):
    notes, errored, runs = [], 0, 0
    for i, rnd in enumerate(v.rounds, 1):
        for s in v.servers:
            for kind in LOADS:
                row = rnd["rows"].get(s, {}).get(kind)
                if row is None:
                    continue
                runs += 1
                where = f"round {i}, {s}, {v.titles[kind]}"
                if "error" in row:
                    notes.append(f"- {where}: **failed, no figures**: {row['error']}")
                    continue
                if sum(row["errors"].values()):
                    errored += 1
                    notes.append(f"- {where}: ⚠ the client reported {describe_errors(row['errors'])} over its run "
                                 f"({row['client']['requests']:,} answers, the strace window included)")
                if row.get("strace_error"):
                    notes.append(f"- {where}: no system-call count: {row['strace_error']}")
                if row.get("connections_lost"):
                    notes.append(f"- {where}: {row['connections_lost']} connections closed during the measured "
                                 "window (their bytes after the last read are not counted)")
    first = (f"- Client errors: none in the {runs} client runs: every answer every client counted was right."
             if not errored else f"- Client errors: {errored} in the {runs} client runs (listed below).")
    return ["## Notes", "", first] + notes + [""]


ERROR_KINDS = [
    "What an error means (each kind is counted, and the figures beside it flagged ⚠):", "",
    "- **wrk**: `non_2xx_3xx`: an answer with another status; `connect`: a connection that could not be",
    "  opened; `read` / `write`: a read or write on a connection failed (a reset, or the server closed",
    "  it); `timeout`: a request unanswered after 2 s (wrk's default `--timeout`). wrk checks no body.",
    "- **h2load**: `failed`: requests that never completed (`errored` ones included); `errored`: failed",
    "  on a connection or protocol error; `timeout`: a connection closed for inactivity; `non_2xx`: 3xx,",
    "  4xx or 5xx answers. The requests in flight when `-D` ends are dropped, not errors. h2load checks no",
    "  body either.",
    "- **cm-load** (harness/load/README.md): `connect`: a connection that could not be opened; `reset`:",
    "  the server closed or reset a connection with a request in flight; `timeout`: no answer within",
    "  10 s; `status`: a wrong status; `body`: a body other than the delay asked for; `early`: an answer",
    "  before its delay (a server that did not wait); `not_open`: connections not open at the end.", ""]

STRACE_METHOD = [
    "- **System calls per request**: `strace -c -f -p PID` (every thread; nginx's master and worker)",
    "  over the strace window, over the answers sent in it. The server is paused (`SIGSTOP`) while",
    "  strace attaches and again while it detaches, so the calls counted are exactly those the server",
    "  made for those answers; its clients just wait (well under their timeouts). A call that was",
    "  blocked at a pause comes back as `restart_syscall`: strace's doing, so shown in the mix but left",
    "  out of the totals; an idle thread (the async models' 64-thread `/block` pool, Node's workers)",
    "  also shows the one wait it was in, a few dozen calls over thousands of answers. **strace slows",
    "  the server** (each call stops it twice; see \"rps under strace\"), so no CPU time or rps is ever",
    "  taken from that window; and a slowed server finds more work waiting at each wake-up, so the",
    "  calls that wait (`epoll_wait`, `io_uring_enter`, `poll`) may read a little low per request."]


def method_section(v):
    a = v.args
    orders = "; ".join(f"{i}. " + ", ".join(r["order"]) for i, r in enumerate(v.rounds, 1))
    out = ["How it was measured:", "",
           f"- Each load ran on a freshly started server pinned to CPU {a.server_cpu}, the client on CPU "
           f"{a.client_cpu}; strace",
           "  beside the server (which waits for it at every call anyway), so the client keeps its CPU.",
           f"  Rounds: {len(v.rounds)}, the servers in this order: {orders}.",
           f"- One client run per load and server holds two windows: its connections open, {a.settle} s to settle,",
           f"  the **measured window** ({a.duration} s), then strace attached, the **strace window** "
           f"({a.strace_duration} s), strace",
           "  detached. The client runs just long enough for both (a few seconds; wrk is stopped with SIGINT, on",
           "  which it reports); its errors are counted over the whole run.",
           "- **Answers** in a window are counted where the server sends them: the bytes its connections sent",
           "  (`ss -ti`: tcp_info's `bytes_acked`, per connection, read at each edge) over the size of one",
           "  answer (read from the server before the run: every answer to one path is the same bytes, the",
           "  `Date` header having a fixed width). So the count is the same for every client and server, and",
           "  opening and closing connections fall outside the windows.",
           "- **CPU per request**: the server's utime + stime from `/proc/PID/stat` (every thread; nginx's",
           f"  master and worker summed), in {1000 // proc.HZ} ms clock ticks, at both edges of the measured "
           "window, over",
           "  the answers in it."]
    out += STRACE_METHOD if a.strace else []
    if a.blocking_workers:
        out.append(f"- **The blocking model** runs `--threads {a.blocking_workers}` (`--blocking-workers`).")
    else:
        out += ["- **The blocking model** runs one worker per connection (`--threads` = the load's connections:",
                f"  {a.connections} and {a.delay_connections:,}) instead of `--threads 1`: with keep-alive a worker",
                f"  serves one connection until it closes, so one worker would serve one of the {a.connections} "
                "connections",
                f"  and the others would only time out. All its threads run on CPU {a.server_cpu}, like every "
                "other server's."]
    return out + ["- nginx: `harness/peers/nginx.conf.in` with one worker process, `access_log off`; Node.js:",
                  "  `harness/peers/delay-server.js` (plain `http`, `setTimeout` for `/delay`), its whole process.", ""]


def conditions_section(v):
    doc, a, m, c = v.doc, v.args, v.machine, v.doc["clients"]
    extra = (f"; {m['compiler']}, build {m['build_type']}; {c['wrk']}; {c['h2load']}; {c['strace']}; peers "
             f"{m['peers']['nginx']}, {m['peers']['node']}. Details: [cost/machine.md](cost/machine.md)")
    out = provenance.conditions_markdown(
        doc["provenance"], ended_utc=doc["ended"]["utc"], load_after=doc["ended"]["load_average"],
        pinning=proc.pinning_line([a.server_cpu], [a.client_cpu], "each server", "its client"),
        command=doc["command"], machine_extra=extra)
    out.append("- Load average at each round's start: "
               + "; ".join(provenance.load_average_text(r["load_average"]) for r in v.rounds))
    if a.note:
        out.append(f"- Note: {a.note}")
    return out + [
        "- The git tree hash of each model's folder, common/ and servers/ as measured: `provenance.trees` in",
        "  cost.json. Raw data: [cost/runs.csv](cost/runs.csv) (one line per round, server and load) and",
        "  [cost/cost.json](cost/cost.json) (everything: each window's edges, every strace count, every command).",
        ""]


#: The run's own ports, pids and scratch folders, which a reader's run will not share, as the
#: page names them (processes.shown() shows the rest of a command).
PLACEHOLDERS = ((r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"), (r"-p \d+", "-p PID"),
                (r"/\S*/cm-cost-[^/ ]+/", "SCRATCH/"), (r"SCRATCH/cm-([a-z_]+)-[^/ ]+/", r"SCRATCH/\1/"))


def commands_section(v):
    out = ["## Commands", "",
           "The first round's, for one model and the two peers (PORT, PID and SCRATCH stand for the run's own).",
           "", "```"]
    first = v.models[0] if v.models else None
    for s in [x for x in (first, "nginx", "node") if x in v.servers]:
        out.append(f"# {s}" + (" (every model alike, with its --model; async models --threads 1)" if s == first else ""))
        shown = []
        for kind in LOADS:
            row = v.rounds[0]["rows"].get(s, {}).get(kind) if v.rounds else None
            if not row or "error" in row:
                continue
            cmds = [(row["server_command"], v.args.server_cpu), (row["command"], v.args.client_cpu)]
            if row.get("strace"):
                cmds.append((row["strace"]["strace_command"], v.args.server_cpu))
            for argv, cpu in cmds:
                text = processes.shown(argv, [cpu])
                for pattern, placeholder in PLACEHOLDERS:
                    text = re.sub(pattern, placeholder, text)
                if text not in shown:
                    shown.append(text)
        out += shown
    return out + ["```", ""]


def write_report(doc):
    v = View(doc)
    sections = (header_section, figure_tables, summary_section, sleeps_section, context_section,
                mix_section, run_notes, lambda v: ERROR_KINDS, method_section, conditions_section,
                commands_section)
    return "\n".join(line for section in sections for line in section(v))


CSV_COLUMNS = ["round", "position", "server", "load", "threads", "answer_bytes", "window_s", "answers", "rps",
               "server_cpu_s", "server_cpu_busy", "cpu_us_per_request", "sleeps_per_request", "strace_window_s",
               "strace_answers", "rps_under_strace", "syscalls_per_request", "client_answers", "client_errors",
               "problem"]


def csv_row(row):
    """The columns of CSV_COLUMNS after "load", for a run that was measured."""
    def num(x, d):
        return "" if x is None else f"{x:.{d}f}"

    st = row.get("strace") or {}
    return [row["threads"], row["answer_bytes"], num(row["window_s"], 3), num(row["answers"], 0),
            num(row["rps"], 0), num(row["cpu_s"], 2), num(row["cpu_busy"], 3),
            num(row["cpu_us_per_request"], 3), num(row.get("sleeps_per_request"), 3),
            num(st.get("window_s"), 3), num(st.get("answers"), 0), num(st.get("rps_traced"), 0),
            num(st.get("per_request"), 3), row["client"]["requests"], describe_errors(row["errors"]) or 0,
            row.get("strace_error", "")]


def write_csv(path, rounds, servers):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CSV_COLUMNS)
        for i, rnd in enumerate(rounds, 1):
            for s in servers:
                for kind in LOADS:
                    row = rnd["rows"].get(s, {}).get(kind)
                    if row is None:
                        continue
                    lead = [i, rnd["order"].index(s) + 1, s, kind]
                    if "error" in row:
                        out.writerow(lead + [""] * (len(CSV_COLUMNS) - 5) + [row["error"]])
                    else:
                        out.writerow(lead + csv_row(row))


# ---------------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=default_bin_dir())
    ap.add_argument("--servers", default="", help="comma-separated subset (models, nginx, node); default all")
    ap.add_argument("--rounds", type=int, default=6,
                    help="rounds, each with the servers in another order (6: the fewest for an interval)")
    ap.add_argument("--duration", type=float, default=1.0, help="seconds of each measured window")
    ap.add_argument("--strace-duration", type=float, default=0.4, help="seconds of each strace window")
    ap.add_argument("--settle", type=float, default=0.2,
                    help="seconds between the client's connections being open and the measured window")
    ap.add_argument("--connections", type=int, default=256, help="wrk's and h2load's connections")
    ap.add_argument("--delay-connections", type=int, default=2000)
    ap.add_argument("--delay", type=int, default=100, help="ms of /delay/{ms}")
    ap.add_argument("--blocking-workers", type=int, default=0,
                    help="the blocking model's --threads (default: one per connection of the load)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--no-strace", dest="strace", action="store_false", help="skip the system-call counts")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "cost.md"))
    ap.add_argument("--data-dir", default=None, help="raw data (default: results/cost/ beside --out)")
    ap.add_argument("--note", default="", help="a line about the conditions, written into the result")
    ap.add_argument("--rewrite-report", action="store_true",
                    help="measure nothing: write --out again from the data in --data-dir (cost.json), "
                         "with this --note")
    args = ap.parse_args()
    args.data_dir = args.data_dir or os.path.splitext(os.path.abspath(args.out))[0]
    return args


def rewrite_report(args):
    """The report again from a run's saved data (after the report's wording changed)."""
    with open(os.path.join(args.data_dir, "cost.json")) as f:
        doc = json.load(f)
    if "provenance" not in doc:
        sys.exit("cost: that cost.json was written before harness/cost recorded provenance(); run again")
    doc["settings"]["note"] = args.note or doc["settings"].get("note", "")
    with open(args.out, "w") as f:
        f.write(write_report(doc))
    say(f"rewrote {os.path.relpath(args.out)} from {os.path.relpath(args.data_dir)}/cost.json")
    return 0


def check_setup(args):
    """Exits with what is missing: the binaries, the tools, two CPUs."""
    for b in ("cm-server", "cm-load"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            sys.exit(f"cost: {args.bin_dir}/{b} is missing; run `make build` (or `make cost`) first")
    missing = [t for t in ["wrk", "h2load", "ss"] + (["strace"] if args.strace else []) if not find_program(t)]
    if missing:
        sys.exit(f"cost: {', '.join(missing)} not found; scripts/install-deps installs wrk and h2load "
                 "(nghttp2-client); strace is Debian's `strace`, ss its `iproute2`")
    cpus = proc.allowed_cpus()
    if args.server_cpu not in cpus or args.client_cpu not in cpus or args.server_cpu == args.client_cpu:
        sys.exit(f"cost: needs two different CPUs for the server and the clients (allowed here: {cpus})")


def pick_servers(args):
    servers = built_models(args.bin_dir)
    for peer, package in (("nginx", "nginx-light"), ("node", "nodejs")):
        if find_program(peer):
            servers.append(peer)
        else:
            say(f"{peer} is not installed (scripts/install-deps installs {package}); no row")
    if args.servers:
        wanted = args.servers.split(",")
        unknown = [s for s in wanted if s not in servers]
        if unknown:
            sys.exit(f"cost: not built or not installed: {', '.join(unknown)} (have: {', '.join(servers)})")
        servers = [s for s in servers if s in wanted]
    return servers


def client_versions():
    return {"wrk": provenance.first_line(["wrk", "-v"]), "h2load": provenance.first_line(["h2load", "--version"]),
            "strace": provenance.first_line(["strace", "-V"])}


def write_results(args, doc):
    os.makedirs(args.data_dir, exist_ok=True)
    results.write_machine(args.data_dir, dict(doc["provenance"]["machine"], clients=doc["clients"]))
    write_csv(os.path.join(args.data_dir, "runs.csv"), doc["rounds"], doc["servers"])
    with open(os.path.join(args.data_dir, "cost.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
        f.write("\n")
    report = write_report(doc)
    with open(args.out, "w") as f:
        f.write(report)
    print(report[report.index("## Server CPU"):report.index("## Sleeps")].strip())


def main():
    args = parse_args()
    if args.rewrite_report:
        return rewrite_report(args)
    t_start = time.monotonic()
    check_setup(args)
    servers = pick_servers(args)
    processes.install_signal_handlers()
    signal.signal(signal.SIGHUP, lambda signum, _frame: sys.exit(128 + signum))
    processes.raise_open_files()  # the blocking model's 2,000 threads, cm-load's connections
    prov = provenance.provenance(args.bin_dir)  # before this process pins itself: the CPUs allowed
    # This script (its ss and /proc reads) keeps off the server's CPU too: it runs on the client's.
    os.sched_setaffinity(0, {args.client_cpu})
    scratch = tempfile.mkdtemp(prefix="cm-cost-")
    try:
        rounds = run_rounds(args, servers, scratch)
    finally:
        processes.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)
    invoked = shlex.join(["harness/cost"] + sys.argv[1:])
    doc = {"tool": "harness/cost", "command": invoked, "provenance": prov, "clients": client_versions(),
           "ended": {"utc": provenance.utc_now(), "load_average": list(proc.load_average())},
           "elapsed_s": time.monotonic() - t_start, "settings": vars(args), "servers": servers,
           "summary": summary(rounds, servers), "rounds": rounds,
           "units": {key: unit for key, (_, unit) in FIGURES.items()}}
    write_results(args, doc)
    say(f"wrote {os.path.relpath(args.out)} and {os.path.relpath(args.data_dir)}/ in {doc['elapsed_s']:.0f} s")
    failed = any("error" in row for rnd in rounds for rows in rnd["rows"].values() for row in rows.values())
    return 1 if failed else 0
