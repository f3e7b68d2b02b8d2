"""cmharness.servers: a Server started from another executable than bin_dir's cm-server (a wrapper
script, as harness/waiting-cost --server gives it). A fake program stands for cm-server: it writes
its --port-file and sleeps; no real server is started here. And the one reader of an answer
(servers.read_answer), on a socket pair."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import servers  # noqa: E402

FAKE = """#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --port-file ]; then printf '12345\\n' > "$2"; fi
  shift
done
exec sleep 30
"""


class Program(unittest.TestCase):
    def test_the_program_runs_with_cm_servers_arguments(self):
        program = os.path.join(tempfile.mkdtemp(), "quick-stop")
        with open(program, "w") as f:
            f.write(FAKE)
        os.chmod(program, 0o755)
        with servers.Server("asio_coro", program=program, threads=1) as s:
            self.assertEqual(s.port, 12345)
            self.assertEqual(s.command[:3], [program, "--model", "asio_coro"])
            self.assertIn("--threads", s.command)
            self.assertTrue(s.running())
        self.assertFalse(s.running())

    def test_without_it_bin_dirs_cm_server(self):
        with self.assertRaises(OSError):  # no cm-server in an empty folder: nothing else is tried
            servers.Server("asio_coro", bin_dir=tempfile.mkdtemp())



class ReadAnswer(unittest.TestCase):
    def pair(self):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        return a, b

    def test_an_answer_read_whole_across_pieces(self):
        client, server = self.pair()
        server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, ")
        server.sendall(b"World!")
        head, body = servers.read_answer(client)
        self.assertEqual(body, b"Hello, World!")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"))

    def test_an_answer_without_a_length_or_cut_short_is_an_error(self):
        client, server = self.pair()
        server.sendall(b"HTTP/1.1 200 OK\r\n\r\nHello")
        with self.assertRaisesRegex(RuntimeError, "Content-Length"):
            servers.read_answer(client)
        client, server = self.pair()
        server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nHel")
        server.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            servers.read_answer(client)


if __name__ == "__main__":
    unittest.main()
