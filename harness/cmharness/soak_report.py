"""harness/soak's verdict and its summary: the mean RSS of the second minute against the last
minute's (the first minute holds the connect phase and the allocator's warm-up), the table of
summary.md, summary.json with cm-load's JSON and the provenance, and summary.md."""

import dataclasses
import json

from . import longrun

#: How far the last minute's mean RSS may move from the second minute's and still be "flat".
FLAT = 0.05


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def whole(x):
    """x rounded, or None when there was nothing to average (a run shorter than two minutes)."""
    return round(x) if x == x else None


@dataclasses.dataclass
class Trend:
    """The second minute against the last one: mean RSS (KiB) and descriptors, and the verdict."""

    rss_second: float
    rss_last: float
    fds_second: float
    fds_last: float
    change: float  # (last - second) / second; nan when either minute has no sample
    same_minute: bool  # the run ended before the third minute: the two minutes are one
    flat: bool
    verdict: str


def trend(samples):
    """The Trend of samples taken once a second (t_s since cm-load started). The first minute is
    left out: it holds the connect phase and the allocator's warm-up."""
    end = samples[-1].t_s if samples else 0
    second = [s for s in samples if 60 <= s.t_s < 120]
    last = [s for s in samples if end - 60 <= s.t_s]
    rss_second = mean([s.rss_kib for s in second])
    rss_last = mean([s.rss_kib for s in last])
    change = (rss_last - rss_second) / rss_second if second and last else float("nan")
    same_minute = end < 180
    flat = abs(change) <= FLAT
    if not second:
        verdict = "no verdict: the run was shorter than two minutes"
    else:
        verdict = "flat" if flat else f"NOT flat (it {'grew' if change > 0 else 'fell'})"
        if same_minute:
            verdict += " (the second minute is the last: nothing compared)"
    return Trend(rss_second, rss_last, mean([s.fds for s in second]), mean([s.fds for s in last]),
                 change, same_minute, flat, verdict)


def table_rows(result, t, connections, server_alive):
    """The (what, value) rows of summary.md's table; "?" where cm-load wrote no result."""
    of_load = ["connections held (cm-load, end of window)", "rps (measured window)",
               "requests answered (whole run)", "errors", "latency p50 / p99 / max"]
    values = ["?"] * len(of_load)
    if result:
        kinds = ", ".join(f"{k} {v}" for k, v in result.errors.items())
        lat = result.latency_us
        n = result.responses_total
        values = [f"{result.connections_open:,} of {connections:,}", f"{result.rps:,.0f}",
                  "?" if n is None else f"{n:,}", f"{result.errors_total} ({kinds})",
                  f"{lat.p50 / 1000:.1f} / {lat.p99 / 1000:.1f} / {lat.max / 1000:.1f} ms"]
    return list(zip(of_load, values)) + [
        ("RSS, mean of the second minute", f"{t.rss_second / 1024:.1f} MiB"),
        ("RSS, mean of the last minute", f"{t.rss_last / 1024:.1f} MiB"),
        ("RSS change", f"{t.change * 100:+.1f}%: {t.verdict}"),
        ("open descriptors, second / last minute", f"{t.fds_second:,.0f} / {t.fds_last:,.0f}"),
        ("server alive at the end", "yes" if server_alive else "NO"),
    ]


def write_json(path, a, t, s, meta):
    """summary.json: the verdict's figures, cm-load's JSON as it wrote it, and `meta` (the
    commands, the pinning, and meta.provenance: the machine, the commit, the trees measured)."""
    result = s.run.result if s.run else None
    summary = {"model": a.model, "minutes": a.minutes, "connections": a.connections,
               "delay_ms": a.delay, "rss_second_minute_kib": whole(t.rss_second),
               "rss_last_minute_kib": whole(t.rss_last),
               "rss_change": round(t.change, 4) if t.change == t.change else None,
               "flat": t.flat, "same_minute": t.same_minute,
               "fds_second_minute": whole(t.fds_second), "fds_last_minute": whole(t.fds_last),
               "server_alive_at_end": s.server_alive, "meta": meta,
               "load": result.kept if result else None}
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)


def write_markdown(path, a, rows, conditions):
    """summary.md: the table of `rows`, the chart, how to read them, and `conditions` (lines)."""
    longrun.write_page(
        path, f"Soak: {a.model}, {a.connections:,} connections on /delay/{a.delay}, {a.minutes:g} minutes",
        a.note, ["| | |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in rows],
        "![RSS, descriptors and rps over time](soak.png)",
        "Samples, one a second: `samples.csv`; cm-load's own result: `load.json`. *Flat* means the "
        "mean RSS of the last minute is within 5% of the second minute's (the first minute holds "
        "the connect phase).", conditions)
