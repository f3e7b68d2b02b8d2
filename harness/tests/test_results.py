"""cmharness.results: writing a one-page result, its Markdown and its JSON beside it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import json  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402
from unittest import mock  # noqa: E402

from cmharness import results  # noqa: E402


class WritePage(unittest.TestCase):
    def test_json_beside(self):
        self.assertEqual(results.json_beside("results/loadgen.md"), "results/loadgen.json")
        self.assertEqual(results.json_beside("/tmp/x/micro"), "/tmp/x/micro.json")

    def test_writes_both_and_makes_the_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "new", "page.md")
            path = results.write_page(md, "# Page\n", {"provenance": {"trees": {}}})
            self.assertEqual(path, os.path.join(tmp, "new", "page.json"))
            with open(md) as f:
                self.assertEqual(f.read(), "# Page\n")
            with open(path) as f:
                self.assertEqual(json.load(f), {"provenance": {"trees": {}}})

    def test_write_machine_writes_its_json_and_its_list(self):
        with tempfile.TemporaryDirectory() as tmp:
            results.write_machine(tmp, {"cpu_model": "Test CPU", "peers": {"nginx": "1.22"}})
            with open(os.path.join(tmp, "machine.json")) as f:
                self.assertEqual(json.load(f), {"cpu_model": "Test CPU", "peers": {"nginx": "1.22"}})
            with open(os.path.join(tmp, "machine.md")) as f:
                self.assertEqual(f.read(), "# Machine\n\n- cpu model: Test CPU\n- peers: nginx 1.22\n")


class Blocks(unittest.TestCase):
    """A section of a page another tool writes: results/loadgen.md's tsung section survives
    cross-check rewriting the page, and tsung-check rewrites only its own section."""

    BLOCK = "<!-- t -->\n## T\nfigures\n<!-- /t -->"

    def test_a_block_is_found_with_its_markers_and_replaced_in_place(self):
        page = "# Page\n\n" + self.BLOCK + "\n\n## After\n"
        self.assertEqual(results.block_of(page, "t"), self.BLOCK)
        new = results.replace_block(page, "t", "<!-- t -->\nnew\n<!-- /t -->\n")
        self.assertEqual(new, "# Page\n\n<!-- t -->\nnew\n<!-- /t -->\n\n## After\n")

    def test_a_missing_block_is_added_at_the_end_and_an_unclosed_one_is_not_a_block(self):
        self.assertEqual(results.replace_block("# Page\n", "t", self.BLOCK),
                         "# Page\n\n" + self.BLOCK + "\n")
        self.assertEqual(results.replace_block("", "t", self.BLOCK), self.BLOCK + "\n")
        self.assertEqual(results.block_of("<!-- t -->\nno end", "t"), "")

    def test_write_page_keeps_the_named_blocks_of_the_page_it_replaces(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "page.md")
            with open(md, "w") as f:
                f.write("# Old\n\n" + self.BLOCK + "\n")
            results.write_page(md, "# New\n", {}, keep_blocks=("t", "absent"))
            with open(md) as f:
                self.assertEqual(f.read(), "# New\n\n" + self.BLOCK + "\n")
            results.write_page(md, "# Newer\n", {})
            with open(md) as f:
                self.assertEqual(f.read(), "# Newer\n")


if __name__ == "__main__":
    unittest.main()


def _round(rps, cpu_s, efficiency, duration=2.0, error=""):
    return {"error": error, "rps": rps, "server_cpu_s": cpu_s, "efficiency": efficiency,
            "load": {"duration_s": duration}}


def _row(key, rounds, ceiling=False):
    return {"key": key, "cpu_ceiling_row": ceiling, "summary": {}, "rounds": rounds}


class VariantPairs(unittest.TestCase):
    """A later variant of a server is set against its first round by round: the ratios of the
    same round, not of the medians (the machine's speed moves between rounds)."""

    def doc(self):
        model = [_round(1000, 0.04, 0.8), _round(500, 0.02, 0.4), _round(1000, 0.04, 0.9)]
        # the wheel costs 0.75 of the model's CPU per request in every round, however fast the round
        wheel = [_round(1000, 0.03, 0.96), _round(500, 0.015, 0.48), _round(1000, 0.03, 0.9)]
        return {"targets": [
            {"server": "uring_coro", "variant": "model",
             "rows": [_row("plaintext", [], ceiling=True), _row("delay", model)]},
            {"server": "uring_coro", "variant": "wheel",
             "rows": [_row("plaintext", [], ceiling=True), _row("delay", wheel)]},
            {"server": "asio_coro", "variant": "model", "rows": [_row("delay", model)]}]}

    def test_each_later_variants_row_gets_the_within_round_ratios(self):
        doc = self.doc()
        self.assertTrue(results.add_variant_pairs(doc))
        paired = doc["targets"][1]["rows"][1]["summary"]["paired"]
        self.assertEqual(paired["against"], "model")
        self.assertAlmostEqual(paired["cpu_per_request"]["estimate"], 0.75)
        self.assertEqual(paired["cpu_per_request"]["n"], 3)
        self.assertAlmostEqual(paired["efficiency"]["estimate"], 1.2)

    def test_a_first_variant_a_ceiling_row_and_a_failed_round_get_none(self):
        doc = self.doc()
        doc["targets"][1]["rows"][1]["rounds"][1]["error"] = "cm-load exit 1"
        results.add_variant_pairs(doc)
        self.assertNotIn("paired", doc["targets"][0]["rows"][1]["summary"])
        self.assertNotIn("paired", doc["targets"][1]["rows"][0]["summary"])
        self.assertNotIn("paired", doc["targets"][2]["rows"][0]["summary"])  # its own server
        self.assertEqual(doc["targets"][1]["rows"][1]["summary"]["paired"]["cpu_per_request"]["n"], 2)

    def test_one_variant_adds_nothing(self):
        doc = self.doc()
        del doc["targets"][1]
        self.assertFalse(results.add_variant_pairs(doc))


class ChartWithoutMatplotlib(unittest.TestCase):
    """cm-price draws its charts in its own process: where that Python has no matplotlib the run
    is still written, its page saying why there is no chart."""

    def test_no_matplotlib_is_a_note_not_an_error(self):
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(results, "pyplot", return_value=None):
            path = os.path.join(tmp, "results.json")
            with open(path, "w") as f:
                json.dump({"meta": {"chart": "bars"}, "targets": []}, f)
            self.assertIn("no matplotlib", results.chart(path))
            self.assertEqual(results.charts_in(tmp), [])
