"""Unit tests of harness/cross-check: its verdicts on the paired ratios, the order of its rounds,
the commands it runs and shows, what it reads of each client (processes.run faked), and the JSON
it records of a made-up run and the page written from it. Nothing is started and nothing measured
(wrk's and strace's output are read in test_parsers.py).

    cd harness/tests && /usr/bin/python3 -m unittest test_cross_check -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402
import types  # noqa: E402
import unittest  # noqa: E402
from unittest import mock  # noqa: E402

from cmharness import ROOT, loadgen, processes, stats  # noqa: E402

from cmharness.tools import cross_check as cc  # noqa: E402
import test_load  # noqa: E402
import test_parsers  # noqa: E402


def args(**changes):
    a = dict(build_dir=os.path.join(ROOT, "build", "release"), connections=100, threads=1,
             duration=3, delay=10, runs=6, note="", no_syscalls=False)
    a.update(changes)
    return argparse.Namespace(**a)


def run(rps, tool="wrk"):
    spin = None if tool == "wrk" else 0.2
    return cc.ClientRun(rps, 0.7, 0.9, 0, 0.8, spin, 0.99, f"{tool} http://127.0.0.1:PORT/x")


def made_up_results(cm_factor=1.02, delay_factor=1.0):
    """Six rounds whose speed drifts from one to the next, as on the machine; each client's rps
    is a fixed factor of wrk's in its round."""
    speeds = [120e3, 145e3, 118e3, 144e3, 141e3, 125e3]
    plain = {"wrk": [run(s) for s in speeds],
             "cm-load": [run(s * cm_factor * (1 + 0.001 * i), "cm-load")
                         for i, s in enumerate(speeds)],
             cc.NO_SPIN: [run(s * 0.97, "cm-load") for s in speeds]}
    delays = [9350.0, 9330, 9370, 9360, 9340, 9355]
    delay = {"wrk": [run(d) for d in delays],
             "cm-load": [run(d * delay_factor, "cm-load") for d in delays],
             cc.NO_SPIN: [run(d, "cm-load") for d in delays]}
    return {"/plaintext": plain, "/delay/10": delay}


PROV = {"machine": {"cpu_model": "Test CPU", "logical_cpus": 2, "memory": "4.0 GiB",
                    "kernel": "Linux 6.1.0 #1 SMP x86_64", "compiler": "c++ 12.2.0",
                    "build_type": "Release"},
        "load_average": [0.5, 0.4, 0.3],
        "commit": {"head": "0123456789abcdef", "dirty": False, "changed_paths": 0},
        "trees": {"asio_coro": "aaaa", "common": "cccc"}, "recorded_utc": "2026-12-01 10:00:00 UTC"}


RAN = dict(command="harness/cross-check --no-build", prov=PROV,
           ended_utc="2026-12-01 10:02:00 UTC", load_after=(0.6, 0.4, 0.3), model="asio_coro",
           server_threads=1,
           server_command="build/release/bin/cm-server --model asio_coro --port 0",
           pinning="cm-server on CPU 0, the clients on CPU 1", wrk="wrk 4.1.0")


def made_up_doc(results=None, syscalls=None, **changes):
    """results/loadgen.json of a made-up run, through JSON as the page is written from it."""
    doc = cc.record(args(**changes), results or made_up_results(), syscalls, **RAN)
    return json.loads(json.dumps(doc))


class Verdicts(unittest.TestCase):
    def test_plaintext(self):
        self.assertEqual(cc.plaintext_verdict(stats.Estimate(0.97, 0.95, 0.99, 7))[0], False)
        ok, why = cc.plaintext_verdict(stats.Estimate(1.0, 0.98, 1.02, 7))
        self.assertTrue(ok)
        self.assertIn("no difference measured here", why)
        self.assertIn("faster", cc.plaintext_verdict(stats.Estimate(1.03, 1.01, 1.05, 7))[1])
        ok, why = cc.plaintext_verdict(stats.Estimate(1.0, None, None, 3))
        self.assertTrue(ok)
        self.assertIn("no interval with 3 rounds", why)

    def test_delay_within_five_percent(self):
        self.assertTrue(cc.delay_verdict(stats.Estimate(1.0, 0.96, 1.04, 7))[0])
        ok, why = cc.delay_verdict(stats.Estimate(1.0, 0.93, 1.02, 7))
        self.assertFalse(ok)
        self.assertIn("outside [0.95, 1.05]", why)
        self.assertFalse(cc.delay_verdict(stats.Estimate(1.06, None, None, 2))[0])
        self.assertFalse(cc.delay_verdict(stats.Estimate(math.nan, None, None, 0))[0])

    def test_ratios_are_paired_within_the_round(self):
        ratios = cc.ratios_to_wrk(made_up_results(cm_factor=1.02))
        plain = ratios["/plaintext"]["cm-load"]
        self.assertEqual(plain.n, 6)
        self.assertTrue(plain.has_interval)
        # the rounds' speeds differ by 20%; their ratios by 0.5%: the interval sees only those
        self.assertAlmostEqual(plain.low, 1.02, places=6)
        self.assertAlmostEqual(plain.high, 1.02 * 1.005, places=6)
        self.assertAlmostEqual(ratios["/plaintext"][cc.NO_SPIN].estimate, 0.97)

    def test_no_pair_is_no_pass(self):
        results = made_up_results()
        results["/plaintext"]["wrk"] = [run(0.0) for _ in range(6)]
        ratio = cc.ratios_to_wrk(results)["/plaintext"]["cm-load"]
        self.assertEqual(ratio.n, 0)
        self.assertFalse(cc.plaintext_verdict(ratio)[0])

    def test_per_answer(self):
        self.assertEqual(cc.per_answer({"read": 1000, "write": 1000, "futex": 5}, 1000),
                         {"read": 1.0, "write": 1.0})


class Rounds(unittest.TestCase):
    def test_order_reversed_every_other_round(self):
        called = []

        class Fake:
            def run(self, tool, path):
                called.append((path, tool))
                return run(100.0, tool)

        with contextlib.redirect_stderr(io.StringIO()):  # its progress lines
            results = cc.measure(Fake(), ["/plaintext"], 2)
        self.assertEqual([t for _, t in called],
                         ["wrk", "cm-load", cc.NO_SPIN, cc.NO_SPIN, "cm-load", "wrk"])
        self.assertEqual({t: len(r) for t, r in results["/plaintext"].items()},
                         {"wrk": 2, "cm-load": 2, cc.NO_SPIN: 2})

    def test_commands(self):
        server = types.SimpleNamespace(port=40123, url=lambda p: f"http://127.0.0.1:40123{p}")
        bin_dir = os.path.join(ROOT, "build", "release", "bin")
        clients = cc.Clients(server, args(connections=50, threads=2), bin_dir, [1], "/tmp/cc-x")
        self.assertEqual(clients.shown(clients.argv("wrk", "/plaintext", 3)),
                         "wrk -t 2 -c 50 -d 3s --latency http://127.0.0.1:PORT/plaintext")
        shown = clients.shown(clients.argv(cc.NO_SPIN, "/delay/10", 3))
        self.assertTrue(shown.startswith("build/release/bin/cm-load http://127.0.0.1:PORT/delay/10 "
                                         "--connections 50 --threads 2 --duration 3 --warmup 0"),
                        shown)
        self.assertIn("--json out.json", shown)
        self.assertTrue(shown.endswith("--spin-us 0"))


#: cm-load's JSON of a run with 2 threads, 2 s measured, 1 s of its CPU idle polling.
CM_LOAD = dict(test_load.ResponsesTotalAndStopWhen.DOC, threads=2, duration_s=2, rps=150000.0,
               client_cpu_s=3.0, client_spin_s=1.0, responses_total=300010,
               latency_us=dict(test_load.ResponsesTotalAndStopWhen.DOC["latency_us"], p50=650,
                               p99=850))


class Running(unittest.TestCase):
    """Clients.run on a made-up server, processes.run faked: what each client's output becomes."""

    def fake_run(self, argv, cpus=(), *, timeout=None, check=True, env=None):
        self.ran.append((list(argv), list(cpus)))
        if argv[0] == "strace":  # strace -f -c -o FILE client...: a count of 300,000 sendto
            with open(argv[4], "w") as f:
                f.write(" 52.10    0.120000           2    300000           sendto\n")
            argv = argv[5:]
        if argv[0] != "wrk":
            with open(argv[argv.index("--json") + 1], "w") as f:
                json.dump(CM_LOAD, f)
        return processes.Finished(list(argv), 0, test_parsers.WRK_LATENCY if argv[0] == "wrk" else "", "",
                                  2.0, 1.5)

    def test_each_client_read_and_shown(self):
        self.ran, cpu = [], iter([10.0, 11.9, 20.0, 21.8])
        server = types.SimpleNamespace(port=40123, url=lambda p: f"http://127.0.0.1:40123{p}",
                                       cpu_seconds=lambda: next(cpu))
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(processes, "run", self.fake_run):
            a = args(connections=50, threads=2, duration=2)
            clients = cc.Clients(server, a, None, [1], tmp)
            wrk, cm = clients.run("wrk", "/plaintext"), clients.run(cc.NO_SPIN, "/plaintext")
        self.assertEqual([cpus for _, cpus in self.ran], [[1], [1]])
        self.assertEqual((wrk.rps, wrk.p99_ms, wrk.client_busy, wrk.client_spin),
                         (144000.5, 1.05, 1.5 / 2.0 / 2, None))  # wrk's CPU over its threads
        self.assertAlmostEqual(wrk.server_busy, 0.95)
        self.assertEqual(wrk.command,
                         "wrk -t 2 -c 50 -d 2s --latency http://127.0.0.1:PORT/plaintext")
        self.assertEqual((cm.rps, cm.p50_ms, cm.p99_ms, cm.client_busy, cm.client_spin),
                         (150000.0, 0.65, 0.85, 2.0 / 4, 1.0 / 4))
        self.assertAlmostEqual(cm.server_busy, 0.9)
        self.assertTrue(cm.command.endswith("--json out.json --quiet --spin-us 0"), cm.command)

    def test_system_calls_per_answer_of_each_client(self):
        self.ran = []
        server = types.SimpleNamespace(port=1, url=lambda p: f"http://127.0.0.1:1{p}")
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(processes, "run", self.fake_run):
            found = cc.Clients(server, args(), None, [1], tmp).syscalls_per_answer("/x", tmp)
        self.assertEqual(found, {"wrk": {"sendto": 300000 / 432000},
                                 "cm-load": {"sendto": 300000 / 300010}})
        wrk, cm = (argv for argv, _ in self.ran)
        self.assertEqual(wrk[5:], ["wrk", "-t", "1", "-c", "100", "-d", "2s", "--latency",
                                   "http://127.0.0.1:1/x"])  # 2 s, under strace -f -c -o FILE
        self.assertEqual(cm[5:7] + cm[cm.index("--duration"):][:2],
                         [os.path.join(cc.load.default_bin_dir(), "cm-load"),
                          "http://127.0.0.1:1/x", "--duration", "2"])


class Page(unittest.TestCase):
    SYSCALLS = {"wrk": {"epoll_ctl": 2.01, "read": 1.0, "write": 1.0},
                "cm-load": {"read": 1.0, "sendto": 1.0}}

    def test_markdown(self):
        doc = made_up_doc(syscalls=self.SYSCALLS, note="quiet machine")
        self.assertTrue(all(v["passed"] for v in doc["verdicts"].values()))
        text = loadgen.cross_check_page(doc, "loadgen.json")
        for part in ("# cm-load against wrk", "Regenerate: `harness/cross-check --no-build`",
                     "- `/plaintext`: cm-load / wrk = 1.023 [1.020 1.025]: **pass** (cm-load "
                     "measured faster than wrk",
                     "- `/delay/10`: cm-load / wrk = 1.000 [1.000 1.000]: **pass** (within 5%",
                     "the ceiling connections / delay is 10,000 rps",
                     "Without its polling (`--spin-us 0`), cm-load / wrk = 0.970 [0.970 0.970]",
                     "- Machine: Test CPU, 2 CPUs, 4.0 GiB, Linux 6.1.0; c++ 12.2.0; wrk 4.1.0",
                     "- Pinning: cm-server on CPU 0, the clients on CPU 1",
                     "- Commit: 0123456789ab",
                     "[`loadgen.json`](loadgen.json)", "- Note: quiet machine",
                     "| `epoll_ctl` | 2.01 | 0.00 |", "| total | 4.01 | 2.00 |"):
            self.assertIn(part, text)
        rows = [line for line in text.splitlines() if line.startswith("| `/")]
        self.assertEqual(len(rows), 2 * 3 * 6)  # targets x clients x rounds
        commands = text[text.index("## Commands"):].splitlines()
        self.assertIn("wrk http://127.0.0.1:PORT/x", commands)

    def test_fail_when_cm_load_is_slower(self):
        doc = made_up_doc(results=made_up_results(cm_factor=0.9))
        self.assertFalse(doc["verdicts"]["/plaintext"]["passed"])
        self.assertIn("**FAIL** (cm-load measured slower than wrk",
                      loadgen.cross_check_page(doc, "x.json"))

    def test_record(self):
        doc = made_up_doc(syscalls=self.SYSCALLS)
        self.assertEqual(doc["provenance"]["trees"], PROV["trees"])
        self.assertEqual(doc["ratios_to_wrk"]["/plaintext"]["cm-load"]["n"], 6)
        self.assertTrue(doc["verdicts"]["/delay/10"]["passed"])
        self.assertEqual(len(doc["runs"]["/plaintext"]["wrk"]), 6)
        self.assertIsNone(doc["runs"]["/plaintext"]["wrk"][0]["client_spin"])
        self.assertEqual(doc["settings"]["rounds"], 6)


if __name__ == "__main__":
    unittest.main()
