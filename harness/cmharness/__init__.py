"""cmharness -- the one measuring core every harness tool is a thin shell over.

    proc        what /proc says about a process and the machine (CPU time, RSS, threads, switches)
    processes   starting a child pinned to CPUs, stopping every child on the way out; shown()
    servers     Server: a model of cm-server, nginx, node, go-peer or tokio-peer on a port of its
                own, pinned, read
    load        LoadResult: the one reader of cm-load's JSON; run_load() runs cm-load pinned
    provenance  machine, kernel, load, commit, and the git tree hash of each model's folder
    stats       medians with distribution-free 95% intervals, paired ratios, verdicts
    rounds      the order a round takes its servers in (shuffle, rotate, alternate)
    ceilings    the ceilings a row cannot exceed, and its efficiency against the lowest
    price, latency, verify, profiles, report, latency_report
                cm-price: a profile measured in rounds, priced, verified again, and its page
    results     writing a result: JSON, CSV, Markdown, machine.md, and its charts
    charts      writing a chart: save() refuses one whose texts overlap, leave the figure or
                cover a data marker (layout_problems()); every chart writer saves through it
    profile_charts  a cm-price result's charts (sweep, bars, offload) and the README headline
    parsers     what wrk, h2load, `strace -c` and `ss -ti` print, as figures
    memory, sizing, timeline, swimlane, validate
                bytes per waiting request; a service's ceilings; a burst's timeline; a trace's
                swimlanes; the checks a server passes before it is timed
    cost_run, cost_report     harness/cost's measuring engine and its page
    loadgen     what cross-check and tsung-check share: clients in rounds, their page parts
    benchmarks, primitives    cm-micro's Google Benchmark JSON, and results/micro.md's body
    longrun     what soak and abuse share: /proc once a second, their conditions, page and CSV
    soak_report, staircase_report, slowhttptest
                soak's verdict and page; staircase's README; running and reading slowhttptest
    tools/      the tools, each a module with main(); harness/NAME runs it (nothing here imports one)

Orchestration is Python (Debian's /usr/bin/python3, standard library only; charts need its
python3-matplotlib); cm-load and cm-micro are the C++ instruments. docs/architecture.md says why.

The rules of the core, for whoever adds a tool:
- start servers only with servers.Server and children only with processes.start; read cm-load's
  JSON only through load.LoadResult; record provenance.provenance(); take every ratio, median and
  interval from stats; write every chart with charts.save(). A helper two tools need is added
  here, with a test in harness/tests/.
- a tool is a thin shell: its own parsing and its report, no function over 80 lines
  (scripts/budgets.py holds it, and a tool within 300 lines), and unit tests of what it parses
  and computes.
"""

import os

#: The repository: harness/cmharness/ is two levels below it.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Debian's interpreter, the one with python3-matplotlib (the python3 on PATH may be another).
PYTHON = "/usr/bin/python3"


def default_bin_dir():
    """Where cm-server, cm-load and cm-micro are: $CM_BIN_DIR, else build/bin of the repository."""
    return os.environ.get("CM_BIN_DIR") or os.path.join(ROOT, "build", "bin")
