"""Unit tests of harness/micro/report: reading cm-micro's JSON (repetitions and Google Benchmark's
aggregates: cmharness.benchmarks), the comparisons with their intervals (cmharness.primitives), and
the page and JSON it writes, from a small made-up run in cm-micro's format. Nothing is run.

    cd harness/tests && /usr/bin/python3 -m unittest test_micro_report -v
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import unittest  # noqa: E402

from cmharness import benchmarks, primitives, stats  # noqa: E402

from cmharness.tools import micro_report as report  # noqa: E402


def benchmark(name, real, cpu, unit="ns", aggregates=True, repetitions=True):
    """cm-micro's JSON entries for one benchmark: one per repetition, then mean/median/stddev/cv."""
    entries = []
    base = {"run_name": name, "repetitions": len(real), "threads": 1, "time_unit": unit}
    if repetitions:
        for i, (r, c) in enumerate(zip(real, cpu)):
            entries.append(dict(base, name=name, run_type="iteration", repetition_index=i,
                                iterations=100, real_time=r, cpu_time=c,
                                items_per_second=1e9 / r))
    if aggregates:
        for agg, f in (("mean", statistics.mean), ("median", statistics.median),
                       ("stddev", statistics.stdev)):
            entries.append(dict(base, name=f"{name}_{agg}", run_type="aggregate",
                                aggregate_name=agg, real_time=f(real), cpu_time=f(cpu),
                                items_per_second=1e9 / statistics.mean(real)))
    return entries


def run_json(*groups, errors=()):
    data = {"context": {"date": "2026-12-01T10:00:00+00:00", "num_cpus": 2, "mhz_per_cpu": 2096,
                        "library_build_type": "debug", "compiler": "g++ 12.2.0",
                        "cm_build_type": "Release", "boost": "1_81", "libuv": "1.44.2"},
            "benchmarks": [e for g in groups for e in g]}
    for name in errors:
        data["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration",
                                   "error_occurred": True,
                                   "error_message": "io_uring unavailable: ENOSYS"})
    return data


PROV = {"machine": {"cpu_model": "Test CPU", "logical_cpus": 2, "libraries": {"boost": "1.81"}},
        "load_average": [0.5, 0.4, 0.3],
        "commit": {"head": "0123456789abcdef", "dirty": False, "changed_paths": 0},
        "trees": {"asio_coro": "aaaa", "common": "cccc"}, "recorded_utc": "2026-12-01 10:00:00 UTC"}

CHEAP_POOL = benchmark("BM_offload_uv_pool/real_time", [20.0, 21, 22, 20.5, 21.5, 21.2],
                       [10.0, 10.5, 11, 10.2, 10.8, 10.4], unit="us")
DEAR_THREAD = benchmark("BM_offload_uv_thread/real_time", [50.0, 52, 51, 53, 50.5, 52.5],
                        [28.0, 29, 28.5, 29.5, 28.2, 28.8], unit="us")
NOISY_POOL = benchmark("BM_offload_uring_pool/real_time", [15.0, 40, 16, 35, 14, 30],
                       [7.0, 20, 8, 18, 7.5, 15], unit="us")
NOISY_THREAD = benchmark("BM_offload_uring_thread/real_time", [30.0, 31, 32, 29, 33, 31.5],
                         [15.0, 15.5, 16, 14.8, 16.2, 15.1], unit="us")
PARSE_CM = benchmark("BM_core_parse_get_cm", [173.0, 172, 175, 174, 171, 173.5],
                     [173.0, 172, 175, 174, 171, 173.5])
PARSE_RAW = benchmark("BM_core_parse_get_llhttp", [93.0, 92, 94, 95, 93.5, 92.5],
                      [93.0, 92, 94, 95, 93.5, 92.5])


def source(**changes):
    fields = dict(invoked="harness/micro/report --json run.json", command="build/bin/cm-micro x",
                  note="", load_before="0.50 0.40 0.30", load_after="0.60 0.40 0.30", prov=PROV,
                  prov_when="read when cm-micro ran")
    fields.update(changes)
    return report.Source(**fields)


class Reading(unittest.TestCase):
    def test_groups_repetitions_aggregates_and_errors(self):
        found, errors = benchmarks.stats_of(run_json(CHEAP_POOL, PARSE_CM, errors=["BM_uring_nop"]))
        self.assertEqual(list(found), ["BM_offload_uv_pool", "BM_core_parse_get_cm"])
        pool = found["BM_offload_uv_pool"]
        self.assertEqual((len(pool.real_runs), pool.repetitions), (6, 6))
        self.assertAlmostEqual(pool.real_sd,  # Google Benchmark's aggregate, kept
                               statistics.stdev([20.0, 21, 22, 20.5, 21.5, 21.2]) * 1e3)
        self.assertEqual(errors, {"BM_uring_nop": "io_uring unavailable: ENOSYS"})

    def test_stat_in_ns_with_an_interval(self):
        s, _ = benchmarks.stats_of(run_json(CHEAP_POOL))
        pool = s["BM_offload_uv_pool"]
        self.assertAlmostEqual(pool.real, statistics.mean([20.0, 21, 22, 20.5, 21.5, 21.2]) * 1e3)
        self.assertEqual(pool.real_runs[0], 20000.0)
        e = pool.estimate("cpu")
        self.assertTrue(e.has_interval)
        self.assertEqual((e.low, e.high, e.n), (10000.0, 11000.0, 6))  # min and max of 6

    def test_aggregates_only_has_no_interval(self):
        s, _ = benchmarks.stats_of(run_json(benchmark("BM_x", [1.0, 2, 3, 4, 5, 6], [1.0] * 6,
                                                      repetitions=False)))
        e = s["BM_x"].estimate()
        self.assertFalse(e.has_interval)
        self.assertEqual((e.estimate, e.n), (3.5, 6))
        self.assertEqual(benchmarks.ns_estimate(e), "3.50 [n=6]")

    def test_one_repetition_stands_for_the_aggregates(self):
        s, _ = benchmarks.stats_of(run_json(benchmark("BM_y", [250.0], [240.0], aggregates=False)))
        self.assertEqual((s["BM_y"].real, s["BM_y"].real_median, s["BM_y"].real_sd),
                         (250.0, 250.0, None))

    def test_group_of(self):
        self.assertEqual(primitives.group_of("BM_asio_uring_post_resume"), "asio")
        self.assertEqual(primitives.group_of("BM_offload_uv_pool"), "offload")
        self.assertEqual(primitives.group_of("BM_core_route/delay"), "core")


class Formatting(unittest.TestCase):
    def test_ns(self):
        self.assertEqual(benchmarks.ns(28647.3), "28,647")
        self.assertEqual(benchmarks.ns(14.26), "14.3")
        self.assertEqual(benchmarks.ns(9.5), "9.50")
        self.assertEqual(benchmarks.ns(None), "–")

    def test_ns_estimate_takes_the_format_of_the_median(self):
        self.assertEqual(benchmarks.ns_estimate(stats.Estimate(28647.0, 28100.2, 29310.9, 10)),
                         "28,647 [28,100 29,311]")

    def test_table_row(self):
        s, _ = benchmarks.stats_of(run_json(PARSE_CM))
        row = primitives.table(["BM_core_parse_get_cm"], s).splitlines()[2]
        self.assertTrue(row.startswith("| `BM_core_parse_get_cm` | `GET /delay/10`"), row)
        self.assertIn("| 173 [171 175] |", row)


class Comparisons(unittest.TestCase):
    def test_no_difference_is_what_stats_says(self):
        e = stats.Estimate(1.0, 0.5, 1.5, 6)
        self.assertEqual(stats.compare(e, e), primitives.NO_DIFFERENCE)

    def test_offload_disjoint_and_overlapping(self):
        s, _ = benchmarks.stats_of(run_json(CHEAP_POOL, DEAR_THREAD, NOISY_POOL, NOISY_THREAD))
        c = {x["label"]: x for x in primitives.offload_comparisons(s)}
        self.assertEqual(sorted(c), ["io_uring", "libuv"])
        self.assertEqual(c["libuv"]["real"]["cheaper"], "the pool")
        self.assertEqual(c["io_uring"]["real"]["cheaper"], primitives.NO_DIFFERENCE)
        self.assertEqual(primitives.tally(list(c.values()), "real"), (1, 0, 1))
        line = primitives.compare_line(c["libuv"])
        self.assertIn("pool 21,100 [20,000 22,000] ns", line)
        self.assertIn("the pool is cheaper, 2.4× (medians)", line)
        self.assertIn("no difference measured here (the intervals overlap)",
                      primitives.compare_line(c["io_uring"]))

    def test_thread_cheaper(self):
        s, _ = benchmarks.stats_of(run_json(
            benchmark("BM_offload_asio_pool/real_time", [9.0, 9.5, 9.2, 9.1, 9.3, 9.4], [1.0] * 6),
            benchmark("BM_offload_asio_thread_detached/real_time", [5.0, 5.1, 5.2, 5.3, 5, 5.1],
                      [1.0] * 6)))
        [c] = primitives.offload_comparisons(s)
        self.assertEqual(c["label"], "asio (aeronet's way)")
        self.assertEqual(c["real"]["cheaper"], "the detached thread per call")

    def test_core_parse_notes(self):
        s, _ = benchmarks.stats_of(run_json(PARSE_CM, PARSE_RAW))
        notes = primitives.core_notes(primitives.core_comparisons(s))
        self.assertIn("cm::RequestParser 173 [171 175] ns, raw llhttp 93.2 [92.0 95.0] ns", notes)
        self.assertIn("the wrapper adds 80.0 ns (1.9× llhttp alone)", notes)


class Page(unittest.TestCase):
    DATA = run_json(PARSE_CM, PARSE_RAW, CHEAP_POOL, DEAR_THREAD, errors=["BM_uring_nop"])

    def test_render(self):
        text = report.render(self.DATA, source(note="quiet"), "micro.json")
        for part in ("# Micro-benchmarks: what each model's primitives cost",
                     "    harness/micro/report --json run.json",
                     "    build/bin/cm-micro x",
                     "- commit (read when cm-micro ran): 0123456789ab",
                     "- load average before / after the run: 0.50 0.40 0.30 / 0.60 0.40 0.30",
                     "- conditions: quiet",
                     "[`micro.json`](micro.json)",
                     "- cpu model: Test CPU",
                     "- Google Benchmark read 2 CPUs at 2096 MHz",
                     "## Shared core: cm_common over llhttp (one thread)",
                     "## Offload round trip: from the loop to a worker and back",
                     "## Not measured in this run", "- `BM_uring_nop`: io_uring unavailable",
                     "the pool is cheaper in 1 of the 1 comparisons below",
                     "## The seeds' figures beside ours"):
            self.assertIn(part, text)
        self.assertNotIn("## libuv", text)  # no BM_uv_ benchmark in this run

    def test_record(self):
        doc = json.loads(json.dumps(report.record(self.DATA, source())))
        self.assertEqual(doc["provenance"]["trees"], PROV["trees"])
        pool = doc["benchmarks"]["BM_offload_uv_pool"]
        self.assertEqual(pool["group"], "offload")
        self.assertEqual(pool["real_ns_median"]["n"], 6)
        self.assertEqual(doc["offload"][0]["real"]["cheaper"], "the pool")
        self.assertEqual(doc["core_parse"][0]["cpu"]["cheaper"], "raw llhttp")
        self.assertEqual(doc["errors"], {"BM_uring_nop": "io_uring unavailable: ENOSYS"})

    def test_source_of_a_saved_run(self):
        data = dict(self.DATA, context=dict(self.DATA["context"], cm_provenance=PROV,
                                            cm_micro_command="build/bin/cm-micro y",
                                            load_before=[1.0, 2.0, 3.0], load_after="0.1 0.2 0.3"))
        args = argparse.Namespace(json="saved.json", note="")
        s = report.source_of(data, args, "harness/micro/report --json saved.json")
        self.assertEqual((s.command, s.load_before, s.load_after, s.prov_when),
                         ("build/bin/cm-micro y", "1.00 2.00 3.00", "0.1 0.2 0.3",
                          "read when cm-micro ran"))
        self.assertIs(s.prov, PROV)


if __name__ == "__main__":
    unittest.main()
