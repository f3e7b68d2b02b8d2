"""What a results page and `make compare` show first: the one table (rps, the ceiling that binds
with its value and kind, efficiency, bytes per waiting request, p99 overshoot), orderings that
never rank efficiencies across kinds of ceiling, notes said once, claims reruns did not
reproduce marked, and an opening a newcomer reads."""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cmharness import load, memory, price, profiles, report, results, stats  # noqa: E402
from tests.test_claims import cm_load_json  # noqa: E402


class Lesson:
    """A Runner's results without running anything: the blocking model (64 workers), two async
    models and nginx, /plaintext and /delay/100 x 2,000, over 6 rounds."""

    def __init__(self, delay_rps, plaintext_rps=None):
        p = profiles.parse({"name": "t", "summary": "Two rows, four servers.", "rounds": 6,
                            "peers": ["nginx"], "rows": [
                                {"id": "plaintext", "path": "/plaintext", "connections": [128],
                                 "cpu_ceiling": True},
                                {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100],
                                 "connections": [2000]}]})
        self.profile, self.ceiling_row = p, p.rows[0]
        self.settings = price.Settings("bin", "work", [0], [1])
        names = list(delay_rps) + ["nginx"]
        self.targets = [price.Target(n, profiles.Variant("-" if n == "nginx" else "standard"))
                        for n in names]
        self.refused, self.validations, self.orders = {}, {}, []
        self.threads = {"blocking": "64 workers"}
        self.measurements = {}
        self.waiting_costs = {"blocking": memory.WaitingCost("blocking", 64, 66, 1, 2, 31_000,
                                                             8 * 1024 * 1024 + 4096),
                              "asio_coro": memory.WaitingCost("asio_coro", 2000, 66, 1, 2, 2150)}
        plaintext_rps = plaintext_rps or {}
        for n in names:
            rps = plaintext_rps.get(n, [90e3, 80e3, 100e3, 85e3, 95e3, 70e3])
            self.measurements[(n, p.rows[0].key)] = [
                self.measured(n, p.rows[0], k, r, ceiling=True) for k, r in enumerate(rps)]
        for n, rps in delay_rps.items():
            self.measurements[(n, p.rows[1].key)] = [
                self.measured(n, p.rows[1], k, r, cpu=90e3) for k, r in enumerate(rps)]

    def measured(self, name, row, k, rps, ceiling=False, cpu=None):
        m = price.Measurement(k, k, row, is_ceiling=ceiling, window_s=1.0)
        m.result = load.LoadResult.from_json(
            cm_load_json(rps, row.connections, 100 if row.delay else None))
        m.cpu_ceiling_rps = rps if ceiling else cpu
        price.price(m, next(t for t in self.targets if t.name == name), self.profile,
                    self.settings)
        if m.defect:  # as the runner records it, and the pricing is done
            pass
        return m


def document(runner):
    meta = {"profile": "t", "summary": "Two rows, four servers.",
            "description": "A long description of the method.", "command": "cm-price t",
            "started_utc": "s", "finished_utc": "f", "method": "m.", "provenance": {
                "commit": {"head": "abc", "dirty": False}, "trees": {"common": "123"},
                "machine": {}}}
    return results.document(runner, meta, [])


BLOCKING = [636, 640, 630, 638, 639, 640]
ASYNC = [19_850, 19_900, 19_800, 19_950, 19_870, 19_910]


class LessonTable(unittest.TestCase):
    def setUp(self):
        self.doc = document(Lesson({"blocking": BLOCKING, "asio_coro": ASYNC,
                                    "uring_coro": [r - 20 for r in ASYNC]}))

    def line(self, server):
        return next(x for x in report.lesson_table(self.doc).splitlines()
                    if f"| {server} |" in x)

    def test_each_server_shows_its_rps_and_the_ceiling_that_binds_with_value_and_kind(self):
        self.assertIn("| 638 [630 640] | 640 = 64 threads / 0.1 s |", self.line("blocking"))
        self.assertIn("| 19,885 [19,800 19,950] | 20,000 = 2,000 connections / 0.1 s |",
                      self.line("asio_coro"))

    def test_a_tie_of_counts_over_the_delay_names_every_count(self):
        def row(bound, lowest, delay_ms=10, path="/db/sleep/{ms}"):
            return {"bound": bound, "mean_delay_ms": delay_ms, "path": path,
                    "connections_requested": 64,
                    "summary": {"lowest_ceiling": {"median": lowest},
                                "thread_ceiling": {"median": lowest}}}
        self.assertEqual(report.ceiling_text({}, row("threads = database", 6400)),
                         "6,400 = 64 threads = database connections / 0.01 s")
        self.assertEqual(report.ceiling_text({}, row("connections = threads", 6400)),
                         "6,400 = 64 connections = threads / 0.01 s")
        self.assertEqual(report.ceiling_text({}, row("cpu = database", 6400)),
                         "6,400 = cpu = database")

    def test_bytes_per_waiting_request_with_the_blocking_models_stack_beside_them(self):
        self.assertIn("30.3 KiB (+8.0 MiB of stack reserved)", self.line("blocking"))
        self.assertIn("| 2.1 KiB |", self.line("asio_coro"))
        self.assertIn("| - |", self.line("uring_coro"))  # not measured: not invented

    def test_the_opening_shows_what_each_answered_within_the_word_budget(self):
        text = "\n".join(report.opening(self.doc))
        self.assertIn("Two rows, four servers.", text)
        self.assertIn("blocking answered 638 rps, 100% of 640 = 64 threads / 0.1 s", text)
        prose = [x for x in text.splitlines() if x and not x.startswith(("|", "#"))]
        prose = [x for x in prose if not x.startswith("How a cell is made")]
        self.assertLessEqual(len(" ".join(prose).split()), report.OPENING_WORDS)

    def test_how_a_cell_is_made_is_said_under_the_table(self):
        self.assertIn("median of each round's own rps ÷ that round's ceiling",
                      report.compact(self.doc))


class Variants(unittest.TestCase):
    """The opening names the servers of one variant (`--offload pool`) as one group."""

    def setUp(self):
        self.doc = document(Lesson({"blocking": BLOCKING, "asio_coro": ASYNC,
                                    "uring_coro": [r - 20 for r in ASYNC]}))
        for t in self.doc["targets"]:
            if t["server"] in ("asio_coro", "uring_coro"):
                t["variant"] = "pool"
                for r in t["rows"]:
                    r["variant"] = "pool"
        self.doc["meta"]["profile_settings"] = {
            "variants": [{"name": "pool", "server_args": ["--offload", "pool"]}]}

    def delay_row(self, server):
        return next(r for t in self.doc["targets"] if t["server"] == server
                    for r in t["rows"] if not r["cpu_ceiling_row"])

    def test_every_model_of_a_variant_though_a_server_without_one_shares_the_row(self):
        text = report.what_it_shows(self.doc)
        self.assertIn("`--offload pool`: every model answered 19,865 to 19,885 rps, 99% of "
                      "20,000 = 2,000 connections / 0.1 s", text)
        self.assertIn("blocking answered 638 rps, 100% of 640 = 64 threads / 0.1 s", text)

    def test_one_group_whatever_bound_each_says_so_instead_of_one_value(self):
        self.delay_row("uring_coro")["bound"] = "cpu"
        text = report.what_it_shows(self.doc)
        self.assertIn("`--offload pool`: every model answered 19,865 to 19,885 rps", text)
        self.assertIn("of the ceilings that bind each", text)
        self.assertNotIn("20,000 = 2,000 connections", text)

    def test_a_variant_with_long_flags_is_named_by_its_name(self):
        self.doc["meta"]["profile_settings"]["variants"][0]["server_args"] = [
            "--offload", "pool", "--blocking-queue", "4096"]
        text = report.what_it_shows(self.doc)
        self.assertIn("pool: every model answered 19,865 to 19,885 rps", text)
        self.assertNotIn("--blocking-queue", text)

    def test_past_its_budget_only_the_sentences_that_fit_and_a_word_on_the_rest(self):
        whole = report.what_it_shows(self.doc)
        short = report.what_it_shows(self.doc, budget=len(whole.split()) - 1)
        self.assertLess(len(short.split()), len(whole.split()))
        self.assertTrue(short.endswith("The other rows are in the tables below."))
        self.assertEqual(report.what_it_shows(self.doc, budget=len(whole.split())), whole)


class Orderings(unittest.TestCase):
    def test_rps_orders_the_servers_and_efficiency_is_never_ranked_across_ceilings(self):
        doc = document(Lesson({"blocking": BLOCKING, "asio_coro": ASYNC,
                               "uring_coro": [r * 0.9 for r in ASYNC]}))
        text = report.orderings(doc)
        rps = next(x for x in text.splitlines() if "x 2,000, rps:" in x)
        self.assertIn("asio_coro > uring_coro > blocking", rps)
        self.assertRegex(rps, r"asio_coro answered 31\.\d \[[\d.]+ [\d.]+\] times what blocking")
        for line in text.splitlines():
            if "efficiency" in line:
                self.assertIn("among the servers bound by", line)
                self.assertNotIn("blocking", line)  # alone of its kind: compared with nobody
        self.assertIn("efficiency among the servers bound by connections / delay: "
                      "asio_coro > uring_coro", text)

    def test_servers_that_cannot_be_told_apart_share_a_tier(self):
        doc = document(Lesson({"blocking": BLOCKING, "asio_coro": ASYNC,
                               "uring_coro": list(reversed(ASYNC))}))
        rps = next(x for x in report.orderings(doc).splitlines() if "x 2,000, rps:" in x)
        self.assertIn("(no difference measured among them) > blocking", rps)

    def test_tiers_merge_until_every_member_beats_every_member_of_the_next(self):
        beats = {("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")}
        self.assertEqual(report.tiers(["a", "b", "c", "d"], lambda x, y: (x, y) in beats),
                         [["a", "b", "c"], ["d"]])
        self.assertEqual(report.tiers(["a"], lambda x, y: True), [["a"]])


class Notes(unittest.TestCase):
    def test_a_note_every_server_made_is_said_once(self):
        doc = document(Lesson({"blocking": BLOCKING, "asio_coro": ASYNC}))
        for t in doc["targets"]:
            for r in t["rows"]:
                for m in r["rounds"]:
                    m["notes"] = [{"kind": "x", "text": "the same sentence"}]
        notes = report.notes(doc)
        self.assertEqual(notes.count("the same sentence"), 1)
        self.assertIn("blocking /delay/100 x 2,000", notes)
        self.assertIn("asio_coro /delay/100 x 2,000", notes)


class Reruns(unittest.TestCase):
    def test_a_claim_a_rerun_of_its_code_did_not_reproduce_is_marked_with_their_range(self):
        doc = document(Lesson({"asio_coro": ASYNC}))
        claim = next(c for c in doc["claims"] if c["kind"] == "ratio")
        est = stats.Estimate.from_json(claim["estimate"])
        inside = {claim["id"]: [stats.Estimate(est.estimate, est.low, est.high, 15)]}
        self.assertNotIn(report.RERUN_MARK, report.claims_table(doc, inside))
        far = {claim["id"]: [stats.Estimate(3.0, 2.9, 3.1, 15)]}
        table = report.claims_table(doc, far)
        self.assertIn(f"{report.RERUN_MARK} runs: [{est.low:.2f} 3.10]", table)
        self.assertIn("the range of the runs", table)


class CommittedPages(unittest.TestCase):
    """Every results page cm-price wrote opens within the word budget and ranks no efficiency
    across kinds of ceiling."""

    ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def pages(self):
        base = os.path.join(self.ROOT, "results")
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name, "results.md")
            if os.path.exists(path):
                with open(path) as f:
                    yield name, f.read()

    def test_each_page_opens_with_at_most_250_words_before_its_first_table(self):
        for name, text in self.pages():
            head = text.split("\n|", 1)[0]
            words = len(re.sub(r"[#`*]", " ", head).split())
            self.assertLessEqual(words, report.OPENING_WORDS, name)

    def test_no_ordering_compares_efficiencies_across_kinds_of_ceiling(self):
        for name, text in self.pages():
            for line in text.splitlines():
                if line.startswith("- ") and "efficiency" in line and " > " in line:
                    self.assertIn("among the servers bound by", line, f"{name}: {line}")


if __name__ == "__main__":
    unittest.main()


class Published(unittest.TestCase):
    """A profile that reproduces a published table shows its figures beside this run's ratios."""

    def setUp(self):
        plain = {"asio_coro": [100e3, 90e3, 80e3, 100e3, 95e3, 85e3],
                 "uring_coro": [110e3, 99e3, 96e3, 100e3, 104.5e3, 93.5e3]}
        self.doc = document(Lesson({"asio_coro": ASYNC, "uring_coro": ASYNC}, plain))
        self.doc["meta"]["published"] = {
            "source": "a README", "setting": "22 CPUs, wrk -c100.", "a": "uring_coro",
            "b": "asio_coro", "differs": "everything.",
            "rows": [{"row": "plaintext", "as": "GET /echo", "a_rps": 562_133.1,
                      "b_rps": 559_214.1, "a_latency_us": 100.04, "b_latency_us": 131.02}]}

    def test_the_published_ratio_beside_the_ratio_taken_within_each_round(self):
        text = report.published_section(self.doc)
        line = next(x for x in text.splitlines() if x.startswith("| GET /echo"))
        # there: 562,133 / 559,214 = 1.01 and 100.04 / 131.02 = 0.76; here the rounds' ratios
        # 1.10 1.10 1.20 1.00 1.10 1.10 (median 1.10), latencies equal in every round
        self.assertIn("(here /plaintext x 128) | 562,133 | 559,214 | 1.01 | 1.10 [", line)
        self.assertIn("| 0.76 | 1.00 [1.00 1.00] |", line)
        self.assertIn("What differs: everything.", text)
        self.assertIn("## Beside the published figures", report.markdown(self.doc, []))

    def test_a_profile_without_one_shows_nothing(self):
        del self.doc["meta"]["published"]
        self.assertEqual(report.published_section(self.doc), "")
        self.assertNotIn("published figures", report.markdown(self.doc, []))

    def test_a_published_row_must_name_a_row_of_the_profile(self):
        doc = {"name": "t", "rows": [{"id": "get", "path": "/plaintext", "connections": [1],
                                      "cpu_ceiling": True}],
               "published": {"source": "s", "setting": "s", "a": "x", "b": "y", "differs": "d",
                             "rows": [{"row": "post", "as": "POST", "a_rps": 1, "b_rps": 1,
                                       "a_latency_us": 1, "b_latency_us": 1}]}}
        with self.assertRaisesRegex(profiles.ProfileError, '"post" is not a row id'):
            profiles.parse(doc)
        doc["published"]["rows"][0]["row"] = "get"
        self.assertEqual(profiles.parse(doc).published["a"], "x")
        doc["published"]["rows"][0]["b_rps"] = 0
        with self.assertRaisesRegex(profiles.ProfileError, "b_rps"):
            profiles.parse(doc)
