"""cm-micro's output: Google Benchmark's JSON, read into ns per operation, and the run of cm-micro
that writes it. harness/micro/report and harness/micro/timers both read it through here.

With --benchmark_repetitions=N, Google Benchmark reports every repetition ("run_type":
"iteration") and then its aggregates over them (mean, median, stddev, cv); a benchmark that
stopped with SkipWithError reports "error_occurred" and its message instead of times.
"""

import json
import shlex
import sys

from . import processes, stats

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def in_ns(entry, key):
    """A time of one entry ("real_time" or "cpu_time") in ns, whatever its time_unit."""
    return entry[key] * TO_NS[entry.get("time_unit", "ns")]


class Stat:
    """ns/op figures of one benchmark: Google Benchmark's aggregates over the repetitions (mean,
    median, stddev; a run of one repetition stands for all of them), and each repetition's own
    times, which estimate() turns into a median with its interval."""

    def __init__(self, aggregates, runs):
        mean = aggregates.get("mean") or runs[0]
        median = aggregates.get("median") or mean
        stddev = aggregates.get("stddev")
        self.real, self.cpu = in_ns(mean, "real_time"), in_ns(mean, "cpu_time")
        self.real_median, self.cpu_median = in_ns(median, "real_time"), in_ns(median, "cpu_time")
        self.real_sd = in_ns(stddev, "real_time") if stddev else None
        self.cpu_sd = in_ns(stddev, "cpu_time") if stddev else None
        self.items = mean.get("items_per_second")
        self.bytes = mean.get("bytes_per_second")
        self.repetitions = mean.get("repetitions", 1)
        self.real_runs = [in_ns(r, "real_time") for r in runs]
        self.cpu_runs = [in_ns(r, "cpu_time") for r in runs]

    def estimate(self, kind="real"):
        """The median over the repetitions of the real or the CPU time, with its 95% interval;
        the median alone when the run kept only the aggregates (a run saved before the
        repetitions were kept: --benchmark_report_aggregates_only)."""
        runs = self.real_runs if kind == "real" else self.cpu_runs
        if runs:
            return stats.estimate(runs)
        median = self.real_median if kind == "real" else self.cpu_median
        return stats.Estimate(median, None, None, self.repetitions)

    def to_json(self):
        return {"repetitions": self.repetitions,
                "real_ns": {"mean": self.real, "median": self.real_median, "stddev": self.real_sd},
                "cpu_ns": {"mean": self.cpu, "median": self.cpu_median, "stddev": self.cpu_sd},
                "real_ns_median": self.estimate("real").to_json(),
                "cpu_ns_median": self.estimate("cpu").to_json(),
                "real_ns_repetitions": self.real_runs, "cpu_ns_repetitions": self.cpu_runs,
                "items_per_second": self.items, "bytes_per_second": self.bytes}


def stats_of(data):
    """({run_name: Stat}, {run_name: error message}) from cm-micro's JSON, in cm-micro's order."""
    found, errors = {}, {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"]).removesuffix("/real_time")
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
            continue
        aggregates, runs = found.setdefault(name, ({}, []))
        if b.get("run_type") == "aggregate":
            aggregates[b.get("aggregate_name")] = b
        else:
            runs.append(b)
    return {name: Stat(aggregates, runs) for name, (aggregates, runs) in found.items()}, errors


def ns_format(value):
    """The format of a figure in ns: whole ns from 100 on, more digits below."""
    if value >= 100:
        return "{:,.0f}"
    if value >= 10:
        return "{:.1f}"
    return "{:.2f}"


def ns(value):
    return "–" if value is None else ns_format(value).format(value)


def ns_estimate(e):
    """"28,647 [28,100 29,310]": a median of ns with its interval (Estimate.format)."""
    return e.format(ns_format(e.estimate))


def run(cmd, tool, cpus=(), timeout=None):
    """cm-micro's JSON from cmd, run pinned to `cpus`; what cm-micro wrote on stderr is passed
    on, and the tool exits saying how cm-micro ended when it failed."""
    print(f"{tool}: running {shlex.join(cmd)}", file=sys.stderr)
    done = processes.run(cmd, cpus, check=False, timeout=timeout)
    if done.stderr.strip():
        print(done.stderr.rstrip(), file=sys.stderr)
    if done.returncode != 0:
        sys.exit(f"{tool}: cm-micro {processes.describe(done.returncode)}")
    return json.loads(done.stdout)
