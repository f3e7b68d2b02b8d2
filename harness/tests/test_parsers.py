"""cmharness.parsers: what wrk, h2load, `strace -c` and `ss -ti` print, read into figures."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness import parsers  # noqa: E402

WRK_LATENCY = """\
Running 3s test @ http://127.0.0.1:40123/plaintext
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   680.12us   50.31us   2.01ms   90.00%
    Req/Sec   144.00k     5.00k  150.00k    80.00%
  Latency Distribution
     50%  679.00us
     75%  700.00us
     90%  720.00us
     99%    1.05ms
  432000 requests in 3.00s, 50.00MB read
Requests/sec: 144000.50
Transfer/sec:     16.00MB
"""

WRK_ERRORS = """\
Running 2s test @ http://127.0.0.1:40123/delay/10
  1 threads and 100 connections
  195447 requests in 2.00s, 24.79MB read
  Socket errors: connect 0, read 12, write 1, timeout 3
  Non-2xx or 3xx responses: 5
Requests/sec:  97690.44
Transfer/sec:     12.39MB
"""

STRACE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 52.10    0.120000           2     50000           sendto
 40.00    0.090000           1     50100       100 recvfrom
  7.00    0.016000          16      1000           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.228000           2    101100       100 total
"""

H2LOAD = """\
finished in 2.00s, 48776.50 req/s, 6.05MB/s
requests: 97809 total, 97809 started, 97553 done, 97550 succeeded, 256 failed, 4 errored, 2 timeout
status codes: 97550 2xx, 0 3xx, 1 4xx, 2 5xx
traffic: 12.10MB (12690000) total, 1.02MB (1070000) headers (space savings 0.00%), 1.21MB data
"""

SS = """\
0      0      127.0.0.1:40123 127.0.0.1:51000
\t cubic wscale:7,7 rto:201 rtt:0.01/0.005 mss:32768 bytes_sent:1360 bytes_acked:1360 segs_out:10
0      0      127.0.0.1:40123 127.0.0.1:51001
\t cubic wscale:7,7 rto:201 rtt:0.01/0.005 mss:32768 bytes_sent:0 segs_out:1
"""


class Wrk(unittest.TestCase):
    def test_latency_distribution_in_ms(self):
        w = parsers.parse_wrk(WRK_LATENCY)
        self.assertEqual(w["requests"], 432000)
        self.assertEqual(w["rps"], 144000.5)
        self.assertAlmostEqual(w["latency_ms"][50], 0.679)
        self.assertAlmostEqual(w["latency_ms"][99], 1.05)
        self.assertEqual(sorted(w["latency_ms"]), [50, 75, 90, 99])
        self.assertEqual(sum(w["errors"].values()), 0)

    def test_errors_by_kind_and_no_distribution(self):
        w = parsers.parse_wrk(WRK_ERRORS)
        self.assertEqual(w["errors"], {"non_2xx_3xx": 5, "connect": 0, "read": 12, "write": 1,
                                       "timeout": 3})
        self.assertEqual(w["latency_ms"], {})  # the thread stats' "90.00%" is not a percentile

    def test_no_count_is_an_error(self):
        with self.assertRaises(RuntimeError):
            parsers.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")


class Strace(unittest.TestCase):
    def test_calls_and_errors_without_the_total(self):
        calls, errors = parsers.parse_strace(STRACE)
        self.assertEqual(calls, {"sendto": 50000, "recvfrom": 50100, "epoll_wait": 1000})
        self.assertEqual(errors, {"sendto": 0, "recvfrom": 100, "epoll_wait": 0})


class H2loadAndSs(unittest.TestCase):
    def test_h2load_counts_done_and_the_non_2xx(self):
        r = parsers.parse_h2load(H2LOAD)
        self.assertEqual(r["requests"], 97553)  # done: answers of any status, not started
        self.assertAlmostEqual(r["rps"], 48776.5)
        self.assertEqual(r["errors"], {"failed": 256, "errored": 4, "timeout": 2, "non_2xx": 3})

    def test_h2load_without_counts_is_an_error(self):
        with self.assertRaises(RuntimeError):
            parsers.parse_h2load("finished in 2.00s, 1.00 req/s, 1B/s\n")

    def test_ss_reads_bytes_acked_per_connection(self):
        self.assertEqual(parsers.parse_ss(SS), {("127.0.0.1:40123", "127.0.0.1:51000"): 1360,
                                                ("127.0.0.1:40123", "127.0.0.1:51001"): 0})


if __name__ == "__main__":
    unittest.main()
