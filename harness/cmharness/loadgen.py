"""results/loadgen.md: cm-load against load generators nobody here wrote -- wrk
(harness/cross-check, the page) and tsung (harness/tsung-check, a section of it, which the
cross-check keeps when it rewrites the page) -- what the two tools share, and both parts of the
page, each written from the JSON its tool records (results/loadgen.json, loadgen-tsung.json).

Each client runs in turn on one running server, pinned to the CPUs the server is not on, in
rounds whose order is reversed every other round (so each runs right before the other in one round
and right after it in the next); they are compared by ratios taken within a round, because the
machine's speed drifts between rounds, not within one.
"""
import os
import shlex
import sys

from . import load, processes, provenance, stats
from .rounds import order

#: The cross-check's clients, in the order a round starts with; NO_SPIN sleeps in epoll_wait.
CLIENTS = ("wrk", "cm-load", "cm-load --spin-us 0")
NO_SPIN = CLIENTS[2]
RATIO = "{:.3f}"
PACE = ("The server is the bottleneck, so a client wins by what it costs the server per answer. "
        "A client asleep in `epoll_wait` when an answer arrives must be woken, and the server pays "
        "for the wake-up inside its `send`; cm-load polls without sleeping for `--spin-us` "
        "(100 µs) after each event, so while answers keep coming it is never asleep. wrk does "
        "more work per answer, so it sleeps less than a lean client that sleeps (the "
        "`--spin-us 0` row).")
#: The block of results/loadgen.md that harness/tsung-check writes.
TSUNG_BLOCK = "tsung-check"
TSUNG_CLIENTS = ("tsung", "cm-load")


def rounds_text(n):
    return f"{n} round" + ("" if n == 1 else "s")


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def median_text(values, fmt_="{:.2f}"):
    """The median of the values with its interval, "-" when there are none."""
    e = stats.estimate(values)
    return "-" if e is None else e.format(fmt_)


def against_one(ratio):
    """"higher", "lower" or "no difference measured here": where a ratio's interval lies against 1
    (without an interval, no difference can be measured)."""
    return stats.compare(ratio, stats.Estimate(1.0, 1.0, 1.0, ratio.n))


def _mean(runs, key):
    return sum(r[key] for r in runs) / len(runs)


# -- running ------------------------------------------------------------------------------------

def in_rounds(clients, rounds, run_one, progress):
    """{client: [its run of each round]}: every client once a round by run_one(client), in the
    order "alternate" (cmharness.rounds); progress(client, round from 1, run) after each run."""
    found = {client: [] for client in clients}
    for i in range(rounds):
        for client in order(clients, i, rounds, "alternate"):
            run = run_one(client)
            found[client].append(run)
            progress(client, i + 1, run)
    return found


def run_cm_load(argv, json_path, cpus, timeout, check=True):
    """Runs argv -- cm-load writing its JSON to json_path, or a command around it (strace) --
    pinned to `cpus`: (its load.LoadResult, the processes.Finished). An earlier run's JSON is
    removed first, so that a run which wrote none is not read as this one."""
    if os.path.exists(json_path):
        os.remove(json_path)
    done = processes.run(argv, cpus, timeout=timeout, check=check)
    return load.LoadResult.read(json_path), done


def shown(argv, port, json_path):
    """A client's command as the page shows it: the repository's paths relative, its JSON
    out.json, the server's port PORT (the reader's run will have its own)."""
    return processes.shown(argv, replace=((json_path, "out.json"),
                                          (f"127.0.0.1:{port}", "127.0.0.1:PORT")))


def invocation(tool):
    """The command that ran this tool, as a page's "Regenerate" shows it: "harness/TOOL ARGS"."""
    return shlex.join([f"harness/{tool}", *sys.argv[1:]])


# -- harness/cross-check's page -----------------------------------------------------------------

def verdict_lines(doc):
    """The "## Verdict" section: the paired ratios, pass or fail, and who sets the pace."""
    plain, delay = doc["runs"]
    s, res = doc["settings"], doc["runs"]
    ratios = {p: {t: stats.Estimate.from_json(e) for t, e in r.items()}
              for p, r in doc["ratios_to_wrk"].items()}
    ceiling = s["connections"] / (s["delay_ms"] / 1000)
    lines = ["## Verdict", "",
             f"cm-load / wrk is the median over {rounds_text(s['rounds'])} of the ratio of their "
             "rps in the same round, with its 95% interval `[low high]`; rps are medians over the "
             "rounds.", ""]
    for path, extra in ((plain, ""), (delay, f"; the ceiling connections / delay is "
                                             f"{fmt(ceiling, 0)} rps")):
        v = doc["verdicts"][path]
        rps = {t: median_text([r["rps"] for r in res[path][t]], "{:,.0f}") for t in CLIENTS[:2]}
        lines.append(f"- `{path}`: cm-load / wrk = {ratios[path]['cm-load'].format(RATIO)}: "
                     f"**{'pass' if v['passed'] else 'FAIL'}** ({v['why']}). cm-load "
                     f"{rps['cm-load']} rps, wrk {rps['wrk']} rps{extra}.")
    lines.append(f"- Without its polling (`--spin-us 0`), cm-load / wrk = "
                 f"{ratios[plain][NO_SPIN].format(RATIO)} on `{plain}`, "
                 f"{ratios[delay][NO_SPIN].format(RATIO)} on `{delay}`.")
    busy = {t: (_mean(res[plain][t], "server_busy"), _mean(res[plain][t], "client_busy"))
            for t in CLIENTS}
    lines += ["", f"Who sets the pace on `{plain}`: the server's CPU was "
              f"{busy['wrk'][0]:.0%} busy under wrk, {busy['cm-load'][0]:.0%} under cm-load and "
              f"{busy[NO_SPIN][0]:.0%} under cm-load --spin-us 0 (means of the runs), while the "
              f"clients' own work took {busy['wrk'][1]:.0%}, {busy['cm-load'][1]:.0%} and "
              f"{busy[NO_SPIN][1]:.0%} of theirs. " + PACE]
    return lines


def conditions_lines(doc, json_name):
    """The "## Conditions" section: provenance.conditions_markdown and what the cross-check adds."""
    prov, s = doc["provenance"], doc["settings"]
    lines = provenance.conditions_markdown(
        prov, ended_utc=doc["ended_utc"], load_after=doc["load_average_after"],
        pinning=doc["pinning"], command=doc["command"],
        machine_extra=f"; {prov['machine']['compiler']}; {doc['wrk']}")
    lines += [f"- Build: `{s['build_dir']}` ({prov['machine']['build_type']}).",
              f"- Server: `{doc['server_command']}` (model {s['model']}, {s['server_threads']} "
              "threads).",
              f"- Clients: {s['connections']} connections, {s['threads']} thread(s), "
              f"{s['duration_s']} s per run, {rounds_text(s['rounds'])} per target, each running "
              "every client once, the order reversed every other round.",
              "- cm-load runs with `--warmup 0`, like wrk, which has no warm-up; cm-load checks "
              "every answer (status, body, never early), wrk only counts non-2xx/3xx and socket "
              "errors.",
              f"- Provenance (machine, commit, the tree hash of each model's folder) and every "
              f"run: [`{json_name}`]({json_name})."]
    if s["note"]:
        lines.append(f"- Note: {s['note']}")
    return lines


def runs_lines(doc):
    """The "## Runs" table: every run, with its ratio to wrk's run of the same round."""
    lines = ["## Runs", "",
             "Client CPU busy is the client's CPU time over the run's wall time (cm-load's "
             "without its idle polling, which is shown apart); server CPU busy is the server's, "
             "from `/proc`.", "",
             "| target | client | round | rps | / wrk's | p50 latency | p99 latency | errors "
             "| client CPU busy | idle polling | server CPU busy |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path, runs in doc["runs"].items():
        for tool in CLIENTS:
            for i, r in enumerate(runs[tool]):
                wrk = runs["wrk"][i]["rps"]
                ratio = r["rps"] / wrk if wrk else None
                spin = "n/a" if r["client_spin"] is None else f"{r['client_spin']:.0%}"
                lines.append(f"| `{path}` | {tool} | {i + 1} | {fmt(r['rps'], 0)} "
                             f"| {fmt(ratio, 3)} | {fmt(r['p50_ms'], 3)} ms "
                             f"| {fmt(r['p99_ms'], 3)} ms | {r['errors']} "
                             f"| {r['client_busy']:.0%} | {spin} | {r['server_busy']:.0%} |")
    return lines


def syscall_lines(syscalls, path):
    w, c = syscalls["wrk"], syscalls["cm-load"]
    # the most frequent first; a tie in the order recorded, so the page is the same each time
    names = sorted(dict.fromkeys([*w, *c]), key=lambda n: -max(w.get(n, 0), c.get(n, 0)))
    lines = [f"## System calls per answer (`{path}`, under `strace -f -c`)", "",
             "Why cm-load costs the client no more than wrk: one `read` and one `send` per "
             "answer, and the epoll set is left alone; wrk adds and removes write interest around "
             "every request. (strace slows both clients; only these ratios are meaningful, not "
             "its rates.)", "",
             "| system call | wrk | cm-load |", "| --- | ---: | ---: |"]
    lines += [f"| `{n}` | {w.get(n, 0):.2f} | {c.get(n, 0):.2f} |" for n in names]
    lines.append(f"| total | {sum(w.values()):.2f} | {sum(c.values()):.2f} |")
    return lines


def cross_check_page(doc, json_name):
    """The whole of results/loadgen.md but its tsung section, from what the cross-check records."""
    targets, syscalls = list(doc["runs"]), doc["syscalls_per_answer"]
    lines = ["# cm-load against wrk", "",
             "The cross-check: `cm-load` and `wrk` (a load generator nobody here "
             "wrote) on the same targets of the same server, with the same connections, threads "
             "and duration. cm-load must not be measured slower than wrk on `/plaintext` and must "
             "agree with it within 5% on the fixed delay.", "",
             f"Regenerate: `{doc['command']}` (builds `{doc['settings']['build_dir']}` if "
             "needed).", ""]
    lines += verdict_lines(doc) + [""] + conditions_lines(doc, json_name) + [""] + runs_lines(doc)
    if syscalls:
        lines += [""] + syscall_lines(syscalls, targets[0])
    lines += ["", "## Commands (one run of each)", "", "```"]
    lines += [doc["runs"][path][tool][0]["command"] for path in targets for tool in CLIENTS]
    if syscalls:
        lines += ["# system calls per answer: each client once more, 2 s, as above but under",
                  "strace -f -c -o FILE <client command with -d 2 / --duration 2>"]
    return "\n".join(lines + ["```", ""])


# -- harness/tsung-check's section --------------------------------------------------------------

def tsung_table(runs):
    """The medians of each model, rate and client; cm-load's p50 and p99 over tsung's in a round."""
    lines = ["| model | rate, rps | client | answered, rps | p50, ms | p99, ms | errors "
             "| cm-load / tsung p50 | cm-load / tsung p99 |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for model, by_rate in runs.items():
        for rate, by_client in by_rate.items():
            t, c = by_client["tsung"], by_client["cm-load"]
            for tool in TSUNG_CLIENTS:
                rs = by_client[tool]
                ratio = ("", "")
                if tool == "cm-load":
                    ratio = tuple(median_text(stats.paired_ratios([x[k] for x in c],
                                                                  [x[k] for x in t]))
                                  for k in ("p50_ms", "p99_ms"))
                lines.append(
                    f"| {model} | {float(rate):,.0f} | {tool} "
                    f"| {median_text([r['answered_rps'] for r in rs], '{:,.0f}')} "
                    f"| {median_text([r['p50_ms'] for r in rs], '{:.3f}')} "
                    f"| {median_text([r['p99_ms'] for r in rs], '{:.3f}')} "
                    f"| {sum(r['errors'] for r in rs)} | {ratio[0]} | {ratio[1]} |")
    return lines


def tsung_findings(runs):
    """What the table says, a line per model and rate: whether tsung kept its rate (a generator
    that did not measured itself), then cm-load's p50 and p99 against tsung's."""
    lines = []
    for model, by_rate in runs.items():
        for rate, by_client in by_rate.items():
            t, c, rate = by_client["tsung"], by_client["cm-load"], float(rate)
            answered = stats.estimate([r["answered_rps"] for r in t])
            head = f"- {model} at {rate:,.0f} rps: "
            if answered.estimate < 0.95 * rate:
                lines.append(head + f"tsung did not keep its rate (it answered "
                             f"{answered.estimate:,.0f} rps): its figures are its own limit "
                             "(a connection and an Erlang process per request, on one CPU), "
                             "not the server's; compare at the lower rate.")
                continue
            parts = []
            for key, name in (("p50_ms", "p50"), ("p99_ms", "p99")):
                e = stats.paired_ratio([x[key] for x in c], [x[key] for x in t])
                if e is None:
                    continue
                side = against_one(e)
                verdict = side if side.startswith("no ") else f"{side} than tsung's"
                parts.append(f"cm-load's {name} is {e.format('{:.2f}')} of tsung's ({verdict})")
            lines.append(head + "; ".join(parts) + ".")
    return lines


TSUNG_WHY = (
    "What differs, and why. **tsung opens a connection for every request** (a user is a session: "
    "connect, one GET, close), so its server accepts and closes one connection per answer and a "
    "request never waits for an idle connection; cm-load sends on held connections and a request "
    "due while every connection is busy waits for one -- in its latency. **tsung's duration starts "
    "when it sends** (after its connect); cm-load's starts when the request was due (its intended "
    "send time), so any lag of cm-load itself, and any wait for a connection, is in its figures "
    "and not in tsung's. **tsung is an Erlang VM**: each user is a process scheduled by the VM, "
    "whose own scheduling sits inside tsung's figures; cm-load is one epoll loop. Both offer "
    "Poisson arrivals at the same mean rate. Where the two agree, the latency is the server's; "
    "where cm-load's is higher, its own lag (cm-load's `own lag` row) and the queue for an idle "
    "connection are the first suspects.")


def tsung_section(rec):
    """The tsung-check's block of results/loadgen.md, markers included, from what it records."""
    s, runs = rec["settings"], rec["runs"]
    first = next(iter(next(iter(runs.values())).values()))  # the first model's first rate
    lines = [f"<!-- {TSUNG_BLOCK} -->", "## An open loop against tsung's", "",
             "cm-load `--rate` (open loop, Poisson arrivals) and tsung (Debian's open-loop "
             f"generator, {rec['tsung']}) at the same rates against the same running server, "
             f"`{s['path']}`. Each figure is the median over {s['runs']} round(s) with its 95% "
             "interval `[low high]` (from six rounds); the ratios are taken within a round.", ""]
    lines += tsung_table(runs)
    lines += [""] + tsung_findings(runs) + ["", TSUNG_WHY, "",
              f"- Regenerate: `{rec['command']}` (`--render`: this section again from "
              "`loadgen-tsung.json`, nothing measured)",
              f"- When: {rec['provenance']['recorded_utc']} to {rec['ended_utc']}; commit "
              f"{provenance.commit_line(rec['provenance']['commit'])}; {rec['pinning']}.",
              f"- cm-load: {s['connections']} held connections, {s['warmup']:g} s warm-up, "
              f"{s['duration']:g} s measured; tsung: {s['warmup'] + s['duration']:g} s of "
              f"arrivals, the requests that ended in the first {s['warmup']:g} s left out.",
              "- Errors: tsung's, a request that got no 200 or failed (its `error` field); "
              "cm-load's, every answer it could not accept (status, body, timeout, reset).",
              "- Every run and the provenance: [`loadgen-tsung.json`](loadgen-tsung.json).", "",
              "```", *(first[t][0]["command"] for t in TSUNG_CLIENTS), "```",
              f"<!-- /{TSUNG_BLOCK} -->"]
    return "\n".join(lines)
