"""cmharness.results: writing a one-page result, its Markdown and its JSON beside it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import json  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()


class KeptOfLoad(unittest.TestCase):
    def test_a_results_file_keeps_cm_loads_figures_not_its_merge_data(self):
        raw = {"tool": "cm-load", "rps": 5.0, "latency_us": {"p99": 7},
               "histograms": {"latency_us": {"buckets": [[1, 2]] * 1000}}, "slot_answers": [3] * 1000}
        kept = results.kept_of_load(raw)
        self.assertEqual(kept, {"tool": "cm-load", "rps": 5.0, "latency_us": {"p99": 7}})
        self.assertIn("histograms", raw)  # the run's own file is left whole
