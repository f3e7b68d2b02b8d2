"""A long run of one client against one server, watched as it goes (harness/soak: cm-load for
minutes; harness/abuse: slowhttptest's attacks): the server read from /proc once a second,
cm-load's progress lines as it writes them, and the parts of the summary page both tools write --
its conditions and its skeleton."""

import dataclasses
import re
import shlex
import sys
import threading
import time

from . import proc, provenance
from .servers import Readings


@dataclasses.dataclass
class Sample:
    """The server once: the seconds since the watch began, its Readings, its open descriptors."""

    t_s: float
    readings: Readings
    fds: int


class Watch:
    """Reads a server's /proc once a second -- Server.readings() (CPU, RSS, threads) and its open
    descriptors, its connections plus the few of its own -- either when called with the time (from
    a client's poll loop) or on a thread of its own between start() and stop(). Once the server is
    gone `died` turns true and nothing more is read."""

    def __init__(self, server, t0=None):
        self.server = server
        self.t0 = time.monotonic() if t0 is None else t0
        self.next_tick = self.t0 + 1
        self.samples = []
        self.died = False
        self._done = threading.Event()
        self._thread = None

    def __call__(self, now):
        """This second's Sample, read now; None when it was read already or the server is gone."""
        if self.died or now < self.next_tick:
            return None
        self.next_tick += 1
        try:
            sample = Sample(now - self.t0, self.server.readings(), proc.open_fds(self.server.pid))
        except (RuntimeError, OSError):  # it exited, or /proc no longer has it
            self.died = True
            return None
        self.samples.append(sample)
        return sample

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._done.wait(1.0) and not self.died:
            self(time.monotonic())

    def stop(self):
        """Ends the thread; the seconds since the watch began."""
        self._done.set()
        self._thread.join()
        return time.monotonic() - self.t0


PROGRESS = re.compile(r"cm-load\s+(\d+)s\s+(\w+)\s+rps\s+(\d+)\s+open\s+(\d+)/(\d+)\s+errors\s+(\d+)")


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


class ProgressLog:
    """Follows the log cm-load writes while it runs (without --quiet): `latest` is the last
    progress line read, every other line is echoed to stderr; a line still being written waits
    for its end."""

    def __init__(self, path):
        self.path = path
        self.latest = Progress()
        self._log = None
        self._partial = ""

    def follow(self):
        if self._log is None:
            try:
                self._log = open(self.path, errors="replace")
            except OSError:  # cm-load has not created it yet
                return
        self._partial += self._log.read()
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            progress = parse_progress(line)
            if progress:
                self.latest = progress
            elif line.strip():
                print(line.rstrip(), file=sys.stderr)

    def close(self):
        if self._log is not None:
            self.follow()
            self._log.close()


class Conditions:
    """What a run's page says of its conditions: read as it starts (provenance(), the CPUs split
    one for the server and the rest for the client, the command that ran) and as it ends."""

    def __init__(self, tool, client, bin_dir):
        self.server_cpus, self.client_cpus = proc.split_cpus(1)
        self.pinning = proc.pinning_line(self.server_cpus, self.client_cpus, "cm-server", client)
        self.command = shlex.join([f"harness/{tool}"] + sys.argv[1:])
        self.prov = provenance.provenance(bin_dir)
        self.ended_utc = None
        self.load_after = None

    def end(self):
        self.ended_utc = provenance.utc_now()
        self.load_after = list(proc.load_average())

    def markdown(self, machine_extra=""):
        """The "## Conditions" lines (provenance.conditions_markdown), once end() was called."""
        return provenance.conditions_markdown(
            self.prov, ended_utc=self.ended_utc, load_after=self.load_after, pinning=self.pinning,
            command=self.command, machine_extra=machine_extra)


def write_page(path, title, note, table, chart, reading, conditions):
    """A summary page: the title, the run's note as a quote, the table (lines), the chart, how to
    read them, and the "## Conditions" lines (with whatever follows them)."""
    lines = [f"# {title}", ""]
    if note:
        lines += [f"> {note}", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines + table + ["", chart, "", reading, ""] + conditions) + "\n")


def write_csv(path, header, rows):
    """A CSV of plain values: the header's names, then each row's values as str() writes them."""
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(str(v) for v in row) + "\n")
