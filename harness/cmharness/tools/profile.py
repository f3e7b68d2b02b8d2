"""profile -- where each server's CPU goes on /plaintext: the functions `perf record` samples in
the server while cm-load keeps it busy from the other CPU (issue 39).

    /usr/bin/python3 harness/profile                             # every model and nginx, 6 windows
    /usr/bin/python3 harness/profile --servers asio_coro_uring,uring_coro --windows 12
    /usr/bin/python3 harness/profile --out /tmp/profile

Each window runs on a freshly started server (cmharness.servers, one loop or 64 workers) pinned to
CPU 0: cm-load on CPU 1 holds 128 connections on /plaintext for --warmup + --duration seconds, and
`perf record -F 499 -p PID` samples the server (every thread) over the middle of the window.
`perf report --no-children --sort symbol` gives each function's share of the server's samples,
kernel ([k]) or user space ([.]). The servers take turns, window by window. The page lists each
server's rps (the median of its windows, least and greatest) and its functions by their median
share: what a change to a model must remove to cost less than nginx per request.

perf samples the server's CPU clock (no hardware counters in a VM) and slows what it samples a
little: compare shares, not rps, with other results. Needs `perf` (Debian's linux-perf) and
permission to attach to the server (root, or kernel.perf_event_paranoid <= 1). Writes
--out (results/profile/): profile.md, profile.json (with provenance), machine.md, machine.json.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from cmharness import ROOT, default_bin_dir, load, processes, provenance, results
from cmharness.servers import Server, built_models, peer_program

#: `perf report --stdio` lines: "    25.80%  [k] native_queued_spin_lock_slowpath"
#: (perf 6.1 adds two columns of "-", its IPC, where there are no hardware counters)
LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+\[([k.])\]\s+(.+?)(?:\s+-)*\s*$")
TOP = 12  # functions per server on the page


def say(text):
    print(f"profile: {text}", file=sys.stderr)


def parse_report(text):
    """{function: (share of the samples, "kernel" or "user")} from `perf report --stdio` (the
    symbol sort, no call graphs); a function perf could not name keeps its address."""
    shares = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            name = m.group(3)
            where = "kernel" if m.group(2) == "k" else "user"
            share, _ = shares.get(name, (0.0, where))
            shares[name] = (share + float(m.group(1)) / 100, where)
    return shares


def summarize(windows):
    """A server's windows, as its page row reads them: rps (median, least, greatest), the kernel's
    share, and each function's median share over the windows (0 in a window that did not sample
    it), the largest first."""
    rps = [w["rps"] for w in windows]
    names = {name for w in windows for name in w["functions"]}
    functions = []
    for name in names:
        shares = [w["functions"].get(name, (0.0, ""))[0] for w in windows]
        where = next(w["functions"][name][1] for w in windows if name in w["functions"])
        functions.append({"name": name, "where": where, "median": statistics.median(shares),
                          "least": min(shares), "greatest": max(shares)})
    functions.sort(key=lambda f: (-f["median"], f["name"]))
    kernel = [sum(s for s, where in w["functions"].values() if where == "kernel") for w in windows]
    each = [{"rps": w["rps"], "kernel": k,  # each window's own, to read a bimodal server by
             "top": dict(sorted(((n, s) for n, (s, _) in w["functions"].items()),
                                key=lambda item: -item[1])[:TOP])}
            for w, k in zip(windows, kernel)]
    return {"rps": {"median": statistics.median(rps), "least": min(rps), "greatest": max(rps)},
            "kernel": statistics.median(kernel), "functions": functions, "windows": len(windows),
            "each": each}


def one_window(name, args, scratch, tag):
    """One window on a fresh server: (rps, {function: (share, where)}), or raises RuntimeError."""
    with Server(name, cpus=[0], threads=1 if name != "blocking" else None,
                bin_dir=args.bin_dir, workdir=scratch, settle_s=0.3) as server:
        json_path = os.path.join(scratch, tag + ".json")
        argv = load.command(server.url("/plaintext"), connections=128, duration_s=args.duration,
                            warmup_s=args.warmup, json_path=json_path, bin_dir=args.bin_dir)
        client = processes.start(argv, [1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        data = os.path.join(scratch, tag + ".data")
        time.sleep(args.warmup + 0.2 * args.duration)
        processes.run(["perf", "record", "-q", "-F", "499", "-p", ",".join(map(str, server.pids())),
                       "-o", data,
                       "--", "sleep", f"{0.6 * args.duration:g}"], [1], timeout=60)
        if client.wait(timeout=args.duration + 60) != 0:
            raise RuntimeError(f"cm-load {processes.describe(client.returncode)}")
    report = processes.run(["perf", "report", "-i", data, "--no-children", "--sort", "symbol",
                            "--stdio", "-g", "none", "--percent-limit", "0.1"], [1], timeout=120)
    return load.LoadResult.read(json_path).rps, parse_report(report.stdout)


def measure(args, servers, scratch):
    """{server: [window]}: --windows windows each, the servers taking turns."""
    found = {s: [] for s in servers}
    for k in range(args.windows):
        for name in servers:
            try:
                rps, functions = one_window(name, args, scratch, f"{name}-{k}")
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
                say(f"{name} window {k + 1}: {e}")
                continue
            found[name].append({"rps": rps, "functions": functions})
            say(f"{name} window {k + 1}/{args.windows}: {rps:,.0f} rps")
    return found


def markdown(doc):
    out = ["# Where the CPU goes: /plaintext x 128, `perf` on the server\n",
           f"Each server on CPU 0, freshly started for each of its {doc['windows']} windows, cm-load "
           "on CPU 1 with 128 connections; `perf record -F 499` sampled the server over the middle "
           "of each window. A share is the median over the windows of a function's part of the "
           "server's samples (least-greatest beside it); kernel functions are marked [k]. perf "
           "slows what it samples: read the shares, not the rps, beside other results. "
           "`pvm_irq_enable` is this virtual machine's call to its hypervisor to enable interrupts "
           "again, a cost of the machine every server pays. Each window's own rps and largest "
           f"functions are in profile.json. Written by `{doc['command']}`.\n"]
    for name, s in doc["servers"].items():
        r = s["rps"]
        out.append(f"## {name}\n\n{r['median']:,.0f} rps ({r['least']:,.0f}-{r['greatest']:,.0f}) "
                   f"in {s['windows']} windows; the kernel {s['kernel']:.0%} of its samples.\n")
        out.append("| function | share | least-greatest |\n| --- | --: | --: |")
        for f in s["functions"][:TOP]:
            mark = " [k]" if f["where"] == "kernel" else ""
            out.append(f"| `{f['name']}`{mark} | {f['median']:.1%} | "
                       f"{f['least']:.1%}-{f['greatest']:.1%} |")
        out.append("")
    out.append(f"Measured {doc['meta']['started_utc']} to {doc['meta']['finished_utc']}; the "
               "machine: [machine.md](machine.md).\n")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="profile", description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="", help="comma-separated (default: every model built, "
                    "and nginx where it is installed)")
    ap.add_argument("--windows", type=int, default=6)
    ap.add_argument("--duration", type=float, default=2.0, help="cm-load's measured seconds")
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--bin-dir", default=default_bin_dir())
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "profile"))
    args = ap.parse_args(argv)
    if shutil.which("perf") is None:
        say("no perf here: apt install linux-perf")
        return 2
    servers = [s for s in args.servers.split(",") if s] or (
        built_models(args.bin_dir) + (["nginx"] if peer_program("nginx") else []))
    processes.install_signal_handlers()
    scratch = tempfile.mkdtemp(prefix="cm-profile.")
    meta = {"started_utc": provenance.utc_now(), "provenance": provenance.provenance(args.bin_dir)}
    try:
        found = measure(args, servers, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    meta["finished_utc"] = provenance.utc_now()
    doc = {"meta": meta, "windows": args.windows,
           "command": " ".join(["harness/profile", *(argv if argv is not None else sys.argv[1:])]),
           "servers": {s: summarize(w) for s, w in found.items() if w}}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "profile.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(args.out, "profile.md"), "w") as f:
        f.write(markdown(doc))
    results.write_machine(args.out, provenance.machine(args.bin_dir))
    say(f"wrote {args.out}/profile.md")
    return 0 if len(doc["servers"]) == len(servers) else 1
