"""cost_run -- harness/cost's measuring engine: one load on one freshly started server, in one
client run that holds two windows (Run).

The measured window reads the server's CPU time (/proc/PID/stat, the whole process tree) and the
answers it sent (its connections' bytes_acked, from ss, over the size of one answer); the strace
window that follows counts its system calls per answer with `strace -c -f -p PID` beside it, the
server paused while strace attaches and detaches. harness/cost runs the rounds and cost_report
writes the page.
"""
import collections
import contextlib
import math
import os
import shlex
import signal
import socket
import subprocess
import time

from . import load as cm_load
from . import proc, processes
from .parsers import parse_h2load, parse_ss, parse_strace, parse_wrk
from .servers import Server, read_answer

PLAINTEXT_BODY = b"Hello, World!"
LOADS = ("wrk", "h2load", "delay")
# Calls that only strace's coming and going makes: a call blocked when the server is paused
# (or attached to) is resumed through restart_syscall. Counted, shown, left out of the totals.
ARTIFACTS = ("restart_syscall",)
WRK_BOUND_S = 120  # wrk's -d: it is stopped (SIGINT) as soon as both windows are done
CONNECT_GIVE_UP_S = 20  # connections slower than this to open: the machine is too busy, no retry
TAIL_S = 0.2  # the windows end this long before the client's run does
SLACK_S = 0.2  # on a busy machine every step runs late; the strace window, last, gets shorter


# ---------------------------------------------------------------------------------------------
# Counting answers where the server sends them. Every answer to one path is the same bytes (the
# Date header has a fixed width), so the bytes the server's connections sent in a window, over
# the size of one answer, is the answers it sent in that window: the same count for every
# client and every server, leaving out opening and closing the connections.


def answer_size(port, path, timeout=5.0):
    """The bytes of one keep-alive answer to GET path, read whole."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        head, body = read_answer(s)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"GET {path}: {head.splitlines()[0]!r}, not a 200")
    return len(head) + 4 + len(body)


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
        except OSError:  # ProcessLookupError included: the process ended meanwhile
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
    """A fresh server on the server CPU. --threads is the event loops of an async model (1), the
    worker pool of the blocking model (one per connection)."""
    conns = args.delay_connections if kind == "delay" else args.connections
    threads = 1  # one event loop; go: GOMAXPROCS 1; tokio: the current_thread runtime
    if name in ("nginx", "node"):
        threads = None  # one worker process (nginx.conf.in), one process (node)
    if name == "blocking":
        threads = args.blocking_workers or conns
    return Server(name, cpus=[args.server_cpu], threads=threads, bin_dir=args.bin_dir, workdir=scratch)


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
    """One load on a freshly started server that answers /plaintext right; the server is stopped
    whatever happens."""
    with start_server(name, kind, args, scratch) as server:
        status, body = server.get("/plaintext")
        if status != 200 or body != PLAINTEXT_BODY:
            raise RuntimeError(f"{name}: /plaintext answered {status} {body[:60]!r}, not 200 'Hello, World!'")
        run = Run(kind, server, args, scratch, allowance)
        try:
            return run.run()
        finally:
            run.close()
