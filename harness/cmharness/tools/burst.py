"""burst -- N connections each send one request at the same moment; how long until all are answered?

    harness/burst --port 8080 --connections 2000 --path /delay/500
    harness/burst --port 8080 --connections 2000 --path /delay/500 --timeline burst.csv
    harness/burst --port 8080 --connections 32 --path '/delay/{ms}' --delays 10:250

Opens every connection first, then sends all requests back to back, and reports the time from the
first send to the last complete response, with every response checked (status 200, body equal to
the number at the end of the path for /delay, /block and /cpu, never answered before its delay).
This is the issue acceptance check "2,000 x /delay/500 answered within 1 s of the first send": an
async model waits for them together, a blocking one in turn. Bounded: it gives up after --timeout,
and then still reports (and writes to --timeline) the answers it had.

--timeline FILE.csv writes one line per request: when it was sent and when its answer came, both in
seconds after the first send (cmharness/timeline.py, the format), so the answers can be drawn as a
staircase (harness/plot-staircase): a blocking pool answers them in steps of its size, an async
model in one step.

--delays A:B with '{ms}' in the path gives every connection a different delay from A..B (spread
evenly over the range, in a shuffled order): HttpArena's validation, 32 overlapping requests with
32 different delays. A server that keeps the delay anywhere but in the request answers some of them
with another request's value, and burst says how many.

burst is an instrument, like cm-load: it starts no server and reads its own HTTP. It is the asyncio
client harness/staircase runs pinned to a CPU of its own.

Exit status 0 when every response was correct, 1 otherwise.
"""
import argparse
import asyncio
import random
import re
import sys
import time

from cmharness import processes, timeline


def delays_for(count, spec):
    """`count` different delays spread evenly over A..B, in a shuffled (but repeatable) order."""
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if not m or int(m.group(1)) > int(m.group(2)):
        sys.exit(f"burst: --delays wants A:B with A <= B, not {spec!r}")
    low, high = int(m.group(1)), int(m.group(2))
    if high - low + 1 < count:
        sys.exit(f"burst: --delays {spec} holds {high - low + 1} values, fewer than the "
                 f"{count} connections: they could not all differ")
    if count == 1:
        return [low]
    values = [low + round(i * (high - low) / (count - 1)) for i in range(count)]
    random.Random(42).shuffle(values)
    return values


def expectation(path):
    """(the body the path must answer or None, the least latency in seconds) for one path."""
    m = re.search(r"/(delay|block|cpu)/(\d+)$", path)
    body = str(int(m.group(2))).encode() if m else None
    least = int(m.group(2)) / 1000 if m and m.group(1) in ("delay", "block") else 0.0
    return body, least


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--path", default="/delay/500", help="may hold {ms} (with --delays)")
    ap.add_argument("--delays", metavar="A:B", help="a different delay per connection from A..B, put in {ms}")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before giving up")
    ap.add_argument("--timeline", metavar="FILE.csv", help="write each request's send and answer times")
    args = ap.parse_args(argv)
    if not args.host.startswith("127."):
        sys.exit("burst: loopback targets only (127.0.0.0/8)")
    if ("{ms}" in args.path) != (args.delays is not None):
        sys.exit("burst: --delays and a path with {ms} go together")
    return args


def paths_for(args):
    """The path each connection asks for."""
    if args.delays:
        return [args.path.replace("{ms}", str(d)) for d in delays_for(args.connections, args.delays)]
    return [args.path] * args.connections


def new_record(path):
    """One request: its path, when it was sent and answered (time.monotonic()), what came back."""
    return {"path": path, "sent": None, "done": None, "status": None, "body": None, "error": "",
            "ok": False}


class Burst:
    """What every connection shares: the records, how many are still unanswered, and whether the
    burst gave up (after --timeout, closing what is left is not an answer)."""

    def __init__(self, paths, loop):
        self.records = [new_record(p) for p in paths]
        self.remaining = len(paths)
        self.given_up = False
        self.all_done = loop.create_future()

    def answered(self):
        self.remaining -= 1
        if self.remaining == 0 and not self.all_done.done():
            self.all_done.set_result(None)


class Answer(asyncio.Protocol):
    """One connection: stamps its answer the moment its last byte is read (a callback, no task
    to schedule first, so a busy client stamps late by as little as it can), then closes."""

    def __init__(self, burst, record):
        self.burst, self.record, self.buffer, self.transport = burst, record, b"", None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.record["done"] is not None:
            return
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", self.buffer[:end])
        if not m:
            self.finish(error="no Content-Length")
            return
        if len(self.buffer) < end + 4 + int(m.group(1)):
            return
        try:
            self.record["status"] = int(self.buffer.split(b" ", 2)[1])
        except (IndexError, ValueError):
            self.finish(error="not HTTP")
            return
        self.record["body"] = self.buffer[end + 4:end + 4 + int(m.group(1))]
        self.finish()

    def connection_lost(self, exc):
        if self.record["done"] is None and self.record["sent"] is not None and not self.burst.given_up:
            self.finish(error=type(exc).__name__ if exc else "closed before the answer")

    def finish(self, error=""):
        self.record["done"] = time.monotonic()
        self.record["error"] = error
        self.transport.close()  # at once: a blocking worker serves this connection until it closes
        self.burst.answered()


async def send_all(args, paths):
    """Opens every connection, then sends every request back to back and waits for the answers
    (at most --timeout). Returns the records and the time of the first send."""
    loop = asyncio.get_running_loop()
    burst = Burst(paths, loop)
    conns = []
    for record in burst.records:
        transport, _ = await loop.create_connection(lambda r=record: Answer(burst, r), args.host, args.port)
        conns.append(transport)
    first_send = time.monotonic()
    for record, transport in zip(burst.records, conns):
        record["sent"] = time.monotonic()  # before the write: asyncio sends at once
        transport.write(f"GET {record['path']} HTTP/1.1\r\nHost: {args.host}\r\n\r\n".encode())
    try:
        await asyncio.wait_for(asyncio.shield(burst.all_done), args.timeout)
    except asyncio.TimeoutError:
        pass
    burst.given_up = True
    for transport in conns:
        transport.close()  # the unanswered ones (closing twice is harmless)
    return burst.records, first_send


def judge(records):
    """Checks every answer, sets each record's "ok", and counts: good, wrong_body (others_value of
    them another request's delay, example one of them), early, failed."""
    asked = {str(int(re.search(r"(\d+)$", r["path"]).group(1))).encode()
             for r in records if re.search(r"/\d+$", r["path"])}
    counts = {"good": 0, "wrong_body": 0, "others_value": 0, "early": 0, "failed": 0, "example": ""}
    for r in records:
        body, least = expectation(r["path"])
        r["ok"] = False
        if r["done"] is None or r["status"] is None or r["error"]:
            counts["failed"] += 1
        elif r["status"] != 200:
            counts["failed"] += 1
        elif body is not None and r["body"] != body:
            counts["wrong_body"] += 1
            if r["body"] in asked:
                counts["others_value"] += 1
            if not counts["example"]:
                counts["example"] = f"{r['path']} answered {r['body'].decode(errors='replace')}"
        elif r["done"] - r["sent"] < least:
            counts["early"] += 1
        else:
            r["ok"] = True
            counts["good"] += 1
    return counts


def report(args, records, first_send, counts):
    """Prints what the burst saw (docs/exercises check these lines)."""
    label = args.path + (f" with --delays {args.delays}" if args.delays else "")
    pending = sum(1 for r in records if r["done"] is None)
    answered = [r["done"] for r in records if r["done"] is not None and r["status"] is not None]
    last = max(answered, default=first_send)
    if pending:
        print(f"burst: not all {args.connections} answered within {args.timeout:.0f} s: "
              f"{len(answered)} were; the last of them {last - first_send:.3f} s after the first send")
    else:
        print(f"burst: {counts['good']}/{args.connections} correct responses to {label}; "
              f"last answered {last - first_send:.3f} s after the first send")
    delay = re.fullmatch(r"/(?:delay|block)/(\d+)", args.path)
    if answered and delay and int(delay.group(1)) > 0:
        gap = int(delay.group(1)) / 1000 / 2
        steps = timeline.steps_of([t - first_send for t in answered], gap)
        sizes = sorted(len(s) for s in steps)
        print(f"burst: answers came in {len(steps)} step(s) of {sizes[0]} to {sizes[-1]} "
              f"(a new step after a silence of more than half the delay)")
    if counts["wrong_body"]:
        print(f"burst: {counts['wrong_body']} answered with a wrong body, {counts['others_value']} of them "
              f"with another request's delay (e.g. {counts['example']})")
    if counts["early"]:
        print(f"burst: {counts['early']} answered before their delay")
    ended = counts["failed"] - pending
    if ended:
        print(f"burst: {ended} failed (a status other than 200, or the connection ended)")


def timeline_of(records, first_send):
    """The records as timeline requests, times in seconds after the first send."""
    out = []
    for i, r in enumerate(records):
        request = timeline.Request(i, r["path"], r["sent"] - first_send)
        if r["done"] is not None and r["status"] is not None:
            request.answered_s = r["done"] - first_send
            request.latency_s = r["done"] - r["sent"]
            request.status = r["status"]
            request.ok = r["ok"]
        out.append(request)
    return out


async def main():
    args = parse_args()
    processes.raise_open_files()
    records, first_send = await send_all(args, paths_for(args))
    counts = judge(records)
    report(args, records, first_send, counts)
    if args.timeline:
        timeline.write(args.timeline, timeline_of(records, first_send))
        print(f"burst: timeline of {len(records)} requests written to {args.timeline}")
    return 0 if counts["good"] == args.connections else 1
