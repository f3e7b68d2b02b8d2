"""Reading a trace of cm-server --trace (Chrome trace-event JSON) and drawing it as swimlanes.

A trace has three kinds of event (common/include/cm/trace.hpp): work that held a thread ("X": a
sleep, a burn of CPU, a parse), a span that held none ("b"/"e" with the connection as id: a
request, a step handed to a timer or a pool) and instants ("i": accept, read, write, close). Each
carries args.conn. scene() turns them into what a reader asks of a trace -- per request, where it
waited and on which thread -- and draw() into one lane per thread, plus a lane per wait that held
no thread.
"""

import collections
import dataclasses
import json

#: The phases a Perfetto-openable trace from cm-server may hold.
PHASES = {"M", "X", "b", "e", "i"}
#: The spans of a step handed away from the serving thread (cm::trace_venue).
AWAY = ("on a timer (no thread)", "on the pool", "on a new thread")


class TraceError(ValueError):
    """A file that is not a trace Perfetto would open as cm-server meant it."""


def load(path):
    with open(path) as f:
        return validate(json.load(f))


def validate(trace):
    """The trace, if it is valid trace-event JSON with what every event needs; else TraceError."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not events:
        raise TraceError("no traceEvents list")
    for i, e in enumerate(events):
        missing = [k for k in ("ph", "pid", "tid", "name") if k not in e]
        if e.get("ph") != "M":
            missing += [k for k in ("ts",) if k not in e]
        if missing:
            raise TraceError(f"event {i} has no {', '.join(missing)}: {e}")
        if e["ph"] not in PHASES:
            raise TraceError(f"event {i}: phase {e['ph']!r} is not one cm-server writes")
        if e["ph"] == "X" and "dur" not in e:
            raise TraceError(f"event {i}: a complete event without dur")
        if e["ph"] in "be" and "id" not in e:
            raise TraceError(f"event {i}: an async event without id")
    return trace


@dataclasses.dataclass
class Request:
    conn: int
    line: str          # "GET /delay/100"
    plan: str          # "wait 100 ms"
    start_ms: float    # the plan, since the first accept
    end_ms: float      # the reply
    where: str         # "held thread 3", "on a timer (no thread)", "on the pool, held thread 2"
    threads: list      # the threads its work ran on ("thread 3")
    serving: str       # the thread that parsed it and wrote its reply


@dataclasses.dataclass
class Scene:
    model: str
    threads: dict       # tid -> "thread k"
    roles: dict         # "thread k" -> "worker", "loop", "pool"
    requests: list      # of Request, by connection
    work: list          # (thread name, conn, name, start_ms, dur_ms): what held a thread
    away: list          # (conn, name, start_ms, end_ms): a step that held no thread of ours
    instants: list      # (thread name, conn, name, ms)


def scene(trace, model):
    """What the trace says each request did (see Scene)."""
    events = validate(trace)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    timed = sorted((e for e in events if e["ph"] != "M"), key=lambda e: e["ts"])
    accepts = [e["ts"] for e in timed if e["name"] == "accept"]
    t0 = min(accepts) if accepts else timed[0]["ts"]

    def ms(ts):
        return (ts - t0) / 1000.0

    work, away, instants = [], [], []
    open_spans = collections.defaultdict(list)
    requests = {}
    for e in timed:
        conn, thread = e["args"]["conn"], names.get(e["tid"], f"tid {e['tid']}")
        if e["ph"] == "X" and e["name"] != "parse":
            work.append((thread, conn, e["name"], ms(e["ts"]), e["dur"] / 1000.0))
        elif e["ph"] == "i":
            instants.append((thread, conn, e["name"], ms(e["ts"])))
        elif e["ph"] == "b":
            open_spans[conn].append((e, thread))
            if e["name"] not in AWAY:
                requests[conn] = Request(conn, e["name"], e["args"].get("plan", ""), ms(e["ts"]),
                                         ms(e["ts"]), "nowhere: answered at once", [], thread)
        elif e["ph"] == "e" and open_spans[conn]:
            begun, thread_at_begin = open_spans[conn].pop()
            if begun["name"] in AWAY:
                away.append((conn, begun["name"], ms(begun["ts"]), ms(e["ts"])))
            elif conn in requests:
                requests[conn].end_ms = ms(e["ts"])
    for r in requests.values():
        held = [w for w in work if w[1] == r.conn and r.start_ms <= w[3] <= r.end_ms]
        r.threads = sorted({w[0] for w in held})
        steps = [a for a in away if a[0] == r.conn and r.start_ms <= a[2] <= r.end_ms]
        held_text = "held " + ", ".join(r.threads) if held else ""
        if steps:
            r.where = steps[0][1] + (f", {held_text}" if held_text else "")
        elif held:
            r.where = held_text
    roles = {}
    for thread, conn, name, _ in instants:
        if name == "accept":
            roles[thread] = "worker" if model == "blocking" else "loop"
    for thread, *_ in work:
        roles.setdefault(thread, "pool")
    return Scene(model, names, roles, sorted(requests.values(), key=lambda r: r.conn), work,
                 away, instants)


def summary(s):
    """The scene as a table a student reads beside the swimlane (and an exercise grades)."""
    lines = [f"# {s.model}: where each request of the scene waited, and on which thread",
             "",
             "| conn | request | plan | answered after (ms) | where it waited | parsed and answered on |",
             "| ---: | --- | --- | ---: | --- | --- |"]
    for r in s.requests:
        lines.append(f"| {r.conn} | {r.line} | {r.plan} | {r.end_ms - r.start_ms:.1f} | {r.where} "
                     f"| {r.serving} ({s.roles.get(r.serving, '?')}) |")
    waits = [r for r in s.requests if r.plan.startswith("wait ")]
    held = sorted({t for r in waits for t in r.threads})
    lines += ["", f"threads that did something: {len(s.roles)} "
              f"({', '.join(f'{t} {role}' for t, role in sorted(s.roles.items(), key=_thread_order))})",
              f"threads held by the /delay waits: {len(held)}"
              + (f" ({', '.join(held)})" if held else " (they waited on timers)")]
    return "\n".join(lines) + "\n"


def _thread_order(item):
    name = item[0]
    return int(name.split()[-1]) if name.split()[-1].isdigit() else 1 << 30


def lanes(s):
    """The rows of the chart, top to bottom: every thread that did something (loop or workers
    first, then the pool), then one row per step that held no thread."""
    threads = sorted(s.roles, key=lambda t: (s.roles[t] == "pool", _thread_order((t,))))
    rows = [(t, f"{t}\n({s.roles[t]})") for t in threads]
    for conn, name, _, _ in s.away:
        if name == "on a timer (no thread)":
            rows.append((("timer", conn), f"conn {conn}: timer\n(no thread)"))
    return rows


#: A request's colour follows its route, the same in every model's chart: /delay is always blue.
ROUTE_COLOURS = {"/delay/": "Blues", "/block/": "Oranges", "/cpu/": "Reds", "/plaintext": "Greens"}


def route_colours(requests, cmap):
    """{conn: colour}: each request the colour of its route (ROUTE_COLOURS; grey for another),
    several requests of one route told apart by shade, darkest first."""
    by_route = {}
    for r in requests:
        path = r.line.split()[-1] if r.line.split() else ""
        route = next((k for k in ROUTE_COLOURS if path.startswith(k)), None)
        by_route.setdefault(route, []).append(r.conn)
    out = {}
    for route, conns in by_route.items():
        for i, conn in enumerate(conns):
            if route is None:
                out[conn] = "0.5"
                continue
            shade = 0.85 - 0.4 * i / max(1, len(conns) - 1) if len(conns) > 1 else 0.7
            out[conn] = cmap(ROUTE_COLOURS[route])(shade)
    return out


def draw(s, path, what_to_read):
    """One swimlane chart of the scene, written by charts.save (which refuses overlapping text)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import charts

    rows = lanes(s)
    y = {key: len(rows) - 1 - i for i, (key, _) in enumerate(rows)}
    colour = route_colours(s.requests, plt.get_cmap)
    end = max([r.end_ms for r in s.requests] + [0.0]) * 1.05 + 1
    fig, ax = plt.subplots(figsize=(10, 1.1 + 0.55 * len(rows)))
    for thread, conn, name, start, dur in s.work:
        if thread in y:
            ax.barh(y[thread], max(dur, end / 400), left=start, height=0.5, color=colour.get(conn, "grey"))
    for conn, name, start, stop in s.away:
        if ("timer", conn) in y:
            ax.barh(y[("timer", conn)], stop - start, left=start, height=0.3, fill=False,
                    hatch="///", edgecolor=colour.get(conn, "grey"))
    marks = {"accept": "^", "read": ".", "write": "v", "close": "x"}
    for thread, conn, name, t in s.instants:
        if thread in y and name in marks:
            ax.plot([t], [y[thread] + 0.32], marks[name], color=colour.get(conn, "grey"), markersize=5)
    ax.set_yticks(list(y.values()), [label for _, label in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(-end / 50, end)
    ax.set_xlabel("ms since the first accept  (bar: work that held the thread; hatched: a wait that held "
                  "none; ▲ accept  ▼ reply  × close)", fontsize=8)
    ax.set_title(f"{s.model}: {what_to_read}", fontsize=9, loc="left")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[r.conn]) for r in s.requests]
    ax.legend(handles, [f"conn {r.conn}: {r.line} ({r.plan})" for r in s.requests], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    charts.save(fig, path)
