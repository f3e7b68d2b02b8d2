"""Server: one server on a port of its own -- a model of cm-server, nginx or node -- pinned to its
CPUs, read from /proc, and stopped (SIGTERM, then SIGKILL) when it is closed or the tool exits.

    with Server("asio_coro", cpus=[0], threads=1, pool=64) as s:
        ... s.port ... s.cpu_seconds() ... s.readings()

The one server runner of the harness: every tool that starts a server starts it here.
"""

import dataclasses
import http.client
import os
import re
import shutil
import socket
import tempfile
import time

from . import ROOT, default_bin_dir, proc, processes

PEERS = ("nginx", "node", "go", "tokio")
PACKAGE = {"nginx": "nginx-light", "node": "nodejs", "go": "golang-go",
           "tokio": "cargo and librust-tokio-dev"}
#: The peers this build makes (harness/peers/CMakeLists.txt), beside cm-server in the bin folder.
BUILT_PEERS = {"go": "go-peer", "tokio": "tokio-peer"}
#: The routes a peer answers: nginx's config only /plaintext, node's script /plaintext and /delay;
#: the Go and Tokio peers every route of the spec.
PEER_PATHS = {"nginx": ("/plaintext",), "node": ("/plaintext", "/delay/")}


def find_program(name):
    """An executable on PATH or in the sbin folders, or None."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/local/sbin"
    return shutil.which(name, path=path)


def peer_program(name, bin_dir=None):
    """The program that runs this peer, or None when it is not installed (nginx, node) or not
    built (go-peer, tokio-peer: their toolchains were missing when the build ran)."""
    if name in BUILT_PEERS:
        path = os.path.join(bin_dir or default_bin_dir(), BUILT_PEERS[name])
        return path if os.access(path, os.X_OK) else None
    return find_program(name)


def peer_answers(name, path):
    """Whether a peer answers `path` (a route's path, "/delay/{ms}" or "/plaintext")."""
    routes = PEER_PATHS.get(name)
    return routes is None or any(path == r or path.startswith(r) for r in routes)


def kind_of(name):
    """"blocking", "async" or "peer": which ceilings apply to a server of this name."""
    if name in PEERS:
        return "peer"
    return "blocking" if name == "blocking" else "async"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port, timeout=1.0):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        return True
    except OSError:
        return False


CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*(\d+)[ \t]*\r?$")


def read_answer(sock):
    """(head, body) of one HTTP answer with a Content-Length, read whole from `sock` (with the
    timeout its caller set); RuntimeError when the server closes first or gives no length."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _more(sock)
    head, body = data.split(b"\r\n\r\n", 1)
    length = CONTENT_LENGTH.search(head)
    if length is None:
        raise RuntimeError(f"an answer without a Content-Length: {head.splitlines()[0]!r}")
    while len(body) < int(length.group(1)):
        body += _more(sock)
    return head, body


def _more(sock):
    chunk = sock.recv(4096)
    if not chunk:
        raise RuntimeError("the server closed the connection before it answered")
    return chunk


def get(port, path, timeout=5.0):
    """(status, body) of one GET on a new connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def built_models(bin_dir=None):
    """cm-server --list-models, the names in order."""
    import subprocess

    server = os.path.join(bin_dir or default_bin_dir(), "cm-server")
    out = subprocess.run([server, "--list-models"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@dataclasses.dataclass
class Readings:
    """A server's process tree as /proc saw it at one instant."""

    cpu_s: float
    rss_kib: int
    peak_rss_kib: int
    threads: int
    voluntary_switches: int
    involuntary_switches: int


class Server:
    """A server started on a free port (cm-server and node write it to --port-file; nginx gets one
    picked free). `threads`: an async model's loops or the blocking model's workers (default:
    cm-server's own); `pool`: an async model's --blocking-threads; `args`: more cm-server
    arguments (a variant's --offload, --wait-mode, ...); `env`: more environment variables;
    `program`: the cm-server executable to run instead of bin_dir's (a wrapper script, say);
    `argv`: a whole command line to run as it is written (a page's own, which the docs' checker
    runs), instead of one built from the other arguments; `cwd`: where it runs."""

    def __init__(self, name, *, cpus=(), threads=None, pool=None, args=(), bin_dir=None,
                 workdir=None, env=None, settle_s=0.0, program=None, argv=None, cwd=None):
        self.name = name
        self.program = program
        self.given_argv = list(argv) if argv is not None else None
        self.cwd = cwd
        self.kind = kind_of(name)
        self.dir = tempfile.mkdtemp(prefix=f"cm-{name}-", dir=workdir)
        self.log_path = os.path.join(self.dir, "server.log")
        self.cpus = list(cpus)
        self.proc = None
        self.command = []
        self.threads_label = ""
        self._tree = None
        try:
            if name == "nginx":
                self._start_nginx()
            else:
                self._start_with_port_file(threads, pool, args, bin_dir, env)
            if settle_s:
                time.sleep(settle_s)  # threads started, first allocations done
        except BaseException:
            self.close()
            raise

    # -- starting -------------------------------------------------------------------------------

    def _start_with_port_file(self, threads, pool, args, bin_dir, env):
        port_file = os.path.join(self.dir, "port")
        if self.given_argv is not None:
            argv = list(self.given_argv)
        elif self.name == "node":
            node = find_program("node")
            if not node:
                raise RuntimeError("node is not installed (scripts/install-deps installs nodejs)")
            argv = [node, os.path.join(ROOT, "harness/peers/delay-server.js")]
            self.threads_label = "1 event loop"
        elif self.name in BUILT_PEERS:
            argv = self._built_peer_argv(threads, bin_dir)
        else:
            program = self.program or os.path.join(bin_dir or default_bin_dir(), "cm-server")
            argv = [program, "--model", self.name, "--host", "127.0.0.1"]
            if threads is not None:
                argv += ["--threads", str(threads)]
            if pool is not None and self.kind == "async":
                argv += ["--blocking-threads", str(pool)]
            argv += list(args)
            self.threads_label = describe_threads(self.kind, threads, pool)
        argv += ["--port", "0", "--port-file", port_file]
        self.command = argv
        with open(self.log_path, "w") as log:
            self.proc = processes.start(argv, self.cpus, stdout=log, stderr=log, cwd=self.cwd,
                                        env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 15
        while True:
            text = ""
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read()
            if text.endswith("\n"):
                self.port = int(text)
                return
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} wrote no port within 15 s: {self.log_tail()}")
            time.sleep(0.01)

    def _built_peer_argv(self, threads, bin_dir):
        """go-peer (--threads: GOMAXPROCS) or tokio-peer (--threads 1: the current_thread
        runtime; N: N workers), each with its runtime's own pool for /block."""
        program = peer_program(self.name, bin_dir)
        if not program:
            raise RuntimeError(f"{BUILT_PEERS[self.name]} is not built (scripts/install-deps "
                               f"installs {PACKAGE[self.name]}; then make build)")
        argv = [program]
        if threads is not None:
            argv += ["--threads", str(threads)]
        if self.name == "go":
            self.threads_label = f"GOMAXPROCS {threads}" if threads else "GOMAXPROCS: all CPUs"
        elif threads == 1:
            self.threads_label = "current_thread runtime"
        else:
            self.threads_label = f"{threads or 'all CPUs'} workers"
        return argv

    def _start_nginx(self):
        nginx = find_program("nginx")
        if not nginx:
            raise RuntimeError("nginx is not installed (scripts/install-deps installs nginx-light)")
        with open(os.path.join(ROOT, "harness/peers/nginx.conf.in")) as f:
            template = f.read()
        workers = max(1, len(self.cpus))
        self.threads_label = f"{workers} worker process" + ("es" if workers > 1 else "")
        # The port is picked free, then handed to nginx: another process may take it meanwhile,
        # so a start that fails is tried again on a new port.
        for _ in range(3):
            self.port = free_port()
            conf = template.replace("@PORT@", str(self.port)).replace("@WORKERS@", str(workers))
            conf = conf.replace("@PREFIX@", self.dir)
            conf_path = os.path.join(self.dir, "nginx.conf")
            with open(conf_path, "w") as f:
                f.write(conf)
            self.command = [nginx, "-e", os.path.join(self.dir, "error.log"), "-p",
                            self.dir + "/", "-c", conf_path]
            with open(self.log_path, "a") as log:
                self.proc = processes.start(self.command, self.cpus, stdout=log, stderr=log)
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                if accepts(self.port) and len(proc.process_tree(self.proc.pid)) > workers:
                    return
                time.sleep(0.02)
            processes.stop(self.proc)
        raise RuntimeError(f"nginx did not start: {self.log_tail()}")

    # -- reading --------------------------------------------------------------------------------

    @property
    def pid(self):
        return self.proc.pid

    def pids(self):
        """The server's processes (nginx: master and workers), read once: they do not change."""
        if self._tree is None:
            self._tree = proc.process_tree(self.pid)
        return self._tree

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({processes.describe(self.proc.returncode)}): "
                               f"{self.log_tail()}")

    def cpu_seconds(self):
        """CPU seconds of the whole process tree; ProcessLookupError once the server is gone."""
        self._check_alive()
        return sum(proc.cpu_seconds(p) for p in self.pids())

    def readings(self):
        self._check_alive()
        r = Readings(0.0, 0, 0, 0, 0, 0)
        for p in self.pids():
            r.cpu_s += proc.cpu_seconds(p)
            r.rss_kib += proc.status_kib(p, "VmRSS")
            r.peak_rss_kib += proc.status_kib(p, "VmHWM")
            r.threads += proc.thread_count(p)
            v, i = proc.context_switches(p)
            r.voluntary_switches += v
            r.involuntary_switches += i
        return r

    def reset_peak_rss(self):
        return all(proc.reset_peak_rss(p) for p in self.pids())

    def get(self, path, timeout=5.0):
        return get(self.port, path, timeout)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def log_tail(self, lines=3):
        out = []
        for name in ("server.log", "error.log"):
            path = os.path.join(self.dir, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out += [line for line in f.read().splitlines() if line.strip()][-lines:]
        return " | ".join(out) or "(no output)"

    # -- stopping -------------------------------------------------------------------------------

    def stop(self, grace=15.0):
        """SIGTERM (a model drains), then SIGKILL after `grace`; how it ended ("exit 0", ...)."""
        if self.proc is None:
            return "not started"
        tree = self._tree if self._tree is not None else proc.process_tree(self.pid)
        return processes.stop(self.proc, grace=grace, tree=tree)

    def close(self):
        ended = self.stop() if self.proc is not None and self.proc.returncode is None else ""
        shutil.rmtree(self.dir, ignore_errors=True)
        return ended

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def describe_threads(kind, threads, pool):
    """"64 workers", "1 loop, pool 64" -- what a model ran with, for a table."""
    if kind == "blocking":
        return f"{threads or 64} workers"
    loops = threads if threads is not None else len(os.sched_getaffinity(0))
    text = f"{loops} loop" + ("s" if loops != 1 else "")
    return text + (f", pool {pool}" if pool is not None else "")


#: cm-server's default pool of the blocking model (its --threads): the workers that wait at once.
BLOCKING_WORKERS = 64
