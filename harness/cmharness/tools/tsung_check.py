"""tsung-check -- cm-load's open loop against tsung's, an open-loop load generator nobody here wrote.

    harness/tsung-check                      # 2 models x 2 rates, 6 rounds; a section of results/loadgen.md
    harness/tsung-check --models asio_coro --rates 1000 --runs 1 --duration 3 --out /tmp/lg.md  # smoke

cm-load --rate offers requests at a rate whatever the server does and counts each request's latency
from when it was due (harness/load/README.md, "Open loop"). tsung (Debian's `tsung`, Erlang) is the
open-loop generator of the Debian archive: its users arrive as a Poisson process at `arrivalrate`,
each runs its session whatever the others do. Here a session opens a connection, sends
GET /plaintext, reads the answer and closes; tsung logs every request (dumptraffic="protocol") with
its duration, from its send to its answer.

For each model (--models) and each rate (--rates), --runs rounds, each running tsung and then
cm-load --rate R --arrival poisson on the same running server (the order reversed every other
round), both pinned to the CPU the server is not on. tsung's p50 / p99 come from its dump (the
requests that ended after its first --warmup seconds), cm-load's from its JSON. The figure is the
median over the rounds of each, and of their ratio within a round, with a 95% interval from six
rounds (cmharness.stats).

Writes its section of results/loadgen.md (between `<!-- tsung-check -->` and `<!-- /tsung-check
-->`; harness/cross-check keeps it when it rewrites the page) and results/loadgen-tsung.json (the
provenance and every run). Loopback only; each run is bounded; the server is stopped on the way out.
Run with /usr/bin/python3 (Debian's).
"""
import argparse
import dataclasses
import functools
import glob
import json
import os
import shutil
import sys
import tempfile

from cmharness import ROOT, default_bin_dir, load, loadgen, proc, processes, provenance, results, \
    servers
from cmharness.loadgen import TSUNG_BLOCK, TSUNG_CLIENTS, tsung_section

CONFIG = """<?xml version="1.0"?>
<!DOCTYPE tsung SYSTEM "/usr/share/tsung/tsung-1.0.dtd">
<tsung loglevel="warning" version="1.0" dumptraffic="protocol">
  <clients>
    <client host="localhost" use_controller_vm="true" maxusers="60000">{ips}</client>
  </clients>
  <servers>
    <server host="127.0.0.1" port="{port}" type="tcp"/>
  </servers>
  <load>
    <arrivalphase phase="1" duration="{duration}" unit="second">
      <users arrivalrate="{rate}" unit="second"/>
    </arrivalphase>
  </load>
  <sessions>
    <session name="one-request" probability="100" type="ts_http">
      <request><http url="{path}" method="GET" version="1.1"/></request>
    </session>
  </sessions>
</tsung>
"""


@dataclasses.dataclass
class Run:
    tool: str
    rate: float
    answered_rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    command: str


# -- tsung's side (pure) --------------------------------------------------------------------------

def config(port, rate, duration_s, path="/plaintext", sources=8):
    """The tsung configuration of one run: `rate` users a second for `duration_s`, each one request
    on its own connection, from `sources` loopback addresses (127.0.0.2...) so that the closed
    connections' TIME_WAIT does not exhaust one address's ephemeral ports."""
    ips = "".join(f'<ip value="127.0.0.{2 + k}"/>' for k in range(sources))
    return CONFIG.format(ips=ips, port=port, duration=int(duration_s), rate=f"{rate:g}", path=path)


def read_dump(text, skip_s):
    """(durations in ms of the answered requests that ended `skip_s` or more after the first one,
    the span in s they ended over, the requests that failed) from tsung.dump:
    `date;pid;id;http method;host;URL;HTTP status;size;duration;transaction;match;error;tag`."""
    rows = []
    errors = 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        f = line.split(";")
        if len(f) < 12:
            continue
        if f[6] != "200" or f[11]:
            errors += 1
            continue
        rows.append((float(f[0]), float(f[8])))
    if not rows:
        return [], 0.0, errors
    start = min(t for t, _ in rows) + skip_s
    kept = [(t, d) for t, d in rows if t >= start]
    span = (max(t for t, _ in kept) - start) if kept else 0.0
    return [d for _, d in kept], span, errors


def percentile(values, q):
    """The q-quantile by the nearest rank (as cm-load's histogram reads one, to its bucket)."""
    s = sorted(values)
    if not s:
        return None
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))
    return s[k]


# -- running -------------------------------------------------------------------------------------

class Clients:
    def __init__(self, server, args, bin_dir, cpus, workdir):
        self.server, self.args, self.bin_dir, self.cpus, self.dir = \
            server, args, bin_dir, cpus, workdir

    def tsung(self, rate):
        conf = os.path.join(self.dir, "tsung.xml")
        with open(conf, "w") as f:
            f.write(config(self.server.port, rate, self.args.duration + self.args.warmup))
        logs = tempfile.mkdtemp(dir=self.dir, prefix="tsung-")
        argv = ["tsung", "-f", conf, "-l", logs, "start"]
        processes.run(argv, self.cpus, timeout=self.args.duration + self.args.warmup + 120)
        dumps = glob.glob(os.path.join(logs, "*", "tsung.dump"))
        if not dumps:
            raise RuntimeError(f"tsung wrote no tsung.dump under {logs}")
        with open(dumps[0]) as f:
            durations, span, errors = read_dump(f.read(), self.args.warmup)
        if not durations:
            raise RuntimeError(f"tsung answered nothing ({errors} errors): {dumps[0]}")
        return Run("tsung", rate, len(durations) / span if span else 0.0,
                   percentile(durations, 0.5), percentile(durations, 0.99), len(durations),
                   errors, "tsung -f tsung.xml -l LOGS start")

    def run(self, tool, rate):
        return self.tsung(rate) if tool == "tsung" else self.cm_load(rate)

    def cm_load(self, rate):
        out = os.path.join(self.dir, "cm-load.json")
        argv = load.command(self.server.url(self.args.path), connections=self.args.connections,
                            duration_s=self.args.duration, warmup_s=self.args.warmup,
                            json_path=out, bin_dir=self.bin_dir,
                            extra=("--rate", f"{rate:g}", "--arrival", "poisson"))
        r, _ = loadgen.run_cm_load(argv, out, self.cpus,
                                   self.args.duration + self.args.warmup + 120, check=False)
        return Run("cm-load", rate, r.rps, r.latency_us.p50 / 1e3, r.latency_us.p99 / 1e3,
                   r.requests, r.errors_total, loadgen.shown(argv, self.server.port, out))


def progress(model, rate, tool, i, r):
    print(f"tsung-check: {model} {rate:g} rps {tool:<8} round {i}: p50 {r.p50_ms:.3f} ms, "
          f"p99 {r.p99_ms:.3f} ms, {r.answered_rps:,.0f} rps, {r.errors} errors", file=sys.stderr)


def measure(args, bin_dir):
    """{model: {rate: {tool: [Run per round]}}}, each model on its own running server."""
    server_cpus, client_cpus = proc.split_cpus(1)
    found = {}
    for model in args.models:
        threads = 1 if model != "blocking" else 64
        with servers.Server(model, cpus=server_cpus, threads=threads, bin_dir=bin_dir) as server, \
                tempfile.TemporaryDirectory(prefix="tsung-check-") as work:
            clients = Clients(server, args, bin_dir, client_cpus, work)
            found[model] = {}
            for rate in args.rates:
                found[model][rate] = loadgen.in_rounds(
                    TSUNG_CLIENTS, args.runs, functools.partial(clients.run, rate=rate),
                    functools.partial(progress, model, rate))
    return found, proc.pinning_line(server_cpus, client_cpus, "cm-server", "tsung and cm-load")


def record(args, prov, ended_utc, pinning, tsung, found):
    """results/loadgen-tsung.json, all its section is written from: the provenance, the settings and
    every run ({model: {rate: {tool: [Run per round]}}})."""
    return {"tool": "harness/tsung-check", "command": loadgen.invocation("tsung-check"),
            "provenance": prov, "ended_utc": ended_utc, "pinning": pinning, "tsung": tsung,
            "settings": {k: v for k, v in vars(args).items()
                         if k not in ("bin_dir", "render", "out")},
            "runs": {m: {f"{r:g}": {t: [dataclasses.asdict(x) for x in xs]
                                    for t, xs in runs.items()}
                         for r, runs in by_rate.items()} for m, by_rate in found.items()}}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="asio_coro,blocking", help="comma-separated")
    ap.add_argument("--rates", default="1000,4000", help="offered rps, comma-separated")
    ap.add_argument("--runs", type=int, default=6, help="rounds per model and rate")
    ap.add_argument("--duration", type=float, default=4.0, help="measured seconds of each run")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds left out at the start")
    ap.add_argument("--connections", type=int, default=32, help="cm-load's held connections")
    ap.add_argument("--path", default="/plaintext")
    ap.add_argument("--bin-dir", default=default_bin_dir())
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "loadgen.md"))
    ap.add_argument("--render", action="store_true",
                    help="write the section again from loadgen-tsung.json beside --out; no run")
    args = ap.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.rates = [float(r) for r in args.rates.split(",") if r]
    return args


def write(out, rec):
    """Writes the section into the page at `out`, the rest of the page as it was; the section."""
    text = tsung_section(rec)
    old = ""
    if os.path.exists(out):
        with open(out) as f:
            old = f.read()
    with open(out, "w") as f:
        f.write(results.replace_block(old, TSUNG_BLOCK, text))
    return text


def main():
    args = parse_args()
    json_path = os.path.join(os.path.dirname(os.path.abspath(args.out)), "loadgen-tsung.json")
    if args.render:
        with open(json_path) as f:
            print(write(args.out, json.load(f)))
        return 0
    if not shutil.which("tsung"):
        sys.exit("tsung-check: tsung is not installed (Debian: apt-get install tsung)")
    processes.install_signal_handlers()
    prov = provenance.provenance(args.bin_dir)
    found, pinning = measure(args, args.bin_dir)
    rec = record(args, prov, provenance.utc_now(), pinning,
                 f"tsung {provenance.package_versions(['tsung'])['tsung']}", found)
    with open(json_path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(write(args.out, rec))
    return 0
