"""trace-scene -- one small scene on every model, traced from inside the server, drawn as swimlanes.

    /usr/bin/python3 harness/trace-scene                      # every built model -> results/traces
    /usr/bin/python3 harness/trace-scene --models blocking,asio_coro --out /tmp/traces

The scene: six connections opened together, three asking /delay/100, one /block/100, one
/cpu/2000 and one /plaintext, each answer checked. Each model runs as cm-server --trace FILE (the
blocking model with its 64 workers, an async model with one loop), and is stopped with SIGTERM,
which writes the trace. Into --out it writes, for each model:

    MODEL.json  the trace itself: open it in https://ui.perfetto.dev or chrome://tracing
    MODEL.png   the swimlanes: a lane per thread that did something, a lane per wait that held none
    MODEL.md    per request: its plan, how long it took, where it waited, on which thread

and over them all README.md (each model's files and check) and README.json (the command, its
provenance from cmharness.provenance, and the checks: all README.md is written from). It checks
what the scene is there to show: in the blocking model the three waits hold three
threads; in an async model none (they wait on timers) and the loop is one thread. It exits 1 if
a model shows otherwise. Run it with nothing else loading the machine: the times are real.
"""
import argparse
import os
import shlex
import socket
import sys
import time

from cmharness import ROOT, provenance, results, servers, swimlane

SCENE = ("/delay/100", "/delay/100", "/delay/100", "/block/100", "/cpu/2000", "/plaintext")


def run_scene(port):
    """Opens a connection per request, sends them all, then reads every answer; the statuses."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in SCENE]
    for s, path in zip(socks, SCENE):
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: scene\r\n\r\n".encode())
    statuses = []
    for s in socks:
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        statuses.append(int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0)
        s.close()
    return statuses


def what_to_read(s):
    """The first thing a student should see in this model's swimlanes, from the scene itself."""
    waits = [r for r in s.requests if r.plan.startswith("wait ")]
    held = sorted({t for r in waits for t in r.threads})
    if held:
        return f"the {len(waits)} /delay waits hold {len(held)} threads, one each"
    loops = [t for t, role in s.roles.items() if role == "loop"]
    block = next((r for r in s.requests if r.plan.startswith("block ")), None)
    where_block = f"; /block ran on {', '.join(block.threads)}" if block and block.threads else ""
    return (f"the {len(waits)} /delay waits hold no thread: {', '.join(loops)} serves all six"
            f"{where_block}")


def counts(s):
    """"the /delay waits held 0 thread(s); 2 thread(s) did something: 1 loop, 1 pool"."""
    waits = [r for r in s.requests if r.plan.startswith("wait ")]
    held = {t for r in waits for t in r.threads}
    roles = sorted(set(s.roles.values()), key=["worker", "loop", "pool"].index)
    per_role = ", ".join(f"{list(s.roles.values()).count(role)} {role}" for role in roles)
    return (f"the {len(waits)} /delay waits held {len(held)} thread(s); "
            f"{len(s.roles)} thread(s) did something: {per_role}")


def check(s):
    """What the scene must show, or why it does not."""
    waits = [r for r in s.requests if r.plan.startswith("wait ")]
    held = {t for r in waits for t in r.threads}
    if len(waits) != 3:
        return f"{len(waits)} /delay requests traced, not 3"
    if s.model == "blocking":
        return "" if len(held) == 3 else f"the waits held {len(held)} threads, not 3"
    loops = [t for t, role in s.roles.items() if role == "loop"]
    if held:
        return f"the waits held threads: {sorted(held)}"
    return "" if len(loops) == 1 else f"{len(loops)} threads accepted, not one loop"


def trace_model(model, out, bin_dir):
    path = os.path.join(out, f"{model}.json")
    threads = None if model == "blocking" else 1
    with servers.Server(model, threads=threads, args=["--trace", path], bin_dir=bin_dir) as server:
        time.sleep(0.2)  # threads started
        statuses = run_scene(server.port)
        ended = server.stop()
    if statuses != [200] * len(SCENE):
        return f"answers {statuses}"
    if ended != "exit 0":
        return f"cm-server ended with {ended}"
    s = swimlane.scene(swimlane.load(path), model)
    headline = what_to_read(s)
    with open(os.path.join(out, f"{model}.md"), "w") as f:
        f.write(swimlane.summary(s) + f"\nread first: {headline}\n")
    swimlane.draw(s, os.path.join(out, f"{model}.png"), headline)
    print(f"{model}: {counts(s)}\n{model}: read first: {headline}")
    return check(s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated (default: every model cm-server has)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "traces"))
    ap.add_argument("--bin-dir", help="where cm-server is (default: the build tree's)")
    args = ap.parse_args(argv)
    models = args.models.split(",") if args.models else servers.built_models(args.bin_dir)
    os.makedirs(args.out, exist_ok=True)
    doc = {"tool": "harness/trace-scene",
           "command": shlex.join(["harness/trace-scene", *(sys.argv[1:] if argv is None else argv)]),
           "provenance": provenance.provenance(args.bin_dir), "scene": list(SCENE), "checks": {}}
    for model in models:
        problem = trace_model(model, args.out, args.bin_dir)
        if problem:
            print(f"{model}: FAILED: {problem}", file=sys.stderr)
        doc["checks"][model] = problem
    results.write_page(os.path.join(args.out, "README.md"), index(doc), doc)
    return 1 if any(doc["checks"].values()) else 0


def index(doc):
    """README.md of the folder, from README.json: what each file is, the command and commit that
    wrote them, and each model's check ("" when it showed what it should)."""
    prov = doc["provenance"]
    rows = [f"| {m} | [{m}.png]({m}.png) | [{m}.md]({m}.md) | [{m}.json]({m}.json) | "
            f"{'FAILED: ' + problem if problem else 'as expected'} |"
            for m, problem in doc["checks"].items()]
    return ("# One scene, traced inside every model\n\n"
            f"Written by `{doc['command']}` on {prov['recorded_utc']} at commit "
            f"{provenance.commit_line(prov['commit'])}: six connections opened together -- three "
            "`/delay/100`, one `/block/100`, one `/cpu/2000`, one `/plaintext` -- against each "
            "model run as `cm-server --trace` (the blocking model with 64 workers, an async model "
            "with one loop). Open a model's `.json` at <https://ui.perfetto.dev>; the page that "
            "reads them is [docs/one-request.md](../../docs/one-request.md). The command, the "
            "provenance (machine, commit, the tree hash of each model's folder) and each check: "
            "[`README.json`](README.json).\n\n"
            "| model | swimlanes | per request | trace | the scene's check |\n"
            "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")
