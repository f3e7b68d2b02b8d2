"""cmharness.latency and latency_report: the latency profile's figures from its windows (the knee,
the CPU per request at half load, each over the rounds), its page and its chart. The windows here
are written by hand; `cm-price latency` runs them for real (results/latency/)."""
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness import latency, latency_report, load, profiles, results  # noqa: E402
from cmharness.price import Measurement  # noqa: E402

SHARES = [10, 50, 90, 110]


def window(p99, cpu=10.0, rps=1000.0, valid=True, ratio=1.0):
    return {"p99_ms": p99, "p50_ms": p99 / 4, "p999_ms": p99 * 2, "rps": rps,
            "offered_rps": rps / ratio, "rate_ratio": ratio, "valid": valid,
            "own_lag_p99_ms": 0.1, "cpu_us_per_request": cpu, "errors_total": 0}


def curve(rounds):
    """rounds: [(capacity, {share: window})] -> the curve dict summarize() reads."""
    return {"capacity": [{"rps": cap} for cap, _ in rounds],
            "points": {pct: [pts[pct] for _, pts in rounds] for pct in SHARES}}


class TheKnee(unittest.TestCase):
    def test_is_the_first_share_whose_p99_exceeds_ten_times_the_lowest_shares(self):
        pts = {10: window(1.0), 50: window(9.9), 90: window(10.5), 110: window(400)}
        self.assertEqual(latency.knee_of_round(pts, 10), 90)

    def test_exactly_ten_times_is_not_yet_the_knee(self):
        pts = {10: window(1.0), 50: window(10.0), 90: window(10.0), 110: window(10.0)}
        self.assertEqual(latency.knee_of_round(pts, 10), math.inf)

    def test_a_round_without_its_lowest_share_has_no_knee(self):
        self.assertIsNone(latency.knee_of_round({50: window(1.0), 90: window(50)}, 10))
        self.assertIsNone(latency.knee_of_round({}, 10))

    def test_beyond_the_last_share_counts_in_the_median_and_is_written_as_such(self):
        iv = latency.knee_interval([90, 90, 100, math.inf, math.inf, math.inf, None])
        self.assertEqual(iv["n"], 6)
        self.assertEqual(iv["beyond"], 3)
        self.assertIsNone(iv["median"])  # (100 + inf) / 2: beyond the last share
        self.assertEqual(iv["low"], 90)
        self.assertIsNone(iv["high"])
        self.assertEqual(latency_report.knee_text(iv, 110), "> 110% [90% > 110%]")
        iv = latency.knee_interval([90, 90, 100, 100, 100, 110])
        self.assertEqual((iv["median"], iv["low"], iv["high"]), (100, 90, 110))
        self.assertEqual(latency_report.knee_text(iv, 110), "100% [90% 110%]")

    def test_three_rounds_have_a_median_but_no_interval(self):
        iv = latency.knee_interval([90, 100, 110])
        self.assertEqual((iv["median"], iv["low"], iv["high"]), (100, None, None))
        self.assertEqual(latency_report.knee_text(iv, 110), "100% [n=3]")


class ACurvesSummary(unittest.TestCase):
    def rounds(self):
        out = []
        for k in range(6):
            pts = {10: window(1.0 + k / 10), 50: window(2.0, cpu=20.0 + k),
                   90: window(30.0 if k < 4 else 5.0), 110: window(500, valid=False, ratio=0.8)}
            out.append((10_000.0 + 100 * k, pts))
        return out

    def test_the_knee_in_share_and_rps_and_the_cpu_at_half_with_intervals(self):
        s = latency.summarize(curve(self.rounds()), 6, SHARES)
        self.assertEqual(s["knee_rounds"], [90, 90, 90, 90, 110, 110])
        self.assertEqual(s["knee_percent"]["median"], 90)
        self.assertAlmostEqual(s["knee_rps"]["median"], (9_180 + 9_270) / 2)
        self.assertAlmostEqual(s["cpu_us_at_half"]["median"], 22.5)
        self.assertEqual((s["cpu_us_at_half"]["low"], s["cpu_us_at_half"]["high"]), (20.0, 25.0))
        self.assertAlmostEqual(s["capacity_rps"]["median"], 10_250)

    def test_a_share_counts_its_valid_rounds_and_its_errors(self):
        c = curve(self.rounds())
        at110 = latency.point_summary(c["points"][110])
        self.assertEqual((at110["valid_rounds"], at110["measured_rounds"]), (0, 6))
        self.assertAlmostEqual(at110["rate_ratio"]["median"], 0.8)
        self.assertEqual(latency.point_summary(c["points"][50])["valid_rounds"], 6)


class LittlesLawAndResummarizing(unittest.TestCase):
    def test_in_system_is_the_answer_rate_times_the_whole_mean_latency(self):
        w = {"rps": 40_000.0, "load": {"latency_us": {"mean": 200.0}, "overshoot_us": {"mean": 1}}}
        self.assertAlmostEqual(latency.in_system(w), 8.0)
        self.assertIsNone(latency.in_system({"rps": 1.0}))  # an old window without cm-load's JSON

    def test_the_summaries_are_computed_again_from_the_windows_kept(self):
        doc = document()
        row = doc["targets"][0]["rows"][0]
        before = row["summary"]["knee_percent"]["median"]
        for w in row["rounds"]:
            if w["percent"] == 50:
                w["p99_ms"] = 100.0  # the knee moves to 50% in every round
                w["cpu_us_per_request"] = 30.0
        latency.resummarize(doc)
        self.assertEqual(before, 90)
        self.assertEqual(row["summary"]["knee_percent"]["median"], 50)
        self.assertEqual(row["summary"]["cpu_us_at_half"]["median"], 30.0)
        self.assertEqual([p["percent"] for p in row["points"]], SHARES)


class TheFile(unittest.TestCase):
    def test_dumps_reads_back_the_same_with_a_window_a_line(self):
        doc = document()
        text = latency.dumps(doc)
        self.assertEqual(json.loads(text), doc)
        windows = sum(len(r["rounds"]) + len(r["capacity_rounds"])
                      for t in doc["targets"] for r in t["rows"])
        self.assertEqual(sum(1 for line in text.splitlines() if '"round":' in line), windows)

    def test_a_window_keeps_the_latency_its_own_lag_and_not_all_of_cm_loads_json(self):
        raw = dict(AWindow.DOC, answers_per_connection={"min": 1}, window_ns={"start": 0})
        kept = latency.load_kept(load.LoadResult.from_json(raw))
        self.assertEqual(set(kept), {"latency_us", "connect_failures", "connections_open",
                                     "starved_connections", "client_cpu_s", "pace_lag_us",
                                     "unsent"})
        self.assertEqual(kept["pace_lag_us"]["p99"], 300)


class AWindow(unittest.TestCase):
    DOC = {"tool": "cm-load", "url": "http://127.0.0.1:1/delay/10", "connections_requested": 2,
           "connections_open": 2, "connect_failures": {}, "delay_ms": {"mean": 10},
           "warmup_s": 0.5, "duration_s": 1, "requests": 2000, "rps": 2000, "errors": {},
           "errors_total": 0, "connections_in_window": 2, "starved_connections": 0,
           "fairness_jain": 1, "max_gap_ms": 0, "client_cpu_s": 0.1,
           "latency_us": {"mean": 11000, "p50": 10500, "p90": 11000, "p99": 12000, "p999": 13000,
                          "max": 14000},
           "overshoot_us": {"mean": 1000, "p50": 500, "p90": 1000, "p99": 2000, "p999": 3000,
                            "max": 4000},
           "open_loop": {"rate": 2100, "offered": 2100, "late": 3, "backlog_max": 1, "unsent": 0,
                         "rate_ratio": 0.952, "valid": True,
                         "pace_lag_us": {"mean": 10, "p50": 5, "p90": 20, "p99": 300, "p999": 400,
                                         "max": 500}},
           "histograms": {"latency_us": {"buckets": [1, 2, 3]}}}

    def test_a_delay_rows_figures_are_its_overshoot_and_cpu_per_answer(self):
        row = profiles.Row("delay", "/delay/{ms}", 2, "10")
        m = Measurement(0, 1, row, result=load.LoadResult.from_json(self.DOC), server_cpu_s=0.04)
        m.cpu_ceiling_rps = 2100
        w = latency.window_json(m, 50)
        self.assertEqual((w["p50_ms"], w["p99_ms"], w["p999_ms"]), (0.5, 2.0, 3.0))
        self.assertEqual(w["own_lag_p99_ms"], 0.3)
        self.assertAlmostEqual(w["cpu_us_per_request"], 20.0)
        self.assertEqual((w["rate_ratio"], w["valid"], w["late"]), (0.952, True, 3))
        self.assertEqual(w["capacity_rps"], 2100)
        self.assertNotIn("histograms", w["load"])  # cm-load's merge data stays out

    def test_a_window_that_failed_keeps_its_error_and_no_figure(self):
        row = profiles.Row("delay", "/delay/{ms}", 2, "10")
        w = latency.window_json(Measurement(0, 1, row, error="cm-load timed out"), 50)
        self.assertEqual(w["error"], "cm-load timed out")
        self.assertNotIn("p99_ms", w)
        self.assertEqual(latency.window_json(None, 50), {"error": "not run"})


class TheProfile(unittest.TestCase):
    BASE = {"name": "l", "rows": [{"id": "plaintext", "path": "/plaintext", "connections": [8]}]}

    def test_the_committed_profile_parses(self):
        p = profiles.load("latency")
        self.assertEqual(p.kind, "latency")
        self.assertIn(latency.HALF, p.rates_percent)
        self.assertEqual([r.connections for r in p.rows], [2000, 2000])

    def test_a_latency_profile_needs_ascending_rates_and_a_pricing_one_has_none(self):
        with self.assertRaisesRegex(profiles.ProfileError, "rates_percent"):
            profiles.parse(dict(self.BASE, kind="latency"))
        with self.assertRaisesRegex(profiles.ProfileError, "ascending"):
            profiles.parse(dict(self.BASE, kind="latency", rates_percent=[50, 10]))
        with self.assertRaisesRegex(profiles.ProfileError, "rates_percent"):
            profiles.parse(dict(self.BASE, rates_percent=[10, 50]))
        with self.assertRaisesRegex(profiles.ProfileError, "kind"):
            profiles.parse(dict(self.BASE, kind="open"))
        self.assertEqual(profiles.parse(self.BASE).kind, "pricing")


def document():
    """A two-server, two-row results document as latency.document writes it."""
    targets = []
    for name, base in (("asio_coro", 0.5), ("nginx", 0.8)):
        rows = []
        for rid, path, delay in (("plaintext", "/plaintext", None), ("delay", "/delay/{ms}", "10")):
            if name == "nginx" and delay:
                continue
            c = curve([(10_000.0, {10: window(base), 50: window(base * 2),
                                   90: window(base * 30), 110: window(900, valid=False,
                                                                     ratio=0.8)})] * 6)
            rows.append({"server": name, "variant": "-", "label": name, "id": rid,
                         "key": f"{rid} {delay or '-'} 2000", "path": path, "delay": delay,
                         "mean_delay_ms": 10 if delay else 0, "connections_requested": 2000,
                         "latency_of": "overshoot" if delay else "latency",
                         "summary": latency.summarize(c, 6, SHARES),
                         "points": [dict(percent=p, **latency.point_summary(c["points"][p]))
                                    for p in SHARES],
                         "capacity_rounds": [{"round": k, "percent": None, "rps": 10_000.0}
                                             for k in range(6)],
                         "rounds": [dict(w, round=k, percent=p)
                                    for p in SHARES for k, w in enumerate(c["points"][p])]})
        targets.append({"name": name, "server": name, "variant": "-", "label": name,
                        "kind": "peer", "priced": True, "refused": "", "rows": rows})
    prov = {"machine": {"cpu_model": "x", "logical_cpus": 2, "memory": "1 GiB",
                        "kernel": "Linux 6.1"}, "load_average": [0, 0, 0],
            "commit": {"head": "abc", "dirty": False, "changed_paths": 0},
            "recorded_utc": "2026-12-03 14:00:00 UTC"}
    meta = {"profile": "latency", "description": "d", "rates_percent": SHARES,
            "provenance": prov, "server_cpus": "0", "load_cpus": "1", "command": "cm-price latency",
            "method": "m", "finished_utc": "2026-12-03 14:30:00 UTC"}
    return {"schema": results.SCHEMA, "meta": meta, "skipped": [], "targets": targets,
            "claims": []}


class ThePage(unittest.TestCase):
    def test_the_summary_has_every_server_of_each_row_and_the_knee_with_its_interval(self):
        text = latency_report.markdown(document(), ["latency.png"])
        self.assertIn("![p99 against the offered rate, one panel per server](latency.png)", text)
        plain = text.split("### /plaintext x 2,000")[1].split("###")[0]
        self.assertIn("| asio_coro | 10,000 [10,000 10,000] | 0.50 [0.50 0.50] | 90% [90% 90%]",
                      plain)
        self.assertIn("| nginx |", plain)
        delay = text.split("### /delay/10 x 2,000")[1].split("##")[0]
        self.assertNotIn("nginx", delay)
        self.assertIn("p99 overshoot", delay)
        self.assertIn("| asio_coro | 110% | 1,250 | 1,000 | 0.800 | 0 of 6 |", text)
        self.assertIn("| 0.100 | - | - | 10.0 | 0 |", text)  # no mean latency, no busy: "-"

    def test_a_share_answered_above_the_capacity_is_named_and_none_otherwise(self):
        self.assertEqual(latency_report.above_capacity(document()), [])
        doc = document()
        row = doc["targets"][0]["rows"][0]
        row["points"][-1].update(valid_rounds=4, rps={"median": 11_000.0})
        lines = latency_report.above_capacity(doc)
        self.assertIn("- asio_coro on `/plaintext x 2,000`: at 110% it answered 11,000 rps, valid "
                      "in 4 of 6 rounds, above its capacity of 10,000.", lines)
        self.assertIn("## Answered above its capacity", latency_report.markdown(doc))

    def test_the_csv_has_every_window(self):
        lines = latency_report.csv_text(document()).splitlines()
        self.assertEqual(len(lines), 1 + 3 * (6 + 6 * len(SHARES)))
        self.assertTrue(any(",closed," in line for line in lines))

    def test_the_chart_is_written_through_charts_save(self):
        plt = results.pyplot("test")
        if plt is None:
            self.skipTest("no matplotlib")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "latency.png")
            latency_report.draw(document(), path, plt)
            self.assertGreater(os.path.getsize(path), 10_000)


if __name__ == "__main__":
    unittest.main()
