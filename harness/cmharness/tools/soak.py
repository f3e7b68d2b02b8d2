"""soak -- one model under 10,000 connections on /delay/100 for minutes: does anything creep?

    harness/soak --model asio_coro                  # 10 minutes -> results/soak/asio_coro/
    harness/soak --model uring_coro --minutes 3 --note "short run"
    harness/soak --redraw results/soak/asio_coro     # runs nothing: soak.png again from its files

Starts the model (cmharness.servers.Server: `cm-server --model M --threads 1`) pinned to the first
CPU (with two CPUs or more), and cm-load pinned to the others, holding --connections connections
(default 10,000, which one process holds under this machine's 20,000 open files) each asking
GET /delay/100 in a closed loop for --minutes minutes (a staggered start, so the timers expire
evenly; cm-load spreads its connections over 127.0.0.x itself). Every second the script samples
the server's RSS, threads and CPU time (Server.readings()) and its open descriptors, beside
cm-load's own progress line (rps, connections open, errors); cm-load is stopped early if the
server dies. The core stops both by pid, SIGTERM then SIGKILL, whatever happened.

It writes results/soak/<model>/ (--out):
  samples.csv   one line a second: t_s, rss_kib, fds, threads, cpu_s, and cm-load's rps, open, errors
  load.json     cm-load's JSON (--json), kept as it wrote it
  server.log    cm-server's output
  soak.png      RSS, descriptors and cm-load's rps over time, a panel each (Debian's
                /usr/bin/python3 with python3-matplotlib; cmharness.charts.save checks its layout)
  summary.md    errors by kind, rps, the mean RSS of the second minute and of the last minute, and
                "flat" when the last minute's is within 5% of the second minute's; the machine, the
                load average before and after, the commands, the commit
  summary.json  the same, as data, with cm-load's JSON and the provenance (machine, commit, and the
                git tree hash of every model's folder and of common/ as measured)

The first minute is left out of the comparison: it holds the connect phase and the allocator's
warm-up. With --minutes 2 the second minute is the last one and the verdict says nothing; 3 is the
least that compares two different minutes. Not run by `make test`. Run it with /usr/bin/python3.
"""
import argparse
import csv
import dataclasses
import json
import os
import shlex
import shutil
import sys
import tempfile
import time

from cmharness import ROOT, charts, default_bin_dir, load, longrun, processes
from cmharness.results import pyplot
from cmharness.servers import Server
from cmharness.soak_report import table_rows, trend, write_json, write_markdown


@dataclasses.dataclass
class Sample:
    """One second of the soak: the server as /proc saw it, and cm-load's progress then."""

    t_s: float
    rss_kib: int
    fds: int
    threads: int
    cpu_s: float
    rps: int
    open: int
    errors: int
    phase: str


FIELDS = [f.name for f in dataclasses.fields(Sample)]


class Sampler:
    """Called by load.run every poll: follows cm-load's log (longrun.ProgressLog) and, once a
    second, reads the server (longrun.Watch) into a Sample beside cm-load's latest progress."""

    def __init__(self, server, log_path, t0):
        self.log = longrun.ProgressLog(log_path)
        self.watch = longrun.Watch(server, t0)
        self.samples = []

    @property
    def died(self):
        return self.watch.died

    def __call__(self, now):
        self.log.follow()
        if self.died:
            return
        w = self.watch(now)
        if self.died:
            print("soak: cm-server died", file=sys.stderr)
        if w is None:
            return
        r = w.readings
        p = self.log.latest
        s = Sample(round(w.t_s, 1), r.rss_kib, w.fds, r.threads, round(r.cpu_s, 2),
                   p.rps, p.open, p.errors, p.phase)
        self.samples.append(s)
        if len(self.samples) % 30 == 0:
            print(f"soak: {s.t_s:5.0f} s  rss {s.rss_kib / 1024:.1f} MiB  fds {s.fds}  "
                  f"rps {s.rps}  open {s.open}  errors {s.errors}", file=sys.stderr)

    def close(self):
        self.log.close()


# -- running ---------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="the model to soak (required unless --redraw)")
    ap.add_argument("--minutes", type=float, default=10, help="length of the measured run (default 10)")
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--delay", type=int, default=100, help="ms of /delay/{ms} (default 100)")
    ap.add_argument("--server", default=os.path.join(default_bin_dir(), "cm-server"),
                    help="the cm-server to run (default: build/bin/cm-server)")
    ap.add_argument("--load", default=os.path.join(default_bin_dir(), "cm-load"),
                    help="the cm-load to run (default: build/bin/cm-load)")
    ap.add_argument("--out", default=None, help="default: results/soak/<model>")
    ap.add_argument("--note", default="", help="a line about the conditions, written into summary.md")
    ap.add_argument("--redraw", metavar="DIR", help="run nothing: draw DIR/soak.png again from "
                    "DIR/samples.csv and DIR/summary.json (into --out when given)")
    a = ap.parse_args(argv)
    if not a.model and not a.redraw:
        ap.error("--model is required")
    if os.path.basename(a.server) != "cm-server":
        ap.error("--server must name a file called cm-server (the core runs the one in its folder)")
    return a


@dataclasses.dataclass
class Soak:
    """What one soak run gives: the samples, cm-load's run, and the commands that ran."""

    samples: list
    run: "load.LoadRun | None"
    server_alive: bool
    server_command: list
    load_command: list


def run_load(a, server, load_cpus, json_path):
    """cm-load against the server for --minutes, sampled once a second; (samples, LoadRun)."""
    duration_s = int(round(a.minutes * 60))
    argv = load.command(server.url(f"/delay/{a.delay}"), connections=a.connections, threads=1,
                        duration_s=duration_s, warmup_s=5, stagger_ms=a.delay,
                        json_path=json_path, quiet=False)
    argv[0] = a.load
    print(f"soak: {shlex.join(server.command)}\nsoak: {shlex.join(argv)}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        log_path = os.path.join(scratch, "load.log")
        sampler = Sampler(server, log_path, time.monotonic())
        try:
            # connect phase, warm-up, and a margin: then it is stopped
            run = load.run(argv, json_path, cpus=load_cpus, log_path=log_path,
                           limit_s=duration_s + 120, on_poll=sampler, poll_s=0.02,
                           stop_when=lambda: sampler.died)
        except (ValueError, KeyError) as e:
            print(f"soak: cm-load's JSON is unreadable: {e}", file=sys.stderr)
            run = None
        finally:
            sampler.close()
    if run is not None and run.status == "timed out":
        print("soak: cm-load overran its time: stopped", file=sys.stderr)
    return sampler.samples, run, argv


def soak(a, out, server_cpus, load_cpus):
    """Starts the server, runs the load, keeps the server's log in `out`; the Soak."""
    bin_dir = os.path.dirname(os.path.abspath(a.server))
    with Server(a.model, cpus=server_cpus, threads=1, bin_dir=bin_dir) as server:
        try:
            samples, run, load_command = run_load(a, server, load_cpus,
                                                  os.path.join(out, "load.json"))
            alive = server.running()
        finally:
            server.stop()
            shutil.copyfile(server.log_path, os.path.join(out, "server.log"))
        return Soak(samples, run, alive, server.command, load_command)


def chart(samples, a, path):
    """soak.png: the server's RSS, its open descriptors and cm-load's rps over time, a panel each
    (two unrelated scales on one panel invite reading one line against the other), each with
    headroom above its line; the two minutes the verdict compares shaded on the RSS panel."""
    plt = pyplot("soak")
    if plt is None or not samples:
        return
    t = [s.t_s / 60 for s in samples]
    end = samples[-1].t_s / 60
    fig, (rss, fds, rps) = plt.subplots(3, 1, figsize=(9, 7.5), sharex=True)
    panels = ((rss, [s.rss_kib / 1024 for s in samples], "tab:blue", "server RSS (MiB)"),
              (fds, [s.fds for s in samples], "tab:orange", "server open descriptors"),
              (rps, [s.rps for s in samples], "tab:green", "rps (cm-load)"))
    for ax, ys, color, name in panels:
        ax.plot(t, ys, color=color)
        ax.set_ylabel(name, color=color)
        ax.set_ylim(0, 1.3 * max(max(ys), 1))
        ax.grid(True, alpha=0.3)
    spans = ((1, 2, "second minute"), (end - 1, end, "last minute")) if end >= 3 else \
        ((1, min(end, 2), "second minute = last minute"),)  # a short run: one window (trend)
    for x0, x1, text in spans:
        if x1 > x0:
            rss.axvspan(x0, x1, color="0.9", zorder=0)
            rss.text((x0 + x1) / 2, 0.97, text, transform=rss.get_xaxis_transform(), ha="center",
                     va="top", fontsize=8, color="0.3")
    rss.set_title(f"{a.model}: {a.connections:,} connections on /delay/{a.delay}; shaded: the "
                  "minutes the verdict compares (mean RSS)", fontsize=10)
    rps.set_xlabel("minutes since cm-load started")
    fig.tight_layout()
    charts.save(fig, path)


def read_samples(path):
    """samples.csv back into Samples."""
    fields = dataclasses.fields(Sample)
    with open(path) as f:
        return [Sample(*(k.type(r[k.name]) for k in fields)) for r in csv.DictReader(f)]


def redraw(folder, out=None):
    """Draws soak.png again from a committed run: folder's samples.csv and summary.json, into
    `out` (default: the folder itself). Returns the chart's path."""
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    a = argparse.Namespace(model=summary["model"], connections=summary["connections"],
                           delay=summary["delay_ms"])
    path = os.path.join(out or folder, "soak.png")
    chart(read_samples(os.path.join(folder, "samples.csv")), a, path)
    return path


def main():
    a = parse_args()
    if a.redraw:
        print(f"soak: wrote {redraw(a.redraw, a.out)}", file=sys.stderr)
        return 0
    out = a.out or os.path.join(ROOT, "results/soak", a.model)
    for binary in (a.server, a.load):
        if not os.access(binary, os.X_OK):
            sys.exit(f"soak: {binary} is not built (make build)")
    os.makedirs(out, exist_ok=True)
    processes.install_signal_handlers()
    processes.raise_open_files()
    cond = longrun.Conditions("soak", "cm-load", os.path.dirname(os.path.abspath(a.load)))
    s = soak(a, out, cond.server_cpus, cond.client_cpus)
    cond.end()
    commands = {"server_command": processes.shown(s.server_command, cond.server_cpus),
                "load_command": processes.shown(s.load_command, cond.client_cpus)}
    meta = {"started_utc": cond.prov["recorded_utc"], "ended_utc": cond.ended_utc,
            "load_after": cond.load_after, "pinning": cond.pinning, "command": cond.command,
            **commands, "load_status": s.run.status if s.run else "no result",
            "provenance": cond.prov}

    longrun.write_csv(os.path.join(out, "samples.csv"), FIELDS, map(dataclasses.astuple, s.samples))
    t = trend(s.samples)
    rows = table_rows(s.run.result if s.run else None, t, a.connections, s.server_alive)
    write_json(os.path.join(out, "summary.json"), a, t, s, meta)
    write_markdown(os.path.join(out, "summary.md"), a, rows, cond.markdown() + [
        f"- Server: `{commands['server_command']}`", f"- Load: `{commands['load_command']}`"])
    try:
        chart(s.samples, a, os.path.join(out, "soak.png"))
    except charts.LayoutError as e:  # the run's files are written: --redraw after a fix
        print(f"soak: {e}", file=sys.stderr)
    print("\n".join(f"{k}: {v}" for k, v in rows))
    print(f"soak: wrote {os.path.relpath(out, ROOT)}/summary.md", file=sys.stderr)
    return 0
