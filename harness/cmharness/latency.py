"""The latency profile: each server's latency against the load offered to it (the "hockey stick"),
from an open loop (cm-load --rate), and its CPU per request at a fixed share of its capacity.

    build/bin/cm-price latency                      # harness/profiles/latency.json
    build/bin/cm-price latency --models asio_coro,nginx --rounds 1

A closed loop slows down with the server it measures: each connection waits for its answer before
it sends again, so it never offers more than the server takes and it hides the queue. An open loop
offers requests at a rate, whatever the server does, and counts each request's latency from when
it was due (harness/load/README.md, "Open loop").

How it measures (the servers started once and kept running, as in cm-price's pricing profiles):
in each round, every (server, row) in a new random order; for each, the row's *capacity* -- a
closed-loop window with the row's connections -- and then an open-loop window at each of the
profile's `rates_percent` of that capacity, in a random order (so the machine's drift within a
round does not line up with the rate). Each window records the rate ratio (answers over requests
due; valid at >= 0.95), p50 / p99 / p99.9 latency from the intended send time (for a row with a
delay, the overshoot: latency less the delay asked), cm-load's own lag in sending what was due,
and the server's CPU per answer over the window (read from /proc, as cm-price reads it).

Two figures summarize a curve, each the median over the rounds with its 95% interval
(stats.estimate: six rounds or more for an interval):
- the *knee*: the first offered share at which the p99 exceeds KNEE_FACTOR times the p99 at the
  lowest share, found in each round; a round in which no share does counts as beyond the last;
- the CPU per request at HALF of capacity: what a model costs at a load a real service runs at.
"""

import json
import math

from . import results, stats
from .price import Runner, rows_for
from .rounds import order as round_order

KNEE_FACTOR = 10
HALF = 50  # % of capacity: where the CPU per request is quoted
VALID_RATIO = 0.95  # cm-load's own gate (harness/load/src/load.cpp)


class LatencyRunner(Runner):
    """Capacity, then the open-loop rates, for every (server, row) in every round."""

    def __init__(self, profile, settings, targets):
        super().__init__(profile, settings, targets)
        self.curves = {}  # (label, row key) -> {"capacity": [m per round], pct: [m per round]}

    def run(self):
        self.validate_all()
        p = self.profile
        for rnd in range(p.rounds):
            series = [(t, row) for t in self.priced() for row in rows_for(t, p.rows)]
            series = round_order(series, rnd, p.rounds, "shuffle", self.rng)
            self.orders.append([f"{t.label} {row.key}" for t, row in series])
            for t, row in series:
                self.curve(t, row, rnd)
        for server in self.servers.values():
            server.close()
        return self

    def _slot(self, target, row, what):
        curve = self.curves.setdefault((target.label, row.key), {})
        return curve.setdefault(what, [None] * self.profile.rounds)

    def curve(self, target, row, rnd):
        p = self.profile
        server = self.servers[target.label]
        self.log(f"round {rnd + 1}/{p.rounds}: {target.label} {row.label()}: capacity")
        cap = self.measure(target, server, row, rnd, duration_s=p.window_s(target.variant),
                           warmup_s=p.warmup_s)
        self._slot(target, row, "capacity")[rnd] = cap
        if not cap.ok or not cap.rps:
            return
        shares = list(p.rates_percent)
        shares = round_order(shares, rnd, p.rounds, "shuffle", self.rng)
        for pct in shares:
            rate = cap.rps * pct / 100
            self.log(f"round {rnd + 1}/{p.rounds}: {target.label} {row.label()}: {pct:g}% "
                     f"= {rate:,.0f} rps")
            m = self.measure(target, server, row, rnd, duration_s=p.window_s(target.variant),
                             warmup_s=p.warmup_s, extra=["--rate", f"{rate:.1f}"])
            m.cpu_ceiling_rps = cap.rps  # the capacity this share is of
            self._slot(target, row, pct)[rnd] = m


# -- one window ---------------------------------------------------------------------------------


def window_json(m, percent):
    """One window's figures: from cm-load's result and the server's CPU over the window. Latency
    in ms from the intended send time (open loop) or the actual one (the closed-loop capacity);
    for a row with a delay, the overshoot."""
    if m is None:
        return {"error": "not run"}
    out = {"round": m.round, "sequence": m.sequence, "percent": percent, "error": m.error,
           "notes": [{"kind": k, "text": t} for k, t in m.notes]}
    if not m.ok:
        return out
    r = m.result
    lat = r.overshoot_us if r.delay_mean_ms > 0 else r.latency_us
    ol = r.open_loop
    out.update({
        "capacity_rps": m.cpu_ceiling_rps if percent is not None else r.rps,
        "offered_rps": ol.rate if ol else None, "rps": r.rps, "requests": r.requests,
        "rate_ratio": ol.rate_ratio if ol else None, "valid": ol.valid if ol else True,
        "late": ol.late if ol else None, "due": ol.offered if ol else None,
        "backlog_max": ol.backlog_max if ol else None,
        "p50_ms": lat.p50 / 1000, "p99_ms": lat.p99 / 1000, "p999_ms": lat.p999 / 1000,
        "max_ms": lat.max / 1000,
        "own_lag_p99_ms": ol.pace_lag_us["p99"] / 1000 if ol else None,
        "cpu_us_per_request": m.server_cpu_s * 1e6 / r.requests if r.requests else None,
        "server_busy": m.server_busy, "load_busy": m.load_busy, "steal": m.steal,
        "errors_total": r.errors_total, "errors": r.errors,
        "load": load_kept(r)})
    return out


#: Of cm-load's JSON, what a window keeps beside its own figures (which already hold the rate
#: ratio, the late and due counts, the errors and the p50/p99/p99.9 of the latency or overshoot):
#: the whole latency's percentiles (Little's L reads their mean), cm-load's own lag, the
#: connections, and the client's CPU. All of it -- ~30 keys a window, 858 windows a run -- made
#: results.json 2.5 MB; the run's own files have it all.
LOAD_KEPT = ("latency_us", "connect_failures", "connections_open", "starved_connections",
             "client_cpu_s", "client_spin_s")


def load_kept(result):
    """Of one cm-load run (load.LoadResult), what a window keeps: LOAD_KEPT and, open loop, the
    lag, the unsent and the arrival process."""
    kept = {k: result.kept[k] for k in LOAD_KEPT if k in result.kept}
    ol = result.open_loop
    if ol is not None:
        kept["pace_lag_us"] = ol.pace_lag_us
        if ol.unsent is not None:
            kept["unsent"] = ol.unsent
        if ol.arrival is not None:
            kept["arrival"] = ol.arrival
    return kept


# -- a curve's figures --------------------------------------------------------------------------


def interval(values):
    """{median, low, high, n} over the rounds (low/high None with fewer than six), or None."""
    est = stats.estimate(values)
    if est is None:
        return None
    return {"median": est.estimate, "low": est.low, "high": est.high, "n": est.n}


def knee_of_round(points, lowest, factor=KNEE_FACTOR):
    """The first share (ascending) whose p99 exceeds `factor` x the p99 at the `lowest` share, in
    one round: points is {pct: window_json}. math.inf when none does; None when the lowest share
    was not measured."""
    base = points[lowest].get("p99_ms") if lowest in points else None
    if not base:
        return None
    for pct in sorted(p for p in points if p > lowest):
        p99 = points[pct].get("p99_ms")
        if p99 is not None and p99 > factor * base:
            return pct
    return math.inf


def knee_interval(knees):
    """The median knee over the rounds with its interval; a round without a knee (math.inf) counts
    as beyond the last share, and such a median or bound is written as None."""
    xs = sorted(k for k in knees if k is not None)
    if not xs:
        return None
    ranks = stats.median_ci_ranks(len(xs))
    finite = (lambda v: v if math.isfinite(v) else None)
    low, high = (xs[ranks[0] - 1], xs[ranks[1] - 1]) if ranks else (None, None)
    return {"median": finite(stats.median(xs)), "low": None if low is None else finite(low),
            "high": None if high is None else finite(high), "n": len(xs),
            "beyond": sum(1 for k in xs if not math.isfinite(k))}


def by_round(curve, rounds):
    """[{pct: window_json}] per round, of the windows measured without error."""
    out = []
    for rnd in range(rounds):
        out.append({pct: w[rnd] for pct, w in curve["points"].items()
                    if w[rnd].get("p99_ms") is not None})
    return out


def summarize(curve, rounds, shares):
    """A curve's summary: capacity, the knee (share and rps), the CPU per request at HALF, and the
    p99 at the lowest share and at HALF, each over the rounds."""
    per_round = by_round(curve, rounds)
    caps = [w.get("rps") for w in curve["capacity"]]
    knees = [knee_of_round(pts, shares[0]) for pts in per_round]
    knee_rps = [k * c / 100 if k is not None and math.isfinite(k) and c else None
                for k, c in zip(knees, caps)]
    at = (lambda pct, key: [w.get(key) for w in curve["points"].get(pct, [])])
    return {"capacity_rps": interval(caps), "knee_percent": knee_interval(knees),
            "knee_rps": interval(knee_rps),
            "cpu_us_at_half": interval(at(HALF, "cpu_us_per_request")),
            "p99_ms_at_half": interval(at(HALF, "p99_ms")),
            "p99_ms_at_lowest": interval(at(shares[0], "p99_ms")),
            "knee_rounds": knees}


def in_system(w):
    """Little's law on one window: the requests in the system on average, L = answers a second x
    their mean latency from the intended send time (the whole latency, not the overshoot: a
    request waiting for its delay, or for an idle connection, is in the system too)."""
    lat = (w.get("load") or {}).get("latency_us") or {}
    return w["rps"] * lat["mean"] / 1e6 if "mean" in lat and w.get("rps") is not None else None


def point_summary(windows):
    """One share over the rounds: each figure's interval, and how many windows were valid."""
    ok = [w for w in windows if w.get("p99_ms") is not None]
    keys = ("offered_rps", "rps", "rate_ratio", "p50_ms", "p99_ms", "p999_ms", "own_lag_p99_ms",
            "cpu_us_per_request", "server_busy")
    out = {k: interval([w.get(k) for w in ok]) for k in keys}
    out["in_system"] = interval([in_system(w) for w in ok])
    out["valid_rounds"] = sum(1 for w in ok if w.get("valid"))
    out["measured_rounds"] = len(ok)
    out["errors_total"] = sum(w.get("errors_total", 0) for w in ok)
    return out


def document_rows(runner):
    """results.json's targets, as figures.py reads a row: id, connections_requested, summary."""
    p = runner.profile
    targets = []
    for t in runner.targets:
        rows = []
        for row in rows_for(t, p.rows):
            raw = runner.curves.get((t.label, row.key))
            if raw is None:
                continue
            curve = {"capacity": [window_json(m, None) for m in raw["capacity"]],
                     "points": {pct: [window_json(m, pct) for m in raw.get(pct, [None] * p.rounds)]
                                for pct in p.rates_percent}}
            summary = summarize(curve, p.rounds, p.rates_percent)
            rows.append({
                "server": t.name, "variant": t.variant.name, "label": t.label, "id": row.id,
                "key": row.key, "path": row.path, "delay": row.delay,
                "mean_delay_ms": row.mean_delay_ms, "connections_requested": row.connections,
                "latency_of": "overshoot" if row.mean_delay_ms > 0 else "latency",
                "summary": summary,
                "points": [dict(percent=pct, **point_summary(curve["points"][pct]))
                           for pct in p.rates_percent],
                "capacity_rounds": curve["capacity"],
                "rounds": [w for pct in p.rates_percent for w in curve["points"][pct]]})
        targets.append(results.target_json(runner, t, rows))
    return targets


def resummarize(doc):
    """Every row's summary and points computed again from the windows it keeps (after a change to
    how a figure is computed from them -- never to what was measured)."""
    shares = doc["meta"]["rates_percent"]
    for t in doc["targets"]:
        for row in t["rows"]:
            for w in row["capacity_rounds"] + row["rounds"]:
                if "load" in w and "open_loop" in w["load"]:  # cm-load's whole JSON: trim it
                    w["load"] = load_kept(w["load"])
            rounds = len(row["capacity_rounds"])
            points = {pct: [{"error": "not run"}] * rounds for pct in shares}
            for w in row["rounds"]:
                if "round" in w and w.get("percent") in points:
                    points[w["percent"]] = list(points[w["percent"]])
                    points[w["percent"]][w["round"]] = w
            curve = {"capacity": row["capacity_rounds"], "points": points}
            row["summary"] = summarize(curve, rounds, shares)
            row["points"] = [dict(percent=pct, **point_summary(points[pct])) for pct in shares]
    return doc


def dumps(doc):
    """results.json's text: indented, but each window on one line (858 windows of ~25 figures a
    run: one figure a line made the file over 1 MiB)."""
    windows = {}

    def mark(w):
        key = f"@window{len(windows)}@"
        windows[key] = json.dumps(w)
        return key

    shallow = {**doc, "targets": [
        {**t, "rows": [{**r, "capacity_rounds": [mark(w) for w in r["capacity_rounds"]],
                        "rounds": [mark(w) for w in r["rounds"]]} for r in t["rows"]]}
        for t in doc["targets"]]}
    text = json.dumps(shallow, indent=1)
    for key, line in windows.items():
        text = text.replace(f'"{key}"', line, 1)
    return text + "\n"


def document(runner, meta, skipped):
    return {"schema": results.SCHEMA, "meta": meta, "skipped": skipped,
            "targets": document_rows(runner), "claims": []}

