"""What a run claims, how results.md shows it, and what verify and check say of it."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cmharness import load, price, profiles, report, results, stats, verify  # noqa: E402


def cm_load_json(rps, connections=128, delay=None, duration=1.0):
    pct = {"mean": 1000.0, "p50": 900.0, "p90": 1500.0, "p99": 2000.0, "p999": 2500.0,
           "max": 3000.0}
    return {"tool": "cm-load", "url": "http://127.0.0.1:1/x", "connections_requested": connections,
            "connections_open": connections, "connect_failures": {},
            "delay_ms": {"min": delay, "max": delay, "mean": delay} if delay else None,
            "stagger": False, "stagger_ms": 0, "warmup_s": 0.2, "duration_s": duration,
            "requests": int(rps * duration), "rps": rps, "reconnects": 0,
            "errors": {"connect": 0, "reset": 0, "timeout": 0, "status": 0, "body": 0,
                       "early": 0}, "errors_total": 0, "connections_in_window": connections,
            "starved_connections": 0, "fairness_jain": 1.0, "max_gap_ms": 5.0,
            "latency_us": pct, "overshoot_us": pct, "client_cpu_s": 0.5, "client_spin_s": 0.1}


class FakeRunner:
    """A Runner's results without running anything: nginx and two models over 6 rounds."""

    def __init__(self, model_rps, nginx_rps, delay_rps):
        p = profiles.parse({"name": "t", "rounds": 6, "peers": ["nginx"], "rows": [
            {"id": "plaintext", "path": "/plaintext", "connections": [128], "cpu_ceiling": True},
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [2000]}]})
        self.profile = p
        self.ceiling_row = p.rows[0]
        self.settings = price.Settings("bin", "work", [0], [1])
        self.targets = [price.Target("m", profiles.Variant()), price.Target("nginx",
                                                                            profiles.Variant("-"))]
        self.refused, self.validations, self.threads, self.orders = {}, {}, {}, []
        self.measurements = {}
        for label, rps_by_round in (("m", model_rps), ("nginx", nginx_rps)):
            self.measurements[(label, p.rows[0].key)] = [
                self.measured(label, p.rows[0], k, rps, ceiling=True)
                for k, rps in enumerate(rps_by_round)]
        self.measurements[("m", p.rows[1].key)] = [
            self.measured("m", p.rows[1], k, rps, cpu=model_rps[k])
            for k, rps in enumerate(delay_rps)]

    def measured(self, label, row, k, rps, ceiling=False, cpu=None):
        m = price.Measurement(k, k, row, is_ceiling=ceiling, window_s=1.0)
        m.result = load.LoadResult.from_json(
            cm_load_json(rps, row.connections, 100 if row.delay else None))
        m.cpu_ceiling_rps = rps if ceiling else cpu
        target = next(t for t in self.targets if t.label == label)
        price.price(m, target, self.profile, self.settings)
        return m


def document(runner):
    meta = {"profile": "t", "description": "", "command": "cm-price t", "started_utc": "s",
            "finished_utc": "f", "method": "m.", "provenance": {
                "commit": {"head": "abc", "dirty": False}, "trees": {"common": "123"},
                "machine": {}}}
    return results.document(runner, meta, [])


class Claims(unittest.TestCase):
    def test_a_ratio_to_nginx_within_each_round_and_an_efficiency(self):
        runner = FakeRunner(model_rps=[100e3, 80e3, 120e3, 90e3, 110e3, 70e3],
                            nginx_rps=[50e3, 40e3, 60e3, 45e3, 55e3, 35e3],
                            delay_rps=[19800, 19900, 19700, 19850, 19750, 19950])
        doc = document(runner)
        by_id = {c["id"]: c for c in doc["claims"]}
        ratio = stats.Estimate.from_json(by_id["m plaintext - 128 ratio nginx"]["estimate"])
        self.assertEqual((ratio.low, ratio.estimate, ratio.high), (2.0, 2.0, 2.0))
        eff = stats.Estimate.from_json(by_id["m delay 100 2000 efficiency"]["estimate"])
        self.assertAlmostEqual(eff.estimate, 0.99125)
        self.assertEqual((eff.low, eff.high), (0.985, 0.9975))
        self.assertFalse(by_id["m delay 100 2000 efficiency"]["above_ceiling"])
        self.assertEqual(by_id["m plaintext - 128 ratio nginx"]["servers"], ["m", "nginx"])

    def test_a_round_above_its_ceiling_is_a_defect_shown_as_one_and_not_counted(self):
        """Rounds past connections / delay by more than 0.5% are no figure: the claim is made of
        the others, and the tables say how many were defects."""
        runner = FakeRunner([100e3] * 6, [50e3] * 6,
                            [19800, 20500, 19900, 20600, 19850, 19950, ])
        doc = document(runner)
        claim = next(c for c in doc["claims"] if c["kind"] == "efficiency")
        est = stats.Estimate.from_json(claim["estimate"])
        self.assertEqual((est.n, est.high), (4, None))  # 4 rounds: no 95% interval
        self.assertAlmostEqual(est.estimate, 0.99375)
        self.assertFalse(claim["above_ceiling"])
        row = doc["targets"][0]["rows"][1]
        self.assertEqual(row["summary"]["defects"], 2)
        self.assertEqual(sum(bool(m["defect"]) for m in row["rounds"]), 2)
        self.assertIn("2 rounds above its ceiling: a defect, not counted", report.lesson_table(doc))
        self.assertIn("yes", results.csv_text(runner))

    def test_a_row_every_round_of_which_is_above_its_ceiling_has_no_figure(self):
        runner = FakeRunner([100e3] * 6, [50e3] * 6, [20400, 20500, 20600, 20300, 20450, 20550])
        doc = document(runner)
        self.assertFalse([c for c in doc["claims"] if c["kind"] == "efficiency"])
        self.assertIn("every round above its ceiling: a defect, no figure",
                      report.lesson_table(doc))
        self.assertIn("above-ceiling", json.dumps(doc["targets"]))

    def test_an_old_claim_whose_interval_reaches_past_its_ceiling_is_flagged(self):
        doc = document(FakeRunner([100e3] * 6, [50e3] * 6, [19800] * 6))
        claim = next(c for c in doc["claims"] if c["kind"] == "efficiency")
        claim["estimate"] = stats.Estimate(0.99, 0.95, 1.04, 6).to_json()
        claim["above_ceiling"] = True
        self.assertIn(report.ABOVE, report.claims_table(doc))
        self.assertEqual(verify.above(doc)[0][0], claim["id"])

    def test_the_table_shows_intervals_and_orderings(self):
        runner = FakeRunner([100e3] * 6, [50e3] * 6, [19800] * 6)
        doc = document(runner)
        table = report.claims_table(doc)
        self.assertIn("| m | 2.00 [2.00 2.00] | 99.0% [99.0% 99.0%] |", table)
        self.assertIn("no difference measured here", report.markdown(doc, []))


class Verify(unittest.TestCase):
    def claim(self, cid, mid, lo, hi):
        return {"id": cid, "servers": ["m"], "estimate": stats.Estimate(mid, lo, hi, 6).to_json()}

    def test_holds_changed_noise_missing(self):
        committed = [self.claim("a", 1.0, 0.98, 1.02), self.claim("b", 1.0, 0.98, 1.02),
                     self.claim("c", 1.0, 0.98, 1.02), self.claim("d", 1.0, 0.98, 1.02)]
        rerun = [self.claim("a", 1.01, 0.99, 1.03), self.claim("b", 1.3, 1.25, 1.35),
                 self.claim("c", 1.0, 0.4, 1.6)]
        got = {c["id"]: c["verdict"] for c in verify.compare_claims(committed, rerun)}
        self.assertEqual(got, {"a": "holds", "b": "changed", "c": "noise", "d": "missing"})

    def test_runs_of_the_same_code_widen_the_claim_they_reproduce(self):
        """A claim a run of its own code measured at another level (asio_coro_uring's two speeds)
        is judged by the range of both; a rerun of other code does not widen it."""
        doc = {"meta": {"started_utc": "t0", "provenance": {"trees": {
            "asio_coro": "A", "common": "C", "servers": "S"}}}}
        claim = {"id": "u", "servers": ["asio_coro_uring", "nginx"],
                 "estimate": stats.Estimate(0.5, 0.45, 0.55, 15).to_json()}

        def rec(trees, mid, lo, hi, started="t0"):
            return {"results_started_utc": started, "provenance": {"trees": trees},
                    "claims": [dict(claim, rerun=stats.Estimate(mid, lo, hi, 15).to_json())]}

        same = {"asio_coro": "A", "common": "C", "servers": "S", "harness": "H2"}
        other = dict(same, asio_coro="B")
        records = [rec(same, 1.2, 1.1, 1.3), rec(other, 2.0, 1.9, 2.1),
                   rec(same, 3.0, 2.9, 3.1, started="t-1")]
        got = verify.reproductions(doc, records)
        self.assertEqual([(e.low, e.high) for e in got["u"]], [(1.1, 1.3)])
        fast = [dict(claim, estimate=stats.Estimate(1.2, 1.15, 1.25, 15).to_json())]
        c = verify.compare_claims([claim], fast, got)[0]
        self.assertEqual((c["verdict"], c["range"]["low"], c["range"]["high"]), ("holds", 0.45, 1.3))
        alone = verify.compare_claims([claim], fast)[0]
        self.assertEqual((alone["verdict"], alone["range"]), ("changed", None))

    def test_results_md_lists_the_reruns_of_its_code_and_replaces_that_list(self):
        doc = {"meta": {"started_utc": "t0", "provenance": {"trees": {"asio_coro": "A"}}},
               "claims": [{"id": "u", "servers": ["asio_coro_uring"],
                           "estimate": stats.Estimate(0.5, 0.45, 0.55, 15).to_json()},
                          {"id": "v", "servers": ["asio_coro"],
                           "estimate": stats.Estimate(1.0, 0.9, 1.1, 15).to_json()}]}

        def rec(mid, lo, hi):
            return {"results_started_utc": "t0", "provenance": {"trees": {"asio_coro": "A"}},
                    "claims": [dict(doc["claims"][0],
                                    rerun=stats.Estimate(mid, lo, hi, 15).to_json())]}

        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "results.md"), "w") as f:
                f.write("# quick\n\nthe table\n")
            verify.write_reruns(d, doc, [])
            with open(os.path.join(d, "results.md")) as f:
                self.assertEqual(f.read(), "# quick\n\nthe table\n")
            verify.write_reruns(d, doc, [rec(1.5, 1.4, 1.6)])
            verify.write_reruns(d, doc, [rec(1.5, 1.4, 1.6), rec(0.4, 0.38, 0.42)])
            with open(os.path.join(d, "results.md")) as f:
                text = f.read()
        self.assertTrue(text.startswith("# quick\n\nthe table\n\n" + verify.RERUNS_BEGIN))
        self.assertEqual(text.count("## Reruns of this code"), 1)
        self.assertIn("| u | 0.500 [0.450 0.550] | 2: 1.500, 0.400 | [0.380 1.600] |", text)
        self.assertNotIn("| v |", text)

    def test_render_writes_results_md_again_from_results_json_keeping_its_reruns(self):
        runner = FakeRunner(model_rps=[100e3] * 6, nginx_rps=[50e3] * 6, delay_rps=[15e3] * 6)
        doc = document(runner)
        with tempfile.TemporaryDirectory() as root:
            folder = os.path.join(root, "results", "t")
            os.makedirs(folder)
            for name, content in (("results.json", doc), ("machine.json", {})):
                with open(os.path.join(folder, name), "w") as f:
                    json.dump(content, f)
            with open(os.path.join(folder, "results.md"), "w") as f:
                f.write("# stale\n")
            verify.append_record(folder, {"results_started_utc": "s", "provenance": {"trees": {}},
                                          "claims": []})
            self.assertEqual(verify.render([], root=root), 0)
            with open(os.path.join(folder, "results.md")) as f:
                text = f.read()
        self.assertEqual(text, report.markdown(doc, []).rstrip("\n") + "\n")
        self.assertNotIn("stale", text)

    def test_a_verdict_names_the_row_it_judges(self):
        """docs/tools/freshness.py covers a figure by its own row's verdict."""
        was = dict(self.claim("a", 1.0, 0.98, 1.02), label="m (pool)", row="block 1 64")
        for rerun in ([dict(was)], []):
            c = verify.compare_claims([was], rerun)[0]
            self.assertEqual((c["label"], c["row"]), ("m (pool)", "block 1 64"))

    def test_two_runs_agree_when_intervals_overlap_and_no_ordering_reverses(self):
        def claim(label, mid, lo, hi):
            return {"id": f"{label} plaintext - 128 ratio nginx", "label": label, "servers": [label],
                    "row": "plaintext - 128", "kind": "ratio", "reference": "nginx",
                    "estimate": stats.Estimate(mid, lo, hi, 15).to_json()}

        first = [claim("a", 1.2, 1.1, 1.3), claim("b", 0.8, 0.7, 0.9)]
        same = [claim("a", 1.25, 1.15, 1.35), claim("b", 0.85, 0.75, 0.95)]
        lines, ok = verify.agreement(first, same)
        self.assertTrue(ok)
        self.assertIn("1 in both, 0 reversed", "\n".join(lines))
        moved = [claim("a", 0.6, 0.5, 0.7), claim("b", 1.5, 1.4, 1.6)]
        lines, ok = verify.agreement(first, moved)
        self.assertFalse(ok)
        self.assertIn("reversed: a > b", "\n".join(lines))

    def test_records_are_appended(self):
        with tempfile.TemporaryDirectory() as d:
            verify.append_record(d, {"n": 1})
            verify.append_record(d, {"n": 2})
            with open(os.path.join(d, "verifications.json")) as f:
                self.assertEqual([r["n"] for r in json.load(f)], [1, 2])

    def test_check_reads_the_old_format_too(self):
        old = {"targets": [{"rows": [{"server": "x", "variant": "standard", "path": "/block/{ms}",
                                      "connections_requested": 200,
                                      "rounds": [{"error": "", "efficiency": 1.05}] * 3}]}]}
        self.assertEqual(len(verify.above(old)), 1)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(old, f)
        try:
            self.assertEqual(verify.check([f.name]), 1)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
