"""What the programs a tool runs beside cm-load print: wrk's and h2load's summaries, `strace -c`'s
table and `ss -ti`'s connections. Pure functions: text in, figures out.
"""

import re

_TO_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def parse_wrk(out):
    """What wrk printed: {"requests", "rps", "errors": {"non_2xx_3xx", "connect", "read", "write",
    "timeout"}, "latency_ms": {50: ms, 75: ..., 90: ..., 99: ...}} -- latency_ms holds the
    percentiles of `--latency` (empty without it). RuntimeError when wrk printed no request
    count."""
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not (m and rate):
        raise RuntimeError(f"wrk printed no request count:\n{out}")
    errors = {"non_2xx_3xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}
    status = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if status:
        errors["non_2xx_3xx"] = int(status.group(1))
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                        out)
    if sockets:
        for kind, count in zip(("connect", "read", "write", "timeout"), sockets.groups()):
            errors[kind] = int(count)
    latency = {int(p): float(v) * _TO_MS[unit] for p, v, unit in
               re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)}
    return {"requests": int(m.group(1)), "rps": float(rate.group(1)), "errors": errors,
            "latency_ms": latency}


def parse_strace(text):
    """`strace -c`'s table as ({call: calls}, {call: calls that failed}); its total line left
    out."""
    calls, errors = {}, {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0][0].isdigit() and cols[-1] != "total":
            calls[cols[-1]] = int(cols[3])
            errors[cols[-1]] = int(cols[4]) if len(cols) == 6 else 0
    return calls, errors


def parse_h2load(out):
    """What `h2load` printed: {"requests" (answers of any status), "rps", "errors": {"failed",
    "errored", "timeout", "non_2xx"}}. RuntimeError when it printed no request counts."""
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", out)
    s = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    r = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    if not (m and s and r):
        raise RuntimeError(f"h2load printed no request counts:\n{out}")
    _total, _started, done, _ok, failed, errored, timeout = map(int, m.groups())
    _s2xx, s3xx, s4xx, s5xx = map(int, s.groups())
    errors = {"failed": failed, "errored": errored, "timeout": timeout, "non_2xx": s3xx + s4xx + s5xx}
    # h2load's "done" counts answers of any status; "succeeded" the 2xx ones. The requests
    # started but unanswered when -D ends (started - done) are dropped, not errors.
    return {"requests": done, "rps": float(r.group(1)), "errors": errors}


def parse_ss(out):
    """`ss -tinH state established` as {(local, peer): bytes_acked}: each connection's line is
    followed by an indented line of its tcp_info."""
    socks, key = {}, None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            cols = line.split()
            key = (cols[-2], cols[-1])
            socks[key] = 0
        elif key is not None:
            m = re.search(r"bytes_acked:(\d+)", line)
            socks[key] = int(m.group(1)) if m else 0
    return socks
