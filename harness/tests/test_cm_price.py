"""cm-price end to end, on a tiny profile against two real models: what it writes, and verify."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
from cmharness import default_bin_dir  # noqa: E402

CM_PRICE = os.path.join(HARNESS, "cm-price")
BIN = default_bin_dir()
TINY = {"name": "tiny", "description": "a test", "rounds": 6, "duration_s": 0.2, "warmup_s": 0.1,
        "ceiling_window": {"duration_s": 0.15, "warmup_s": 0.05, "rounds": 6}, "peers": [],
        "rows": [{"id": "plaintext", "path": "/plaintext", "connections": [4], "cpu_ceiling": True},
                 {"id": "delay", "path": "/delay/{ms}", "delay_ms": [20], "connections": [16],
                  "stagger": True}]}


def cm_price(*args):
    return subprocess.run([CM_PRICE, *args], capture_output=True, text=True, timeout=170)


@unittest.skipUnless(os.path.exists(os.path.join(BIN, "cm-server")), "cm-server is not built")
class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.profile = os.path.join(cls.dir.name, "tiny.json")
        with open(cls.profile, "w") as f:
            json.dump(TINY, f)
        cls.out = os.path.join(cls.dir.name, "results")
        cls.ran = cm_price(cls.profile, "--models", "blocking,asio_coro", "--out", cls.out,
                           "--bin-dir", BIN, "--no-charts", "--seed", "1")
        with open(os.path.join(cls.out, "tiny", "results.json")) as f:
            cls.doc = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_it_writes_claims_with_intervals_and_provenance(self):
        self.assertIn(self.ran.returncode, (0, 1), self.ran.stderr)
        self.assertEqual(self.doc["schema"], 2)
        ids = {c["id"] for c in self.doc["claims"]}
        self.assertEqual(ids, {"blocking delay 20 16 efficiency", "asio_coro delay 20 16 efficiency"})
        for c in self.doc["claims"]:
            self.assertEqual(c["estimate"]["n"], 6)
            self.assertIsNotNone(c["estimate"]["low"])
        trees = self.doc["meta"]["provenance"]["trees"]
        self.assertTrue(trees["asio_coro"] and trees["common"])
        self.assertEqual(len(self.doc["meta"]["round_orders"]), 6)
        with open(os.path.join(self.out, "tiny", "results.md")) as f:
            md = f.read()
        self.assertIn("## Claims", md)
        self.assertIn("no difference measured here", md)
        for name in ("results.csv", "machine.md", "machine.json"):
            self.assertTrue(os.path.exists(os.path.join(self.out, "tiny", name)), name)

    def test_every_row_was_measured_with_its_ceiling_back_to_back(self):
        for t in self.doc["targets"]:
            for r in t["rows"]:
                for m in r["rounds"]:
                    self.assertEqual(m["error"], "", m)
                    if not r["cpu_ceiling_row"]:
                        self.assertIsNotNone(m["cpu_ceiling_rps"])
                        self.assertEqual(m["load"]["errors_total"], 0)

    def test_verify_appends_a_verdict_for_every_claim(self):
        v = cm_price("verify", self.profile, "--models", "blocking,asio_coro", "--out", self.out,
                     "--bin-dir", BIN, "--seed", "2")
        self.assertIn(v.returncode, (0, 1), v.stderr)
        with open(os.path.join(self.out, "tiny", "verifications.json")) as f:
            records = json.load(f)
        rec = next(r for r in records if len(r["claims"]) == 2)
        self.assertEqual(rec["results_started_utc"], self.doc["meta"]["started_utc"])
        self.assertEqual({c["id"] for c in rec["claims"]}, {c["id"] for c in self.doc["claims"]})
        for c in rec["claims"]:
            self.assertIn(c["verdict"], ("holds", "changed", "noise"))
        for folder in ("asio_coro", "blocking", "common", "servers"):  # harness/ may be edited
            self.assertEqual(rec["provenance"]["trees"][folder],
                             self.doc["meta"]["provenance"]["trees"][folder])


    def test_verify_with_models_judges_only_their_claims(self):
        v = cm_price("verify", self.profile, "--models", "asio_coro", "--out", self.out,
                     "--bin-dir", BIN, "--seed", "3")
        self.assertIn(v.returncode, (0, 1), v.stderr)
        with open(os.path.join(self.out, "tiny", "verifications.json")) as f:
            last = json.load(f)[-1]
        self.assertEqual({c["id"] for c in last["claims"]}, {"asio_coro delay 20 16 efficiency"})


class Usage(unittest.TestCase):
    def test_an_unknown_profile_is_a_usage_error(self):
        r = cm_price("no-such-profile")
        self.assertEqual(r.returncode, 2)
        self.assertIn('no profile "no-such-profile"', r.stderr)


if __name__ == "__main__":
    unittest.main()
