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


def run_profile(doc, *args):
    """cm-price on a profile document in a scratch folder: (completed process, results.json)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, doc["name"] + ".json")
        with open(path, "w") as f:
            json.dump(doc, f)
        ran = cm_price(path, "--out", d, "--bin-dir", BIN, "--no-charts", "--seed", "1", *args)
        found = os.path.join(d, doc["name"], "results.json")
        if not os.path.exists(found):
            return ran, None
        with open(found) as f:
            return ran, json.load(f)


@unittest.skipUnless(os.path.exists(os.path.join(BIN, "cm-server")), "cm-server is not built")
class SpreadOverProcesses(unittest.TestCase):
    """A row with more connections than one cm-load process holds is spread over several, which
    measure one window (--window-at), and its figures are their merge (cm-load merge)."""

    def test_a_row_of_30_connections_at_12_a_process_is_three_processes_merged(self):
        doc = {"name": "parts", "rounds": 1, "duration_s": 0.5, "warmup_s": 0.2, "peers": [],
               "connections_per_load": 12,
               "rows": [{"id": "delay", "path": "/delay/{ms}", "delay_ms": [20],
                         "connections": [30]}]}
        ran, res = run_profile(doc, "--models", "asio_coro")
        self.assertIsNotNone(res, ran.stderr)
        m = res["targets"][0]["rows"][0]["rounds"][0]
        self.assertEqual(m["error"], "", m)
        notes = {n["kind"]: n["text"] for n in m["notes"]}
        self.assertIn("10 + 10 + 10 connections", notes["parts"])
        self.assertEqual(m["load"]["connections_open"], 30)
        self.assertEqual(m["load"]["parts"], 3)
        self.assertEqual(m["load"]["errors_total"], 0)
        # 30 connections asking for 20 ms each: about 1,500 answers a second, whichever process.
        self.assertGreater(m["rps"], 1_000)
        self.assertLess(m["rps"], 1_500 * 1.05)


@unittest.skipUnless(os.path.exists(os.path.join(BIN, "cm-server")), "cm-server is not built")
class LatencyProfile(unittest.TestCase):
    """The latency kind end to end: a capacity, then an open-loop window at each share."""

    def test_every_share_is_measured_open_loop_and_the_page_is_written(self):
        doc = {"name": "lat", "kind": "latency", "rounds": 1, "duration_s": 0.3,
               "warmup_s": 0.1, "rates_percent": [10, 50], "peers": [],
               "rows": [{"id": "plaintext", "path": "/plaintext", "connections": [8]}]}
        ran, res = run_profile(doc, "--models", "asio_coro")
        self.assertIsNotNone(res, ran.stderr)
        row = res["targets"][0]["rows"][0]
        self.assertEqual([p["percent"] for p in row["points"]], [10, 50])
        capacity = row["capacity_rounds"][0]["rps"]
        for w in row["rounds"]:
            self.assertEqual(w["error"], "", w)
            self.assertAlmostEqual(w["offered_rps"], capacity * w["percent"] / 100, delta=1)
            self.assertEqual(w["load"]["arrival"], "constant")  # an open-loop window
            self.assertIn("p99", w["load"]["pace_lag_us"])
            self.assertIsNotNone(w["rate_ratio"])
        self.assertIn("knee: p99 > 10x", ran.stdout)


def have_postgres():
    from cmharness import database

    return database.bin_dir() is not None


@unittest.skipUnless(os.path.exists(os.path.join(BIN, "cm-server")) and have_postgres(),
                     "cm-server is not built or PostgreSQL is not installed")
class DatabaseProfile(unittest.TestCase):
    """A profile with "database": its own PostgreSQL, every server pointed at it, each /db/ row
    priced against database connections / query time and counted at the database."""

    DOC = {"name": "dbt", "rounds": 2, "duration_s": 0.3, "warmup_s": 0.1, "peers": [],
           "database": True, "ceiling_window": {"duration_s": 0.15, "warmup_s": 0.05,
                                                "rounds": 1},
           "variants": [{"name": "pool 4", "server_args": ["--db-pool", "4"]},
                        {"name": "on the loop", "server_args": ["--db-mode", "blocking"],
                         "models": "async"}],
           "rows": [{"id": "plaintext", "path": "/plaintext", "connections": [4],
                     "cpu_ceiling": True},
                    {"id": "sleep", "path": "/db/sleep/{ms}", "delay_ms": [20],
                     "connections": [16], "stagger": True},
                    {"id": "row", "path": "/db/row/42", "connections": [4]}]}

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        path = os.path.join(cls.dir.name, "dbt.json")
        with open(path, "w") as f:
            json.dump(cls.DOC, f)
        cls.ran = cm_price(path, "--models", "blocking,asio_coro", "--out", cls.dir.name,
                           "--bin-dir", BIN, "--no-charts", "--seed", "1")
        with open(os.path.join(cls.dir.name, "dbt", "results.json")) as f:
            cls.doc = json.load(f)
        with open(os.path.join(cls.dir.name, "dbt", "results.md")) as f:
            cls.md = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def rows(self, row_id):
        return {t["label"]: r for t in self.doc["targets"] for r in t["rows"] if r["id"] == row_id}

    def test_the_async_variant_runs_on_the_async_model_only(self):
        self.assertEqual([t["label"] for t in self.doc["targets"]],
                         ["blocking (pool 4)", "asio_coro (pool 4)", "asio_coro (on the loop)"])
        self.assertTrue(all(t["priced"] for t in self.doc["targets"]), self.ran.stderr)

    def test_every_query_the_database_ran_is_an_answer_cm_load_read(self):
        for row_id in ("sleep", "row"):
            for label, r in self.rows(row_id).items():
                for m in r["rounds"]:
                    self.assertEqual(m["error"], "", (label, m))
                    self.assertEqual(m["load"]["errors_total"], 0, (label, m["load"]["errors"]))
                    self.assertTrue(m["load"]["drain"])
                    self.assertEqual(m["load"]["unanswered_at_end"], 0)
                    self.assertGreater(m["db_queries"], 0)
                    self.assertEqual(m["db_queries"], m["load"]["responses_total"], label)
                    # each backend's CPU is counted in 10 ms ticks: a few hundred sleeps spread
                    # over a pool's backends may read 0; a busy row never does
                    self.assertGreaterEqual(m["db_cpu_s"], 0)
                    if row_id == "row":
                        self.assertGreater(m["db_cpu_s"], 0, label)
                self.assertEqual(r["summary"]["db_count_mismatches"], 0)

    def test_the_database_says_how_long_each_query_held_its_connection(self):
        # pg_sleep(0.02): 20 ms at least, more when the database waits for its CPU (27 ms under
        # make test's parallel load), never the run's total or a count of seconds
        for label, r in self.rows("sleep").items():
            self.assertGreaterEqual(r["summary"]["db_query_ms"]["median"], 20.0, label)
            self.assertLess(r["summary"]["db_query_ms"]["median"], 100.0, label)
        for label, r in self.rows("row").items():  # one row by its key: far below a sleep
            self.assertLess(r["summary"]["db_query_ms"]["median"], 10.0, label)

    def test_the_cpus_the_database_shares_with_cm_load_are_measured(self):
        # a share of those CPUs' time: /proc/stat counts 10 ms ticks, so a 0.3 s window can read
        # up to two ticks (7%) past it at either end
        for row_id in ("sleep", "row"):
            for label, r in self.rows(row_id).items():
                for m in r["rounds"]:
                    self.assertGreaterEqual(m["load_cpus_busy"], 0.0, label)
                    self.assertLessEqual(m["load_cpus_busy"], 1.1, label)
        for label, r in self.rows("row").items():  # cm-load and the database at full tilt
            self.assertGreater(r["summary"]["load_cpus_busy"]["median"], 0.2, label)
        self.assertIn("load CPUs busy", self.md)

    def test_the_pool_or_the_loop_binds_a_query_of_20_ms(self):
        sleep = self.rows("sleep")
        for label in ("blocking (pool 4)", "asio_coro (pool 4)"):  # 4 / 20 ms, not 16 / 20 ms
            m = sleep[label]["rounds"][0]
            self.assertEqual((m["bound"], m["ceilings"]["database"]), ("database", 200), label)
        m = sleep["asio_coro (on the loop)"]["rounds"][0]  # the driver holds the one loop
        self.assertEqual((m["bound"], m["ceilings"]["thread"]), ("threads", 50))

    def test_the_page_shows_the_databases_count(self):
        self.assertIn("## The database's count", self.md)
        self.assertIn("200 = 4 database connections / 0.02 s", self.md)
        self.assertIn("/db/row/42 answered {\"id\":42,\"randomNumber\":2599}", self.md)


class Usage(unittest.TestCase):
    def test_an_unknown_profile_is_a_usage_error(self):
        r = cm_price("no-such-profile")
        self.assertEqual(r.returncode, 2)
        self.assertIn('no profile "no-such-profile"', r.stderr)

    def test_verify_of_the_latency_profile_says_it_has_no_claims(self):
        r = cm_price("verify", "latency")
        self.assertEqual(r.returncode, 2)
        self.assertIn("makes no claims to verify", r.stderr)


if __name__ == "__main__":
    unittest.main()
