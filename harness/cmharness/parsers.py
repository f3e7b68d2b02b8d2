"""What the programs a tool runs beside cm-load print: wrk's summary and `strace -c`'s table.
Pure functions: text in, figures out.
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
