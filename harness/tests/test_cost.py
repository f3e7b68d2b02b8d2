"""Unit tests of harness/cost's own parts -- cmharness.cost_run, cmharness.cost_report and the
tool: its per-request arithmetic, its timings and round orders, and its report from a made-up
run (its parsers are in test_parsers). Nothing is started and nothing measured.

    /usr/bin/python3 -m unittest discover -s harness/tests
"""

import argparse
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cmharness import ROOT, cost_report, cost_run, parsers, stats  # noqa: E402
from cmharness.tools import cost  # noqa: E402

STRACE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 52.10    0.120000           2     50000           sendto
 40.00    0.090000           1     50100       100 recvfrom
  7.00    0.016000          16      1000           epoll_wait
  0.90    0.002000         400         5           restart_syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.228000           2    101105       100 total
"""

def settings(**changes):
    s = {"strace": True, "strace_duration": 0.4, "settle": 0.2, "duration": 1.0, "connections": 256,
         "delay_connections": 2000, "delay": 100, "blocking_workers": 0, "server_cpu": 0, "client_cpu": 1,
         "note": "", "bin_dir": "/nowhere"}
    s.update(changes)
    return s


def snapshot(t, cpu_s, socks, switches=0, cost_s=0.01):
    return types.SimpleNamespace(t=t, cpu_s=cpu_s, socks=socks, switches=switches, cost=cost_s)


class PerRequest(unittest.TestCase):
    def test_bytes_between_continues_counts_and_counts_new_connections_whole(self):
        before = {"a": 1000, "b": 500, "gone": 70}
        after = {"a": 1600, "b": 100, "new": 300}  # b went down: reopened on the same ports
        self.assertEqual(cost_run.bytes_between(before, after), (600 + 100 + 300, 1))

    def test_window_figures(self):
        a = snapshot(10.0, 3.0, {"a": 0}, switches=100)
        b = snapshot(12.0, 4.0, {"a": 136 * 50000}, switches=600)
        w = cost_run.window_figures(a, b, 136)
        self.assertEqual(w["answers"], 50000)
        self.assertAlmostEqual(w["rps"], 25000)
        self.assertAlmostEqual(w["cpu_busy"], 0.5)
        self.assertAlmostEqual(w["cpu_us_per_request"], 20.0)
        self.assertAlmostEqual(w["sleeps_per_request"], 0.01)
        self.assertEqual(w["connections_lost"], 0)

    def test_window_without_answers_has_no_per_request_figures(self):
        w = cost_run.window_figures(snapshot(0, 0, {}), snapshot(1, 0.5, {}), 136)
        self.assertIsNone(w["cpu_us_per_request"])
        self.assertIsNone(w["sleeps_per_request"])

    def test_traced_figures_leave_strace_artifacts_out_of_the_total(self):
        calls, errors = parsers.parse_strace(STRACE)
        t = cost_run.traced_figures(calls, errors, 50000, 0.5)
        self.assertAlmostEqual(t["per_request"], (50000 + 50100 + 1000) / 50000)
        self.assertAlmostEqual(t["per_request_by_call"]["restart_syscall"], 5 / 50000)
        self.assertAlmostEqual(t["rps_traced"], 100000)

    def test_traced_figures_without_answers(self):
        t = cost_run.traced_figures({"read": 3}, {"read": 0}, 0, 0.5)
        self.assertIsNone(t["per_request"])
        self.assertEqual(t["per_request_by_call"], {})


class Timing(unittest.TestCase):
    args = argparse.Namespace(**settings())

    def test_client_runs_long_enough_for_both_windows(self):
        p = cost_run.client_plan("delay", self.args, tasks=2, connect_allowance=0.5)
        windows = self.args.settle + self.args.duration + self.args.strace_duration
        self.assertGreaterEqual(p.seconds, windows + 2 * p.each_way + 4 * p.edge)

    def test_wrk_gets_a_bound_and_h2load_its_connect_time_on_top(self):
        delay = cost_run.client_plan("delay", self.args, 2, 0.5).seconds
        self.assertEqual(cost_run.client_plan("wrk", self.args, 2, 0.5).seconds, cost_run.WRK_BOUND_S)
        self.assertAlmostEqual(cost_run.client_plan("h2load", self.args, 2, 0.5).seconds, delay + 0.5)

    def test_more_threads_more_time_to_attach_and_read(self):
        small, large = (cost_run.client_plan("delay", self.args, t, 0) for t in (2, 2002))
        self.assertGreater(large.each_way, small.each_way)
        self.assertGreater(large.edge, small.edge)

    def test_no_strace_no_strace_time(self):
        p = cost_run.client_plan("delay", argparse.Namespace(**settings(strace=False)), 2, 0)
        self.assertEqual(p.each_way, 0)

    def test_nginx_has_no_delay_load(self):
        self.assertEqual(cost.loads_of("nginx"), ["wrk", "h2load"])
        self.assertEqual(cost.loads_of("asio_coro"), list(cost_run.LOADS))


def row(cpu, calls=2.0, errors=None):
    strace = {"per_request": calls, "rps_traced": 9000.0, "calls": {"sendto": 1000, "recvfrom": 1010},
              "call_errors": {"recvfrom": 10}, "per_request_by_call": {"sendto": calls / 2, "recvfrom": calls / 2},
              "strace_command": ["strace", "-c", "-f", "-o", "/tmp/cm-cost-x1/strace.txt", "-p", "4242"]}
    return {"cpu_us_per_request": cpu, "rps": 50000.0, "cpu_busy": 0.9, "sleeps_per_request": 0.01,
            "threads": "1 loop", "answer_bytes": 136, "window_s": 1.0, "answers": 50000, "cpu_s": 0.9,
            "errors": errors or {"read": 0}, "client": {"requests": 60000}, "strace": strace,
            "server_command": [f"{ROOT}/build/bin/cm-server", "--model", "asio_coro", "--port-file",
                               "/tmp/cm-cost-x1/cm-asio_coro-y2/port"],
            "command": ["wrk", "-t1", "-c256", "-d120s", "http://127.0.0.1:40123/plaintext"]}


def made_up_run(rounds=6):
    """Six rounds in which asio_coro costs twice nginx's CPU and node failed once."""
    out = []
    for r in range(rounds):
        rows = {"asio_coro": {k: row(20.0 + r) for k in cost_run.LOADS},
                "nginx": {k: row(10.0 + r / 2) for k in ("wrk", "h2load")},
                "node": {k: row(30.0) for k in cost_run.LOADS}}
        if r == 2:
            rows["node"]["delay"] = {"error": "the client ended before its 2000 connections were open (1.0 s)"}
        out.append({"order": ["asio_coro", "nginx", "node"], "load_average": [1.0, 1.0, 1.0], "rows": rows})
    return out


class Figures(unittest.TestCase):
    def test_ratio_is_the_median_of_within_round_ratios_with_an_interval(self):
        rounds = made_up_run()
        e = cost_report.ratio(rounds, "asio_coro", "wrk", "cpu", "nginx")
        self.assertAlmostEqual(e.estimate, 2.0)
        self.assertTrue(e.has_interval)
        self.assertEqual(e.n, 6)

    def test_a_failed_round_is_left_out(self):
        self.assertEqual(cost_report.per_round(made_up_run(), "node", "delay", "cpu")[2], None)
        self.assertEqual(cost_report.value(made_up_run(), "node", "delay", "cpu").n, 5)

    def test_fewer_than_six_rounds_give_no_interval(self):
        e = cost_report.ratio(made_up_run(3), "asio_coro", "wrk", "cpu", "nginx")
        self.assertFalse(e.has_interval)
        self.assertEqual(cost_report.cell(e), "2.00 [n=3]")

    def test_cell(self):
        self.assertEqual(cost_report.cell(None), "-")
        self.assertEqual(cost_report.cell(stats.Estimate(1234.5, 1200.0, 1300.25, 6), 1), "1,234.5 [1,200.0 1,300.2]")


class Report(unittest.TestCase):
    def doc(self, rounds=6):
        machine = {"cpu_model": "Test CPU", "logical_cpus": 2, "memory": "1.0 GiB", "kernel": "Linux 6",
                   "compiler": "c++ 12", "build_type": "Release", "peers": {"nginx": "nginx/1.22", "node": "node v18"}}
        run = made_up_run(rounds)
        return {"command": "harness/cost", "elapsed_s": 360.0, "settings": settings(),
                "servers": ["asio_coro", "nginx", "node"], "rounds": run,
                "provenance": {"machine": machine, "load_average": [1.0, 1.0, 1.0],
                               "recorded_utc": "2026-12-01 14:10:00 UTC",
                               "commit": {"head": "0123456789abcdef", "dirty": False, "changed_paths": 0}},
                "clients": {"wrk": "wrk 4.1.0", "h2load": "h2load nghttp2/1.52.0", "strace": "strace 6.1"},
                "ended": {"utc": "2026-12-01 14:16:00 UTC", "load_average": [1.0, 1.0, 1.0]}}

    def test_ratios_show_their_interval_and_the_report_says_what_overlap_means(self):
        text = cost_report.write_report(self.doc())
        line = next(x for x in text.splitlines() if x.startswith("| asio_coro | 1 loop |"))
        self.assertIn("| 2.00 [", line)
        self.assertIn("no\ndifference measured here", text.replace("no difference", "no\ndifference"))
        self.assertIn("round 3, node, `/delay/100`, cm-load, 2,000 conns: **failed, no figures**", text)

    def test_commands_are_shown_as_a_reader_would_type_them(self):
        text = cost_report.write_report(self.doc())
        self.assertIn("taskset -c 0 build/bin/cm-server --model asio_coro --port-file SCRATCH/asio_coro/port", text)
        self.assertIn("taskset -c 0 strace -c -f -o SCRATCH/strace.txt -p PID", text)
        self.assertIn("taskset -c 1 wrk -t1 -c256 -d120s http://127.0.0.1:PORT/plaintext", text)

    def test_with_three_rounds_the_cells_say_so(self):
        self.assertIn("[n=3]", cost_report.write_report(self.doc(rounds=3)))


if __name__ == "__main__":
    unittest.main()
