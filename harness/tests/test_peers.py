"""The Go and Tokio peers (harness/peers/, built into the bin folder): each answers the routes of
the spec with their bytes -- the validation every priced row passes, the 400/404/405 answers, /echo
-- and each runtime's /block does what its page says: Go's holds an OS thread per call, Tokio's
runs on the runtime's blocking pool. A peer that is not built (its toolchain missing) is skipped."""
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness import proc, servers, validate  # noqa: E402

BUILT = {name: servers.peer_program(name) for name in servers.BUILT_PEERS}


def request(port, method, path, body=None, headers=None):
    """(status, headers as a dict with lower-case names, body) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class Routes:
    """The cases of servers/tests/conformance_test.cpp that apply to a peer, run on `name`."""

    name = None

    @classmethod
    def setUpClass(cls):
        if not BUILT[cls.name]:
            raise unittest.SkipTest(f"{servers.BUILT_PEERS[cls.name]} is not built "
                                    f"(scripts/install-deps installs {servers.PACKAGE[cls.name]})")
        cls.server = servers.Server(cls.name, threads=1)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_it_passes_the_validation_every_priced_row_passes(self):
        v = validate.validate(self.server.port, plaintext=True, delay=True, block=True,
                              cpu_us=(0, 500), echo_bodies=("Hello, World!", "x" * 5000))
        self.assertTrue(v.ok, v.failure)
        self.assertIn("POST /echo of 5000 bytes answered them back", v.passed)
        # 2 MiB is past the 1 MiB limit: a 413 (or the connection cut while it was sent)
        self.assertRegex(validate.echo(self.server.port, "x" * (2 << 20)),
                         r"^POST /echo: (status 413|\w*Error)")

    def test_plaintext_is_text_with_its_length_a_date_and_the_peers_name(self):
        status, headers, body = request(self.server.port, "GET", "/plaintext")
        self.assertEqual((status, body), (200, b"Hello, World!"))
        self.assertEqual(headers["content-type"], "text/plain")
        self.assertEqual(headers["content-length"], "13")
        self.assertIn("date", headers)
        self.assertTrue(headers["server"])

    def test_a_number_with_leading_zeros_is_that_number(self):
        self.assertEqual(request(self.server.port, "GET", "/delay/007")[2], b"7")

    def test_a_bad_number_is_a_400_with_the_models_reason(self):
        for path in ("/delay/abc", "/delay/-5", "/delay/+5", "/delay/1.5", "/delay/", "/delay/60001",
                     "/block/99999999999999999999999", "/cpu/1000001"):
            with self.subTest(path=path):
                status, _, body = request(self.server.port, "GET", path)
                self.assertEqual(status, 400)
                self.assertRegex(body.decode(), r"^(delay|block) in ms must be decimal digits from 0 to 60000\n$|"
                                 r"^cpu in us must be decimal digits from 0 to 1000000\n$")

    def test_unknown_paths_are_404_and_a_wrong_method_405_with_allow(self):
        self.assertEqual(request(self.server.port, "GET", "/nothing")[0], 404)
        status, headers, _ = request(self.server.port, "POST", "/plaintext", body=b"x")
        self.assertEqual((status, headers["allow"]), (405, "GET, HEAD, OPTIONS"))
        status, headers, _ = request(self.server.port, "GET", "/echo")
        self.assertEqual((status, headers["allow"]), (405, "POST, OPTIONS"))

    def test_echo_answers_the_body_and_refuses_more_than_a_mebibyte_from_its_headers(self):
        body = bytes(range(256)) * 64
        status, headers, got = request(self.server.port, "POST", "/echo", body=body)
        self.assertEqual((status, got), (200, body))
        self.assertEqual(headers["content-type"], "application/octet-stream")
        status, _, got = request(self.server.port, "POST", "/echo", body=b"",
                                 headers={"Content-Length": str(2 << 20)})
        self.assertEqual(status, 413)
        self.assertEqual(got, b"request body larger than 1048576 bytes\n")


class GoPeer(Routes, unittest.TestCase):
    name = "go"

    def test_a_blocking_call_holds_an_os_thread_and_the_runtime_starts_another(self):
        """GOMAXPROCS 1, 12 calls of /block/400 at once: each holds its thread in nanosleep(2),
        so the process grows a thread per call (a /delay wait parks its goroutine instead)."""
        self.assertLess(grown(self.server, "/delay/400", 12), 12, "a /delay wait held a thread")
        peak = most_threads(self.server.pid, lambda: parallel(self.server.port, "/block/400", 12))
        self.assertGreater(peak, 12, "12 calls in flight and the serving thread need 13 threads")

    def test_past_its_thread_limit_the_program_dies_rather_than_queue(self):
        """--max-threads 20, 40 calls of /block/3000 at once: Go keeps no pool to queue them in, so
        the thread the runtime starts past its limit ends the program, every connection with it."""
        with tempfile.TemporaryDirectory() as work:
            port_file = os.path.join(work, "port")
            peer = subprocess.Popen([BUILT["go"], "--threads", "1", "--max-threads", "20", "--port", "0",
                                     "--port-file", port_file], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            try:
                port = wait_for_port(port_file, peer)
                clients, statuses = parallel(port, "/block/3000", 40, errors_too=True)
                _, stderr = peer.communicate(timeout=30)
                for c in clients:
                    c.join()
            finally:
                peer.kill()
                peer.wait()
        self.assertNotEqual(peer.returncode, 0)
        self.assertIn("fatal error: thread exhaustion", stderr)
        self.assertNotIn(200, statuses, "a call answered though the program had died")


class TokioPeer(Routes, unittest.TestCase):
    name = "tokio"

    def test_a_blocking_call_runs_on_the_runtimes_blocking_pool(self):
        """The current_thread runtime, 12 calls of /block/400 at once: spawn_blocking starts a pool
        thread for each, the runtime's one thread goes on serving (a /delay wait holds none)."""
        self.assertLess(grown(self.server, "/delay/400", 12), 12, "a /delay wait held a thread")
        peak = most_threads(self.server.pid, lambda: parallel(self.server.port, "/block/400", 12))
        self.assertGreater(peak, 12, "12 calls in flight and the serving thread need 13 threads")


def parallel(port, path, n, errors_too=False):
    """n requests to path at once, each on its own connection; their statuses (with errors_too,
    a request whose connection failed has its exception's name instead)."""
    statuses = [None] * n

    def one(i):
        try:
            statuses[i] = request(port, "GET", path)[0]
        except (OSError, http.client.HTTPException) as e:
            if not errors_too:
                raise
            statuses[i] = type(e).__name__

    clients = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for c in clients:
        c.start()
    return clients, statuses


def wait_for_port(port_file, peer):
    """The port a peer started with --port-file wrote, once it listens."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            with open(port_file) as f:
                text = f.read()
            if text.endswith("\n"):
                return int(text)
        if peer.poll() is not None:
            raise RuntimeError(f"the peer exited ({peer.returncode}) before it listened")
        time.sleep(0.01)
    raise RuntimeError("the peer wrote no port within 15 s")


def grown(server, path, n):
    """How many threads the server's process gained while n requests to path were in flight."""
    before = proc.thread_count(server.pid)
    return most_threads(server.pid, lambda: parallel(server.port, path, n)) - before


def most_threads(pid, start):
    """The most threads process pid had while the requests `start()` began were in flight."""
    clients, statuses = start()
    peak = proc.thread_count(pid)
    while any(c.is_alive() for c in clients):
        peak = max(peak, proc.thread_count(pid))
        time.sleep(0.005)
    for c in clients:
        c.join()
    assert statuses == [200] * len(statuses), statuses
    return peak


if __name__ == "__main__":
    unittest.main()
