"""harness/burst's timeline: one line per request of a burst -- when it was sent, when its answer
came -- written by burst (--timeline FILE.csv) and read by staircase and its chart, in one place.

    index,path,sent_s,answered_s,latency_s,status,ok
    0,/delay/500,0.000012,0.512345,0.512333,200,1
    1,/delay/500,0.000020,,,,0          <- not answered within burst's --timeout

Times are seconds after the burst's first send. Also here: what a model's idea predicts for a
burst of N waiting requests, answers per delay (a thread pool its size, an async model all of
them, an async model sleeping on its loop one). Pure but for read() and write().
"""

import csv
import dataclasses

from .servers import BLOCKING_WORKERS

COLUMNS = ("index", "path", "sent_s", "answered_s", "latency_s", "status", "ok")


@dataclasses.dataclass
class Request:
    """One request of a burst; answered_s, latency_s and status are None when no answer came."""

    index: int
    path: str
    sent_s: float
    answered_s: "float | None" = None
    latency_s: "float | None" = None
    status: "int | None" = None
    ok: bool = False

    def line(self):
        """The request as a line of the CSV (no newline)."""
        if self.answered_s is None:
            return f"{self.index},{self.path},{self.sent_s:.6f},,,,0"
        return (f"{self.index},{self.path},{self.sent_s:.6f},{self.answered_s:.6f},"
                f"{self.latency_s:.6f},{self.status},{int(self.ok)}")


def _number(text, kind):
    return kind(text) if text != "" else None


def parse(lines):
    """Requests from the CSV's lines (the header first); ValueError when the header is not ours."""
    rows = csv.DictReader(lines)
    if tuple(rows.fieldnames or ()) != COLUMNS:
        raise ValueError(f"not a burst timeline: the header is {rows.fieldnames}, not {COLUMNS}")
    return [Request(int(r["index"]), r["path"], float(r["sent_s"]),
                    _number(r["answered_s"], float), _number(r["latency_s"], float),
                    _number(r["status"], int), r["ok"] == "1") for r in rows]


def read(path):
    with open(path, newline="") as f:
        return parse(f)


def write(path, requests):
    with open(path, "w") as f:
        f.write(",".join(COLUMNS) + "\n")
        for r in requests:
            f.write(r.line() + "\n")


def answer_times(requests):
    """When each answered request got its answer, sorted: the "answered so far" curve."""
    return sorted(r.answered_s for r in requests if r.answered_s is not None)


def steps_of(times, gap):
    """Answer times grouped into steps: a new step begins after a silence longer than `gap`."""
    steps = []
    for t in sorted(times):
        if steps and t - steps[-1][-1] <= gap:
            steps[-1].append(t)
        else:
            steps.append([t])
    return steps


def answers_per_step(model, flags, connections, workers=BLOCKING_WORKERS):
    """How many of `connections` waiting requests a model's idea answers per delay: the blocking
    model its pool, an async model sleeping on its loop (--wait-mode sleep) one, an async model
    all of them."""
    if "sleep" in flags:
        return 1
    if model == "blocking":
        return workers
    return connections
