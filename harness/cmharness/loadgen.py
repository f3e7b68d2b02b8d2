"""cm-load beside a load generator nobody here wrote, on one running server: what
harness/cross-check (wrk) and harness/tsung-check (tsung) share. Each client runs in turn, pinned
to the CPUs the server is not on, in rounds whose order is reversed every other round (so each
runs right before the other in one round and right after it in the next); they are compared by
ratios taken within a round, because the machine's speed drifts between rounds, not within one.
loadgen_report writes what they measured into results/loadgen.md.
"""
import os
import shlex
import sys

from . import load, processes
from .rounds import order


def in_rounds(clients, rounds, run_one, progress):
    """{client: [its run of each round]}: every client once a round by run_one(client), in the
    order "alternate" (cmharness.rounds); progress(client, round from 1, run) after each run."""
    found = {client: [] for client in clients}
    for i in range(rounds):
        for client in order(clients, i, rounds, "alternate"):
            run = run_one(client)
            found[client].append(run)
            progress(client, i + 1, run)
    return found


def run_cm_load(argv, json_path, cpus, timeout, check=True):
    """Runs argv -- cm-load writing its JSON to json_path, or a command around it (strace) --
    pinned to `cpus`: (its load.LoadResult, the processes.Finished). An earlier run's JSON is
    removed first, so that a run which wrote none is not read as this one."""
    if os.path.exists(json_path):
        os.remove(json_path)
    done = processes.run(argv, cpus, timeout=timeout, check=check)
    return load.LoadResult.read(json_path), done


def shown(argv, port, json_path):
    """A client's command as the page shows it: the repository's paths relative, its JSON
    out.json, the server's port PORT (the reader's run will have its own)."""
    return processes.shown(argv, replace=((json_path, "out.json"),
                                          (f"127.0.0.1:{port}", "127.0.0.1:PORT")))


def invocation(tool):
    """The command that ran this tool, as a page's "Regenerate" shows it: "harness/TOOL ARGS"."""
    return shlex.join([f"harness/{tool}", *sys.argv[1:]])
