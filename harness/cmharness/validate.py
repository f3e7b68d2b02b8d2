"""The checks a server passes before it is timed, after HttpArena's validation: 32 overlapping
requests with 32 different delays, each answered with its own value and never early; /delay/0
answered at once with 0; Content-Type text/plain. A server that fails is not priced.
"""

import dataclasses
import http.client
import random
import threading
import time


@dataclasses.dataclass
class Validation:
    ok: bool = True
    failure: str = ""  # why it was refused ("/delay/37 answered 41", ...)
    passed: list = dataclasses.field(default_factory=list)  # what was checked, in words


def exchange(port, path, timeout=30.0, connection=None):
    """(status, content_type, body, latency_ms) of one GET, on `connection` or a new one; raises
    OSError / http.client.HTTPException on failure."""
    c = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if connection is None:
            c.connect()
        sent = time.monotonic()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        return r.status, r.getheader("Content-Type", ""), body, (time.monotonic() - sent) * 1000
    finally:
        c.close()


def check(path, response, body, min_ms, content_type_expected="text/plain"):
    """What is wrong with a response that should be 200 `body`, text/plain (or
    content_type_expected), no sooner than min_ms ("" when nothing is)."""
    if isinstance(response, Exception):
        return f"{path}: {type(response).__name__}: {response}"
    status, content_type, got, latency_ms = response
    if status != 200:
        return f"{path}: status {status}, expected 200"
    if got != body:
        return f'{path}: body "{got[:40]}", expected "{body}"'
    if content_type.split(";")[0].strip().lower() != content_type_expected:
        return f'{path}: Content-Type "{content_type}", expected {content_type_expected}'
    if latency_ms < min_ms:
        return f"{path}: answered after {latency_ms:.2f} ms, before its delay of {min_ms:.0f} ms"
    return ""


def _get(port, path):
    try:
        return exchange(port, path)
    except (OSError, http.client.HTTPException) as e:
        return e


def overlapping(port, prefix, n=32, lo=10, hi=250, rng=random):
    """n requests to prefix + N, all N different, connected first and sent at the same moment."""
    values = rng.sample(range(lo, hi + 1), n)
    conns, responses = [], [None] * n
    try:
        for _ in range(n):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.connect()
            conns.append(c)
    except OSError as e:
        for c in conns:
            c.close()
        return f"{prefix}{{ms}}: connect: {e}"
    go = threading.Barrier(n)

    def one(i):
        go.wait()
        try:
            responses[i] = exchange(port, f"{prefix}{values[i]}", connection=conns[i])
        except (OSError, http.client.HTTPException) as e:
            responses[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v, r in zip(values, responses):
        why = check(f"{prefix}{v}", r, str(v), v)
        if why:
            return f"{why} (one of {n} overlapping requests with different delays)"
    return ""


def echo(port, body, timeout=30.0):
    """What is wrong with POST /echo of `body` ("" when it came back whole, 200,
    application/octet-stream)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/echo", body=body.encode())
        r = c.getresponse()
        got = r.read().decode(errors="replace")
        content_type = r.getheader("Content-Type", "")
    except (OSError, http.client.HTTPException) as e:
        return f"POST /echo: {type(e).__name__}: {e}"
    finally:
        c.close()
    if r.status != 200:
        return f"POST /echo: status {r.status}, expected 200"
    if got != body:
        return f'POST /echo: body "{got[:40]}", expected the {len(body)} bytes sent'
    if content_type.split(";")[0].strip().lower() != "application/octet-stream":
        return f'POST /echo: Content-Type "{content_type}", expected application/octet-stream'
    return ""


def db_row_body(path):
    """The body /db/row/N answers: World's row N as JSON (cmharness.database.world_number)."""
    from .database import world_number

    row_id = int(path.rsplit("/", 1)[1])
    return f'{{"id":{row_id},"randomNumber":{world_number(row_id)}}}'


def validate(port, *, plaintext=False, delay=False, block=False, cpu_us=(), echo_bodies=(),
             db_sleep=False, db_rows=()):
    """Runs the checks the rows need against 127.0.0.1:port; the first failure refuses."""
    steps = []  # (the check, run when its turn comes: "" or what is wrong; what it passed)
    if plaintext:
        steps.append((lambda: check("/plaintext", _get(port, "/plaintext"), "Hello, World!", 0),
                      '/plaintext answered 200 "Hello, World!" text/plain'))
    if delay:
        steps.append((lambda: check("/delay/0", _get(port, "/delay/0"), "0", 0)
                      or overlapping(port, "/delay/"), "/delay/0 answered 0; 32 overlapping "
                      "/delay/{ms}, all different, each answered with its own value, none early"))
    if block:
        steps.append((lambda: overlapping(port, "/block/"), "32 overlapping /block/{ms}, all "
                      "different, each answered with its own value, none early"))
    for us in cpu_us:
        steps.append((lambda us=us: check(f"/cpu/{us}", _get(port, f"/cpu/{us}"), str(us), 0),
                      f"/cpu/{us} answered {us}"))
    for body in echo_bodies:
        steps.append((lambda body=body: echo(port, body),
                      f"POST /echo of {len(body)} bytes answered them back"))
    if db_sleep:
        steps.append((lambda: overlapping(port, "/db/sleep/"), "32 overlapping /db/sleep/{ms}, "
                      "all different, each answered with the value the database returned, none "
                      "early"))
    for path in db_rows:
        steps.append((lambda path=path: check(path, _get(port, path), db_row_body(path), 0,
                                              "application/json"),
                      f"{path} answered {db_row_body(path)}"))
    v = Validation()
    for run, passed in steps:
        why = run()
        if why:
            v.ok, v.failure = False, why
            return v
        v.passed.append(passed)
    return v
