"""slowhttptest, the slow-client attack tool nobody here wrote (harness/abuse runs it against every
model): the command line of each attack, running it pinned, and reading what it writes -- its CSV,
one line a second, and its exit status."""

import csv
import re
import subprocess

from . import processes

ATTACKS = ("slowloris", "slowread")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def attack_args(attack, a, url):
    """slowhttptest's arguments for one attack on `url`, from `a` (harness/abuse's options:
    connections, rate, duration, probe_timeout, and interval or pipeline)."""
    common = ["-c", str(a.connections), "-r", str(a.rate), "-l", str(a.duration),
              "-p", str(a.probe_timeout), "-u", url]
    if attack == "slowloris":
        return ["-H", "-i", str(a.interval), "-x", "24"] + common
    return ["-X", "-k", str(a.pipeline), "-n", "1", "-w", "1", "-y", "32", "-z", "16"] + common


def parse_csv(lines):
    """slowhttptest's CSV: seconds, closed, pending, connected, service available (the connection
    target while the probe is answered, 0 when not)."""
    rows = []
    for r in csv.DictReader(lines):
        rows.append({"s": int(r["Seconds"]), "closed": int(r["Closed"]),
                     "pending": int(r["Pending"]), "connected": int(r["Connected"]),
                     "available": int(r["Service Available"]) > 0})
    return rows


def read_csv(path):
    with open(path) as f:
        return parse_csv(f)


def summarize(rows):
    seconds = len(rows)
    available = sum(r["available"] for r in rows)
    longest = run = 0
    first_down = None
    for r in rows:
        if r["available"]:
            run = 0
        else:
            run += 1
            longest = max(longest, run)
            if first_down is None:
                first_down = r["s"]
    return {
        "seconds": seconds,
        "available_s": available,
        "first_unavailable_s": first_down,
        "longest_outage_s": longest,
        "available_at_end": rows[-1]["available"] if rows else None,
        "max_connected": max((r["connected"] for r in rows), default=0),
        "closed_at_end": rows[-1]["closed"] if rows else 0,
    }


def exit_status(output):
    """slowhttptest's own "Exit status:" line ("Hit test time limit", "No open connections
    left", ...), its colours left out; "unknown" when it wrote none."""
    ended = re.search(r"Exit status:\s*(?:\x1b\[[0-9;]*m)*([^\n\x1b]+)", output)
    return ended.group(1).strip() if ended else "unknown"


def run(cmd, cpus, limit_s):
    """Runs slowhttptest pinned to `cpus`, stopped past limit_s: (its output, stdout then stderr;
    whether it had to be stopped)."""
    p = processes.start(cmd, cpus, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = False
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        processes.stop(p, grace=5)
        out, err = p.communicate()
        stopped = True
    processes.stop(p)  # already ended: only forgets it
    return (out or "") + (err or ""), stopped


def version():
    p = subprocess.run(["slowhttptest", "-h"], capture_output=True, text=True)
    found = re.search(r"version .*", p.stdout + p.stderr)
    return found.group(0).strip() if found else "unknown"
