"""abuse -- slow-client attacks from slowhttptest, a tool nobody here wrote, against every model.

    harness/abuse                                   # every built model, both attacks -> results/abuse/
    harness/abuse --models blocking,asio_coro --modes slowloris --duration 20
    harness/abuse --redraw results/abuse            # runs nothing: available.png again

For each model (cm-server --list-models) and each attack, the script starts a fresh server through
the core (cmharness.servers.Server), pinned to the first CPU where there are two CPUs or more; the
async models run one loop there, the blocking model its default 64 workers; the default
--header-timeout of 10 s unless --header-timeout says otherwise. It runs slowhttptest against it
(pinned to the other CPUs), then the core stops the server by its pid, SIGTERM then SIGKILL, even
when something failed on the way. The attacks:

  slowloris  slowhttptest -H: --connections connections, opened at --rate a second, each sending
             a request head that never ends, a header line every --interval seconds.
  slowread   slowhttptest -X: the same connections each send a GET for /plaintext --pipeline times
             in one go, advertise a receive window of 1 to 32 bytes and read 16 bytes a second.

Every second slowhttptest also sends a probe request on a new connection; the service counts as
available when the probe is answered within --probe-timeout seconds. Its CSV (one line a second:
closed, pending, connected, service available) is kept per model and attack, and the script adds:

  results/abuse/<model>-<attack>.csv   slowhttptest's own CSV (-g -o), unchanged
  results/abuse/<model>-<attack>.log   its terminal output, with the command line
  results/abuse/<model>-<attack>-server.csv   the server's open descriptors, once a second
  results/abuse/<model>-<attack>-server.log   cm-server's output
  results/abuse/summary.md             the table (seconds available, the longest outage, the most
                                       connections held, the connections the server closed), the
                                       machine, the load average before and after, the commands,
                                       the commit
  results/abuse/summary.json           the same, as data, with the provenance (machine, commit, and
                                       the git tree hash of every model's folder and of common/)
  results/abuse/available.png          "service available" over time, a row per model, a panel
                                       per attack (drawn with Debian's /usr/bin/python3 and
                                       python3-matplotlib; cmharness.charts.save checks its layout)

Bounded: each attack runs --duration seconds (slowhttptest -l) and is killed 30 s past that;
loopback only. Run it with /usr/bin/python3, which this file names in its first line.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import sys
import time

from cmharness import ROOT, charts, default_bin_dir, longrun, processes, slowhttptest
from cmharness.results import pyplot
from cmharness.servers import Server, built_models, find_program


def verdict(r):
    if not r["rows"]:
        return "no data"
    if r["available_s"] == r["seconds"]:
        return "available throughout"
    if r["available_s"] == 0:
        return "unavailable throughout"
    return f'unavailable from {r["first_unavailable_s"]} s' if not r["available_at_end"] else "outages"


# -- running one attack ----------------------------------------------------------------------------

def run_one(a, model, attack_name, cpus):
    """A fresh server, one attack against it; the summary of slowhttptest's CSV and the rest."""
    server_cpus, client_cpus = cpus
    extra = ["--header-timeout", str(a.header_timeout)] if a.header_timeout is not None else []
    threads = None if model == "blocking" else 1  # one loop, on the one CPU it is pinned to
    prefix = os.path.join(a.out, f"{model}-{attack_name}")
    with Server(model, cpus=server_cpus, threads=threads, args=extra, bin_dir=a.bin_dir) as server:
        try:
            url = server.url("/plaintext")
            cmd = ["slowhttptest"] + slowhttptest.attack_args(attack_name, a, url) + ["-g", "-o", prefix]
            print(f"abuse: {model} {attack_name}: {shlex.join(cmd)}", file=sys.stderr)
            watch = longrun.Watch(server).start()  # its descriptors: the connections it holds
            output, stopped = slowhttptest.run(cmd, client_cpus, a.duration + 30)
            elapsed = watch.stop()
            alive = server.running()
            if stopped:
                output += "\nabuse: slowhttptest killed 30 s past its duration\n"
        finally:
            server.stop()
            shutil.copyfile(server.log_path, prefix + "-server.log")
    fds = [s.fds for s in watch.samples]
    longrun.write_csv(prefix + "-server.csv", ["seconds", "server_fds"],
                      [(round(s.t_s), s.fds) for s in watch.samples])
    with open(prefix + ".log", "w") as f:
        f.write("$ " + shlex.join(cmd) + "\n" + slowhttptest.COLOUR.sub("", output))
    if os.path.exists(prefix + ".html"):
        os.unlink(prefix + ".html")  # its chart loads a script from the web; the CSV holds the same
    rows = slowhttptest.read_csv(prefix + ".csv") if os.path.exists(prefix + ".csv") else []
    result = slowhttptest.summarize(rows)
    result.update({
        "ended": slowhttptest.exit_status(output), "server_fds_max": max(fds, default=0),
        "server_fds_end": fds[-1] if fds else 0, "model": model, "attack": attack_name,
        "server_command": processes.shown(server.command, server_cpus),
        "command": processes.shown(cmd, client_cpus,
                                   replace=((prefix, f"results/abuse/{model}-{attack_name}"),)),
        "elapsed_s": round(elapsed, 1), "server_alive_after": alive,
        "csv": f"{model}-{attack_name}.csv", "rows": rows})
    return result


# -- writing ---------------------------------------------------------------------------------------

HEADER = ("| model | attack | service available | seconds available | longest outage | most "
          "connections held | closed (last line) | slowhttptest ended | server fds: most / at the "
          "end | server alive after |")

READING = (
    "Read from slowhttptest's own CSV (`<model>-<attack>.csv`, one line a second): *service "
    "available* means its probe, a new connection each second asking for the same URL, was "
    "answered within {probe} s; *most connections held* is the highest `Connected` count "
    "(connections slowhttptest had open, whether the server had accepted them or they waited in "
    "its listen backlog); *closed by the end* is its `Closed` count on the last line (connections "
    "it saw end, which for the slow reader lags: it notices the end only once it has read up to "
    "it); *slowhttptest ended*: its own exit status, \"No open connections left\" when the server "
    "had closed every attack connection before the time limit (its last CSV line may predate the "
    "last closes); *server fds*: the descriptors the server held, read from `/proc/<pid>/fd` once "
    "a second (`<model>-<attack>-server.csv`): its connections plus the few of its own (listener, "
    "loop, stdio), so the server's own view of the connections it held and closed, which "
    "slowhttptest's slow reader cannot see.")


def table_lines(results):
    """summary.md's table: a row per model and attack."""
    lines = [HEADER, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        lines.append(
            f'| {r["model"]} | {r["attack"]} | {verdict(r)} | {r["available_s"]} of '
            f'{r["seconds"]} s | {r["longest_outage_s"]} s | {r["max_connected"]} '
            f'| {r["closed_at_end"]} | {r["ended"]} at {r["seconds"] - 1} s '
            f'| {r["server_fds_max"]} / {r["server_fds_end"]} '
            f'| {"yes" if r["server_alive_after"] else "NO"} |')
    return lines


def write_summary(a, results, meta, cond):
    """summary.json (`meta` with the provenance, and every result) and summary.md."""
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"meta": dict(meta, provenance=cond.prov), "results": results}, f, indent=1)
    commands = [f'- {r["model"]} {r["attack"]}: server `{r["server_command"]}`; '
                f'attack `{r["command"]}`' for r in results]
    longrun.write_page(
        os.path.join(a.out, "summary.md"), "Slow-client attacks (slowhttptest) against every model",
        a.note, table_lines(results), "![service available over time](available.png)",
        READING.format(probe=a.probe_timeout),
        cond.markdown(machine_extra=f'; slowhttptest {meta["slowhttptest"]}')
        + ["", "## The commands, per model and attack", ""] + commands)


def chart(results, out_dir, duration):
    plt = pyplot("abuse")
    if plt is None:
        return
    attacks = [t for t in slowhttptest.ATTACKS if any(r["attack"] == t for r in results)]
    models = list(dict.fromkeys(r["model"] for r in results))
    if not attacks:
        return
    fig, axes = plt.subplots(len(attacks), 1, squeeze=False,
                             figsize=(10, 1.2 + 0.55 * len(models) * len(attacks)))
    for ax, attack_name in zip(axes[:, 0], attacks):
        for y, model in enumerate(models):
            r = next((r for r in results if r["model"] == model and r["attack"] == attack_name),
                     None)
            if not r:
                continue
            for row in r["rows"]:
                ax.barh(y, 1, left=row["s"], height=0.6, edgecolor="none",
                        color="tab:green" if row["available"] else "tab:red")
            if r["rows"] and r.get("ended", "").startswith("No open connections"):
                ax.text(r["rows"][-1]["s"] + 1.5, y, "attack over: the server closed every "
                        "connection", va="center", fontsize=8)
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels(models)
        ax.invert_yaxis()
        ax.set_xlim(0, duration + 2)
        ax.set_title(f"{attack_name}: service available (green) or not (red), per second")
        ax.set_xlabel("seconds since the attack began")
    fig.tight_layout()
    charts.save(fig, os.path.join(out_dir, "available.png"))


def duration_of(summary):
    """The seconds each attack ran (--duration) in a summary.json: its meta, or, in one written
    before the meta kept it, slowhttptest's -l in the first command."""
    if summary["meta"].get("duration_s"):
        return summary["meta"]["duration_s"]
    results = summary["results"]
    found = re.search(r" -l (\d+)", results[0]["command"]) if results else None
    return int(found.group(1)) if found else max((len(r["rows"]) for r in results), default=0)


def redraw(folder, out=None):
    """Draws available.png again from a committed run's summary.json (which keeps every second of
    slowhttptest's CSV), into `out` (default: the folder itself). Returns the chart's path."""
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    chart(summary["results"], out or folder, duration_of(summary))
    return os.path.join(out or folder, "available.png")


# -- the command line ------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.path.join(default_bin_dir(), "cm-server"),
                    help="the cm-server to run (default: build/bin/cm-server)")
    ap.add_argument("--models", default="", help="comma-separated (default: every built model)")
    ap.add_argument("--modes", default=",".join(slowhttptest.ATTACKS),
                    help="slowloris, slowread (default: both)")
    ap.add_argument("--connections", type=int, default=500, help="slowhttptest -c (default 500)")
    ap.add_argument("--rate", type=int, default=100, help="connections opened a second, -r (default 100)")
    ap.add_argument("--duration", type=int, default=30, help="seconds per attack, -l (default 30)")
    ap.add_argument("--interval", type=int, default=2, help="slowloris: seconds between header lines, -i")
    ap.add_argument("--pipeline", type=int, default=10, help="slowread: requests per connection, -k (max 10)")
    ap.add_argument("--probe-timeout", type=int, default=3, help="seconds the probe may wait, -p (default 3)")
    ap.add_argument("--header-timeout", type=int, default=None,
                    help="the server's --header-timeout in ms (default: cm-server's own)")
    ap.add_argument("--out", default=None, help="default: results/abuse (with --redraw: DIR)")
    ap.add_argument("--note", default="", help="a line about the conditions, written into summary.md")
    ap.add_argument("--redraw", metavar="DIR", help="run nothing: draw DIR/available.png again "
                    "from DIR/summary.json (into --out when given)")
    a = ap.parse_args(argv)
    if os.path.basename(a.server) != "cm-server":
        ap.error("--server must name a file called cm-server (the core runs the one in its folder)")
    if not a.redraw:
        a.out = a.out or os.path.join(ROOT, "results/abuse")
    a.bin_dir = os.path.dirname(os.path.abspath(a.server))
    return a


def chosen(a):
    """(models, attacks) the command line asks for, checked against what is built; exits if not."""
    if not find_program("slowhttptest"):
        sys.exit("abuse: slowhttptest is missing (scripts/install-deps installs it)")
    if not os.access(a.server, os.X_OK):
        sys.exit(f"abuse: {a.server} is not built (make build)")
    built = built_models(a.bin_dir)
    models = [m for m in a.models.split(",") if m] or built
    for m in models:
        if m not in built:
            sys.exit(f"abuse: model {m} is not built (built: {', '.join(built)})")
    attacks = [t for t in a.modes.split(",") if t]
    for t in attacks:
        if t not in slowhttptest.ATTACKS:
            sys.exit(f"abuse: unknown mode {t} (slowloris, slowread)")
    return models, attacks


def main():
    a = parse_args()
    if a.redraw:
        print(f"abuse: wrote {redraw(a.redraw, a.out)}", file=sys.stderr)
        return 0
    models, attacks = chosen(a)
    processes.install_signal_handlers()
    os.makedirs(a.out, exist_ok=True)
    cond = longrun.Conditions("abuse", "slowhttptest", a.bin_dir)
    cpus = (cond.server_cpus, cond.client_cpus)
    meta = {"started": cond.prov["recorded_utc"], "load_before": cond.prov["load_average"],
            "pinning": cond.pinning, "command": cond.command,
            "slowhttptest": slowhttptest.version(), "duration_s": a.duration}
    results = []
    for model in models:
        for attack_name in attacks:
            try:
                results.append(run_one(a, model, attack_name, cpus))
            except RuntimeError as e:
                print(f"abuse: {model} {attack_name}: {e}", file=sys.stderr)
            time.sleep(1)  # the previous server's sockets leave TIME_WAIT on other ports; nothing shared
    cond.end()
    meta["ended"] = cond.ended_utc
    meta["load_after"] = cond.load_after
    write_summary(a, results, meta, cond)
    try:
        chart(results, a.out, a.duration)
    except charts.LayoutError as e:  # the run's files are written: --redraw after a fix
        print(f"abuse: {e}", file=sys.stderr)
    for r in results:
        print(f'{r["model"]:16} {r["attack"]:10} {verdict(r):26} available {r["available_s"]}/'
              f'{r["seconds"]} s, most held {r["max_connected"]}, closed {r["closed_at_end"]}, '
              f'ended: {r["ended"]}')
    print(f"abuse: wrote {os.path.relpath(a.out, ROOT)}/summary.md", file=sys.stderr)
    return 0
