"""cost_report -- harness/cost's figures over the rounds (cmharness.stats) and its page: a View of
a run's cost.json and one function per section of results/cost.md, and the rows of runs.csv.
"""
import argparse
import collections
import csv
import re

from . import proc, processes, provenance, stats
from .cost_run import LOADS
from .servers import PEERS


# ---------------------------------------------------------------------------------------------
# The figures over the rounds (cmharness.stats).

FIGURES = {  # name -> (its value in a run's row, what it is)
    "cpu": (lambda row: row["cpu_us_per_request"], "server CPU µs per request"),
    "rps": (lambda row: row["rps"], "answers per second in the measured window"),
    "busy": (lambda row: row["cpu_busy"], "server CPU time / wall time"),
    "sleeps": (lambda row: row.get("sleeps_per_request"), "voluntary context switches per request"),
    "calls": (lambda row: (row.get("strace") or {}).get("per_request"), "system calls per request"),
    "rps_traced": (lambda row: (row.get("strace") or {}).get("rps_traced"), "answers per second under strace"),
}


def per_round(rounds, server, kind, key):
    """The figure `key` of one server and load in each round, None where that run failed."""
    out = []
    for rnd in rounds:
        row = rnd["rows"].get(server, {}).get(kind)
        out.append(FIGURES[key][0](row) if row and "error" not in row else None)
    return out


def value(rounds, server, kind, key):
    """The median over the rounds with its interval (None: never measured)."""
    return stats.estimate(per_round(rounds, server, kind, key))


def ratio(rounds, server, kind, key, ref):
    """The median of the within-round ratios server / ref, with its interval."""
    return stats.paired_ratio(per_round(rounds, server, kind, key), per_round(rounds, ref, kind, key))


def reference(kind):
    return "node" if kind == "delay" else "nginx"  # nginx's config answers /plaintext only


def summary(rounds, servers):
    out = {}
    for s in servers:
        out[s] = {}
        for kind in LOADS:
            out[s][kind] = {}
            for key in FIGURES:
                to = ratio(rounds, s, kind, key, reference(kind))
                out[s][kind][key] = {"value": as_json(value(rounds, s, kind, key)), "reference": reference(kind),
                                     "ratio": as_json(to)}
    return out


def as_json(estimate):
    return None if estimate is None else estimate.to_json()


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def cell(e, digits=2):
    """"17.19 [16.80 17.52]", "17.19 [n=3]" with too few rounds for an interval, "-" if none."""
    return "-" if e is None else e.format(f"{{:,.{digits}f}}")


def median_of(e, digits):
    return "-" if e is None else fmt(e.estimate, digits)


def describe_errors(errors):
    return ", ".join(f"{k} {v}" for k, v in errors.items() if v)


# ---------------------------------------------------------------------------------------------
# The report: a View of a run's cost.json, and one function per section.


class View:
    def __init__(self, doc):
        self.doc = doc
        self.args = argparse.Namespace(**doc["settings"])
        self.servers, self.rounds = doc["servers"], doc["rounds"]
        self.models = [s for s in self.servers if s not in PEERS]
        self.machine = doc["provenance"]["machine"]
        a = self.args
        self.titles = {"wrk": "`/plaintext`, wrk", "h2load": "`/plaintext`, h2load --h1",
                       "delay": f"`/delay/{a.delay}`, cm-load, {a.delay_connections:,} conns"}

    def rows_of(self, server, kind):
        for rnd in self.rounds:
            row = rnd["rows"].get(server, {}).get(kind)
            if row and "error" not in row:
                yield row

    def flagged(self, server, kind):
        return " ⚠" if any(sum(row["errors"].values()) for row in self.rows_of(server, kind)) else ""

    def value(self, server, kind, key):
        return value(self.rounds, server, kind, key)

    def ratio(self, server, kind, key):
        return ratio(self.rounds, server, kind, key, reference(kind))

    def threads(self, server):
        return next((row["threads"] for kind in LOADS for row in self.rows_of(server, kind)), "-")

    def table(self, columns, threads=False):
        """A row per server and, for each load, a cell per column: (title, cell(server, load))."""
        head = "| server | threads |" if threads else "| server |"
        rule = "|---|---|" if threads else "|---|"
        for kind in LOADS:
            for title, _ in columns:
                head += f" {title.format(load=self.titles[kind], ref=reference(kind))} |"
                rule += "--:|"
        out = [head, rule]
        for s in self.servers:
            line = f"| {s} | {self.threads(s)} |" if threads else f"| {s} |"
            out.append(line + "".join(f" {cell_of(s, kind)} |" for kind in LOADS for _, cell_of in columns))
        return out + [""]


def header_section(v):
    a, doc = v.args, v.doc
    la = provenance.load_average_text(doc["provenance"]["load_average"])
    le = provenance.load_average_text(doc["ended"]["load_average"])
    return [
        "# What one request costs: server CPU and system calls per request", "",
        "For each model (`cm-server --threads 1`: one loop; the blocking model one worker per",
        "connection, see the notes), nginx (one worker) and Node.js, in one run: the server's CPU time per",
        "request and its system calls per request, on `/plaintext` with two clients nobody here wrote",
        f"(`wrk -t1 -c{a.connections}`, `h2load --h1 -t1 -c{a.connections}`) and on `/delay/{a.delay}` with "
        f"{a.delay_connections:,}",
        "connections (`cm-load`, which checks every answer). The `/delay` column's CPU per request is what a",
        "waiting request costs the server: read the request, arm a timer, wake, write the answer.", "",
        f"**Conditions**: {a.note or 'not stated (this run was given no --note)'}; load average {la} at the "
        f"start and {le} at the end.",
        "CPU time counts only while the server runs, so it suffers less from a noisy machine than rps does;",
        "but a server that shares its CPU with other work is woken more often for less work and finds its",
        "caches cold, so its figures read high. Read the ratios to nginx (taken within a round) before the",
        "absolute figures.", "",
        f"Regenerate: `make cost` (builds, then `{doc['command']}`); {doc['elapsed_s'] / 60:.1f} minutes for "
        "this run.", "",
        f"Each figure is the median over {len(v.rounds)} round{'s' if len(v.rounds) != 1 else ''} with its 95% "
        "interval in brackets, `[low high]`",
        "(distribution-free, from the order statistics; `[n=5]` where fewer than six rounds measured it, too",
        "few for an interval). Each ratio is the server's figure over the reference's in the same round: the",
        "median of those within-round ratios, with its interval. The reference is nginx; its config answers",
        "`/plaintext` only, so on `/delay` the reference is Node. **Two intervals that overlap mean no",
        "difference measured here**; a ratio whose interval holds 1.00 is no different from its reference.",
        "⚠ marks a figure from a client run that reported errors (see the notes).", ""]


def figure_tables(v):
    out = []
    for key, title, unit in (("cpu", "Server CPU per request", "µs"), ("calls", "System calls per request",
                                                                        "calls")):
        if key == "calls" and not v.args.strace:
            continue
        def figure(s, kind, key=key):
            e = v.value(s, kind, key)
            return cell(e) + (v.flagged(s, kind) if e else "")

        out += [f"## {title} ({unit})", ""] + v.table(
            [("{load}", figure), ("× {ref}", lambda s, kind, key=key: cell(v.ratio(s, kind, key)))], threads=True)
    return out


def summary_section(v):
    lines = []
    for kind in ("wrk", "h2load"):
        ranked = [(v.ratio(x, kind, "cpu"), x) for x in v.models]
        ranked = sorted([(r, x) for r, x in ranked if r], key=lambda rx: rx[0].estimate)
        if len(ranked) < 2 or not v.ratio("nginx", kind, "cpu"):
            continue

        def about(x):
            return (f"{median_of(v.value(x, kind, 'calls'), 2)} system calls and "
                    f"{median_of(v.value(x, kind, 'sleeps'), 3)} sleeps per request")

        (low, closest), (high, furthest) = ranked[0], ranked[-1]
        same = ""
        if low.has_interval and low.low <= 1.0 <= low.high:
            same = "; its interval holds 1.00: no difference from nginx measured here"
        lines.append(f"- {v.titles[kind]}: furthest from nginx, **{furthest}** at {high.format()}× nginx's CPU "
                     f"per request ({about(furthest)}); closest, **{closest}** at {low.format()}× "
                     f"({about(closest)}{same}); nginx: {median_of(v.value('nginx', kind, 'calls'), 2)} "
                     "calls per request.")
    if not lines:
        return []
    return ["In short (computed from the tables; the mix below says which calls):", ""] + lines + [""]


def sleeps_section(v):
    out = ["## Sleeps per request", "",
           "How often the server's threads went to sleep per answer in the measured window: the",
           "`voluntary_ctxt_switches` of every thread (`/proc/PID/task/*/status`), over the answers. A thread",
           "that blocks and is woken again costs the server a trip through the scheduler that no system-call",
           "count shows; a loop that finds work waiting each time it looks sleeps far less than once per",
           "request.", ""]
    return out + v.table([("{load}", lambda s, kind: cell(v.value(s, kind, "sleeps"), 3))])


def context_section(v):
    out = ["## Context: the rate, and how much of CPU 0 the server got", "",
           "Answers per second and the server's CPU busy (its CPU time over the window's length) in the",
           "measured window, and the rate under strace (how much strace slowed it), medians over the rounds.",
           "A server busy well under 100% on `/plaintext` was waiting for CPU 0, not for work: on a busy",
           "machine these say how much of the CPU each server got. They are not the comparison of speed",
           "(`results/quick/` is, from a quiet machine).", ""]
    def busy(s, kind):
        e = v.value(s, kind, "busy")
        return "-" if e is None else f"{e.estimate:.0%}"

    return out + v.table([("{load}: rps", lambda s, kind: median_of(v.value(s, kind, "rps"), 0)),
                          ("busy", busy),
                          ("rps under strace", lambda s, kind: median_of(v.value(s, kind, "rps_traced"), 0))])


def mix_rows(v, kind, shown):
    """The rows of one load's mix table: each call's median per request, and the share that failed."""
    traced = {s: [row["strace"] for row in v.rows_of(s, kind) if row.get("strace")] for s in shown}
    most = collections.Counter()
    for s in shown:
        for st in traced[s]:
            for name, per in st["per_request_by_call"].items():
                most[name] = max(most[name], per)
    out = []
    for name, top in most.most_common():
        if top < 0.01:
            continue
        vals, fails = [], []
        for s in shown:
            per = [st["per_request_by_call"].get(name, 0.0) for st in traced[s]]
            failed = [st["call_errors"].get(name, 0) / st["calls"][name] for st in traced[s] if st["calls"].get(name)]
            m = stats.median(per) if per else None
            vals.append("-" if m is None else ("·" if m < 0.005 else f"{m:.2f}"))
            f = stats.median(failed) if failed else 0
            fails.append(f"{f * 100:.0f}%" if m is not None and m >= 0.005 and f >= 0.005 else "")
        if all(x in ("·", "-") for x in vals):
            continue
        out.append(f"| `{name}` | " + " | ".join(vals) + " |")
        if any(fails):
            out.append("| &nbsp;&nbsp;% failed | " + " | ".join(fails) + " |")
    return out


def mix_section(v):
    if not v.args.strace:
        return []
    out = ["## The system-call mix per request", "",
           "Calls per request by name, medians over the rounds (a call under 0.01 per request everywhere is",
           "left out; `·` is under 0.005). The `% failed` rows are the share of those calls that returned an",
           "error (`EAGAIN` on a read that found nothing, for instance), where any did. `restart_syscall` is",
           "strace's (see the notes) and not in the totals.", ""]
    for kind in LOADS:
        shown = [s for s in v.servers if any(row.get("strace") for row in v.rows_of(s, kind))]
        if not shown:
            continue
        out += [f"### {v.titles[kind]}", "", "| call | " + " | ".join(shown) + " |", "|---|" + "--:|" * len(shown)]
        out += mix_rows(v, kind, shown)
        totals = [f"**{median_of(v.value(s, kind, 'calls'), 2)}**" for s in shown]
        out += ["| **total** | " + " | ".join(totals) + " |", ""]
    return out


def run_notes(v):
    notes, errored, runs = [], 0, 0
    for i, rnd in enumerate(v.rounds, 1):
        for s in v.servers:
            for kind in LOADS:
                row = rnd["rows"].get(s, {}).get(kind)
                if row is None:
                    continue
                runs += 1
                where = f"round {i}, {s}, {v.titles[kind]}"
                if "error" in row:
                    notes.append(f"- {where}: **failed, no figures**: {row['error']}")
                    continue
                if sum(row["errors"].values()):
                    errored += 1
                    notes.append(f"- {where}: ⚠ the client reported {describe_errors(row['errors'])} over its run "
                                 f"({row['client']['requests']:,} answers, the strace window included)")
                if row.get("strace_error"):
                    notes.append(f"- {where}: no system-call count: {row['strace_error']}")
                if row.get("connections_lost"):
                    notes.append(f"- {where}: {row['connections_lost']} connections closed during the measured "
                                 "window (their bytes after the last read are not counted)")
    first = (f"- Client errors: none in the {runs} client runs: every answer every client counted was right."
             if not errored else f"- Client errors: {errored} in the {runs} client runs (listed below).")
    return ["## Notes", "", first] + notes + [""]


ERROR_KINDS = [
    "What an error means (each kind is counted, and the figures beside it flagged ⚠):", "",
    "- **wrk**: `non_2xx_3xx`: an answer with another status; `connect`: a connection that could not be",
    "  opened; `read` / `write`: a read or write on a connection failed (a reset, or the server closed",
    "  it); `timeout`: a request unanswered after 2 s (wrk's default `--timeout`). wrk checks no body.",
    "- **h2load**: `failed`: requests that never completed (`errored` ones included); `errored`: failed",
    "  on a connection or protocol error; `timeout`: a connection closed for inactivity; `non_2xx`: 3xx,",
    "  4xx or 5xx answers. The requests in flight when `-D` ends are dropped, not errors. h2load checks no",
    "  body either.",
    "- **cm-load** (harness/load/README.md): `connect`: a connection that could not be opened; `reset`:",
    "  the server closed or reset a connection with a request in flight; `timeout`: no answer within",
    "  10 s; `status`: a wrong status; `body`: a body other than the delay asked for; `early`: an answer",
    "  before its delay (a server that did not wait); `not_open`: connections not open at the end.", ""]

STRACE_METHOD = [
    "- **System calls per request**: `strace -c -f -p PID` (every thread; nginx's master and worker)",
    "  over the strace window, over the answers sent in it. The server is paused (`SIGSTOP`) while",
    "  strace attaches and again while it detaches, so the calls counted are exactly those the server",
    "  made for those answers; its clients just wait (well under their timeouts). A call that was",
    "  blocked at a pause comes back as `restart_syscall`: strace's doing, so shown in the mix but left",
    "  out of the totals; an idle thread (the async models' 64-thread `/block` pool, Node's workers)",
    "  also shows the one wait it was in, a few dozen calls over thousands of answers. **strace slows",
    "  the server** (each call stops it twice; see \"rps under strace\"), so no CPU time or rps is ever",
    "  taken from that window; and a slowed server finds more work waiting at each wake-up, so the",
    "  calls that wait (`epoll_wait`, `io_uring_enter`, `poll`) may read a little low per request."]


def method_section(v):
    a = v.args
    orders = "; ".join(f"{i}. " + ", ".join(r["order"]) for i, r in enumerate(v.rounds, 1))
    out = ["How it was measured:", "",
           f"- Each load ran on a freshly started server pinned to CPU {a.server_cpu}, the client on CPU "
           f"{a.client_cpu}; strace",
           "  beside the server (which waits for it at every call anyway), so the client keeps its CPU.",
           f"  Rounds: {len(v.rounds)}, the servers in this order: {orders}.",
           f"- One client run per load and server holds two windows: its connections open, {a.settle} s to settle,",
           f"  the **measured window** ({a.duration} s), then strace attached, the **strace window** "
           f"({a.strace_duration} s), strace",
           "  detached. The client runs just long enough for both (a few seconds; wrk is stopped with SIGINT, on",
           "  which it reports); its errors are counted over the whole run.",
           "- **Answers** in a window are counted where the server sends them: the bytes its connections sent",
           "  (`ss -ti`: tcp_info's `bytes_acked`, per connection, read at each edge) over the size of one",
           "  answer (read from the server before the run: every answer to one path is the same bytes, the",
           "  `Date` header having a fixed width). So the count is the same for every client and server, and",
           "  opening and closing connections fall outside the windows.",
           "- **CPU per request**: the server's utime + stime from `/proc/PID/stat` (every thread; nginx's",
           f"  master and worker summed), in {1000 // proc.HZ} ms clock ticks, at both edges of the measured "
           "window, over",
           "  the answers in it."]
    out += STRACE_METHOD if a.strace else []
    if a.blocking_workers:
        out.append(f"- **The blocking model** runs `--threads {a.blocking_workers}` (`--blocking-workers`).")
    else:
        out += ["- **The blocking model** runs one worker per connection (`--threads` = the load's connections:",
                f"  {a.connections} and {a.delay_connections:,}) instead of `--threads 1`: with keep-alive a worker",
                f"  serves one connection until it closes, so one worker would serve one of the {a.connections} "
                "connections",
                f"  and the others would only time out. All its threads run on CPU {a.server_cpu}, like every "
                "other server's."]
    return out + ["- nginx: `harness/peers/nginx.conf.in` with one worker process, `access_log off`; Node.js:",
                  "  `harness/peers/delay-server.js` (plain `http`, `setTimeout` for `/delay`), its whole process;",
                  "  Go: `harness/peers/go/` (net/http, `time.Sleep` for `/delay`), `GOMAXPROCS` 1; Tokio:",
                  "  `harness/peers/tokio/` (hyper over the `current_thread` runtime, `tokio::time::sleep`).", ""]


def conditions_section(v):
    doc, a, m, c = v.doc, v.args, v.machine, v.doc["clients"]
    extra = (f"; {m['compiler']}, build {m['build_type']}; {c['wrk']}; {c['h2load']}; {c['strace']}; peers "
             f"{', '.join(str(v) for v in m['peers'].values())}. Details: [cost/machine.md](cost/machine.md)")
    out = provenance.conditions_markdown(
        doc["provenance"], ended_utc=doc["ended"]["utc"], load_after=doc["ended"]["load_average"],
        pinning=proc.pinning_line([a.server_cpu], [a.client_cpu], "each server", "its client"),
        command=doc["command"], machine_extra=extra)
    out.append("- Load average at each round's start: "
               + "; ".join(provenance.load_average_text(r["load_average"]) for r in v.rounds))
    if a.note:
        out.append(f"- Note: {a.note}")
    return out + [
        "- The git tree hash of each model's folder, common/ and servers/ as measured: `provenance.trees` in",
        "  cost.json. Raw data: [cost/runs.csv](cost/runs.csv) (one line per round, server and load) and",
        "  [cost/cost.json](cost/cost.json) (everything: each window's edges, every strace count, every command).",
        ""]


#: The run's own ports, pids and scratch folders, which a reader's run will not share, as the
#: page names them (processes.shown() shows the rest of a command).
PLACEHOLDERS = ((r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"), (r"-p \d+", "-p PID"),
                (r"/\S*/cm-cost-[^/ ]+/", "SCRATCH/"), (r"SCRATCH/cm-([a-z_]+)-[^/ ]+/", r"SCRATCH/\1/"))


def commands_section(v):
    out = ["## Commands", "",
           "The first round's, for one model and the two peers (PORT, PID and SCRATCH stand for the run's own).",
           "", "```"]
    first = v.models[0] if v.models else None
    for s in [x for x in (first, "nginx", "node") if x in v.servers]:
        out.append(f"# {s}" + (" (every model alike, with its --model; async models --threads 1)" if s == first else ""))
        shown = []
        for kind in LOADS:
            row = v.rounds[0]["rows"].get(s, {}).get(kind) if v.rounds else None
            if not row or "error" in row:
                continue
            cmds = [(row["server_command"], v.args.server_cpu), (row["command"], v.args.client_cpu)]
            if row.get("strace"):
                cmds.append((row["strace"]["strace_command"], v.args.server_cpu))
            for argv, cpu in cmds:
                text = processes.shown(argv, [cpu])
                for pattern, placeholder in PLACEHOLDERS:
                    text = re.sub(pattern, placeholder, text)
                if text not in shown:
                    shown.append(text)
        out += shown
    return out + ["```", ""]


def write_report(doc):
    v = View(doc)
    sections = (header_section, figure_tables, summary_section, sleeps_section, context_section,
                mix_section, run_notes, lambda v: ERROR_KINDS, method_section, conditions_section,
                commands_section)
    return "\n".join(line for section in sections for line in section(v))


CSV_COLUMNS = ["round", "position", "server", "load", "threads", "answer_bytes", "window_s", "answers", "rps",
               "server_cpu_s", "server_cpu_busy", "cpu_us_per_request", "sleeps_per_request", "strace_window_s",
               "strace_answers", "rps_under_strace", "syscalls_per_request", "client_answers", "client_errors",
               "problem"]


def csv_row(row):
    """The columns of CSV_COLUMNS after "load", for a run that was measured."""
    def num(x, d):
        return "" if x is None else f"{x:.{d}f}"

    st = row.get("strace") or {}
    return [row["threads"], row["answer_bytes"], num(row["window_s"], 3), num(row["answers"], 0),
            num(row["rps"], 0), num(row["cpu_s"], 2), num(row["cpu_busy"], 3),
            num(row["cpu_us_per_request"], 3), num(row.get("sleeps_per_request"), 3),
            num(st.get("window_s"), 3), num(st.get("answers"), 0), num(st.get("rps_traced"), 0),
            num(st.get("per_request"), 3), row["client"]["requests"], describe_errors(row["errors"]) or 0,
            row.get("strace_error", "")]


def write_csv(path, rounds, servers):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CSV_COLUMNS)
        for i, rnd in enumerate(rounds, 1):
            for s in servers:
                for kind in LOADS:
                    row = rnd["rows"].get(s, {}).get(kind)
                    if row is None:
                        continue
                    lead = [i, rnd["order"].index(s) + 1, s, kind]
                    if "error" in row:
                        out.writerow(lead + [""] * (len(CSV_COLUMNS) - 5) + [row["error"]])
                    else:
                        out.writerow(lead + csv_row(row))
