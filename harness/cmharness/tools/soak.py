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
import re
import shlex
import shutil
import sys
import tempfile
import time

from cmharness import ROOT, charts, default_bin_dir, load, proc, processes, provenance
from cmharness.results import pyplot
from cmharness.servers import Server

PROGRESS = re.compile(r"cm-load\s+(\d+)s\s+(\w+)\s+rps\s+(\d+)\s+open\s+(\d+)/(\d+)\s+errors\s+(\d+)")
#: How far the last minute's mean RSS may move from the second minute's and still be "flat".
FLAT = 0.05


@dataclasses.dataclass
class Progress:
    """cm-load's latest progress line: its phase (connect, stagger, warmup, run) and counts."""

    phase: str = ""
    rps: int = 0
    open: int = 0
    errors: int = 0


def parse_progress(line):
    """A Progress from one of cm-load's progress lines; None for any other line."""
    m = PROGRESS.search(line)
    if not m:
        return None
    return Progress(phase=m.group(2), rps=int(m.group(3)), open=int(m.group(4)),
                    errors=int(m.group(6)))


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
    """Called by load.run every poll: follows cm-load's log (progress lines kept, other lines
    echoed) and, once a second, reads the server. `died` turns true when the server is gone."""

    def __init__(self, server, log_path, t0):
        self.server = server
        self.log_path = log_path
        self.t0 = t0
        self.next_tick = t0 + 1
        self.samples = []
        self.progress = Progress()
        self.died = False
        self._log = None
        self._partial = ""

    def follow(self):
        if self._log is None:
            try:
                self._log = open(self.log_path, errors="replace")
            except OSError:
                return
        self._partial += self._log.read()
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            progress = parse_progress(line)
            if progress:
                self.progress = progress
            elif line.strip():
                print(line.rstrip(), file=sys.stderr)

    def __call__(self, now):
        self.follow()
        if self.died or now < self.next_tick:
            return
        self.next_tick += 1
        try:
            r = self.server.readings()
            fds = proc.open_fds(self.server.pid)
        except (RuntimeError, ProcessLookupError, FileNotFoundError):
            self.died = True
            print("soak: cm-server died", file=sys.stderr)
            return
        p = self.progress
        s = Sample(round(now - self.t0, 1), r.rss_kib, fds, r.threads, round(r.cpu_s, 2),
                   p.rps, p.open, p.errors, p.phase)
        self.samples.append(s)
        if len(self.samples) % 30 == 0:
            print(f"soak: {s.t_s:5.0f} s  rss {s.rss_kib / 1024:.1f} MiB  fds {s.fds}  "
                  f"rps {s.rps}  open {s.open}  errors {s.errors}", file=sys.stderr)

    def close(self):
        if self._log is not None:
            self.follow()
            self._log.close()


# -- the arithmetic of the verdict (pure) ---------------------------------------------------------

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
    def of(text):
        return text() if result else "?"

    def errors():
        kinds = ", ".join(f"{k} {v}" for k, v in result.errors.items())
        return f"{result.errors_total} ({kinds})"

    def latency():
        lat = result.latency_us
        return f"{lat.p50 / 1000:.1f} / {lat.p99 / 1000:.1f} / {lat.max / 1000:.1f} ms"

    def answered():
        n = result.responses_total
        return "?" if n is None else f"{n:,}"

    return [
        ("connections held (cm-load, end of window)",
         of(lambda: f"{result.connections_open:,} of {connections:,}")),
        ("rps (measured window)", of(lambda: f"{result.rps:,.0f}")),
        ("requests answered (whole run)", of(answered)),
        ("errors", of(errors)),
        ("latency p50 / p99 / max", of(latency)),
        ("RSS, mean of the second minute", f"{t.rss_second / 1024:.1f} MiB"),
        ("RSS, mean of the last minute", f"{t.rss_last / 1024:.1f} MiB"),
        ("RSS change", f"{t.change * 100:+.1f}%: {t.verdict}"),
        ("open descriptors, second / last minute", f"{t.fds_second:,.0f} / {t.fds_last:,.0f}"),
        ("server alive at the end", "yes" if server_alive else "NO"),
    ]


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


# -- writing ---------------------------------------------------------------------------------------

def relative(argv):
    return shlex.join(argv).replace(ROOT + "/", "")


def write_samples(path, samples):
    with open(path, "w") as f:
        f.write(",".join(FIELDS) + "\n")
        for s in samples:
            f.write(",".join(str(v) for v in dataclasses.astuple(s)) + "\n")


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


def write_markdown(path, a, rows, s, meta):
    lines = [f"# Soak: {a.model}, {a.connections:,} connections on /delay/{a.delay}, "
             f"{a.minutes:g} minutes", ""]
    if a.note:
        lines += [f"> {a.note}", ""]
    lines += ["| | |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "![RSS, descriptors and rps over time](soak.png)", "",
              "Samples, one a second: `samples.csv`; cm-load's own result: `load.json`. *Flat* "
              "means the mean RSS of the last minute is within 5% of the second minute's (the "
              "first minute holds the connect phase).", ""]
    lines += provenance.conditions_markdown(
        meta["provenance"], ended_utc=meta["ended_utc"], load_after=meta["load_after"],
        pinning=meta["pinning"], command=meta["command"])
    lines += [f"- Server: `{meta['server_command']}`", f"- Load: `{meta['load_command']}`"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


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
    kinds = [f.type for f in dataclasses.fields(Sample)]
    convert = {"float": float, "int": int, "str": str, float: float, int: int, str: str}
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [Sample(*(convert[k](r[n]) for k, n in zip(kinds, FIELDS))) for r in rows]


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
    server_cpus, load_cpus = proc.split_cpus(1)
    pinning = proc.pinning_line(server_cpus, load_cpus, "cm-server", "cm-load")
    prov = provenance.provenance(os.path.dirname(os.path.abspath(a.load)))
    s = soak(a, out, server_cpus, load_cpus)
    meta = {"started_utc": prov["recorded_utc"], "ended_utc": provenance.utc_now(),
            "load_after": list(proc.load_average()), "pinning": pinning,
            "command": shlex.join(["harness/soak"] + sys.argv[1:]),
            "server_command": relative(s.server_command), "load_command": relative(s.load_command),
            "load_status": s.run.status if s.run else "no result", "provenance": prov}

    write_samples(os.path.join(out, "samples.csv"), s.samples)
    t = trend(s.samples)
    result = s.run.result if s.run else None
    rows = table_rows(result, t, a.connections, s.server_alive)
    write_json(os.path.join(out, "summary.json"), a, t, s, meta)
    write_markdown(os.path.join(out, "summary.md"), a, rows, s, meta)
    try:
        chart(s.samples, a, os.path.join(out, "soak.png"))
    except charts.LayoutError as e:  # the run's files are written: --redraw after a fix
        print(f"soak: {e}", file=sys.stderr)
    print("\n".join(f"{k}: {v}" for k, v in rows))
    print(f"soak: wrote {os.path.relpath(out, ROOT)}/summary.md", file=sys.stderr)
    return 0
