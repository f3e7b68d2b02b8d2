"""timers -- what one timer costs in each model's own structure, with 1,000, 10,000 and 100,000
others pending: cm-micro's BM_*_timers_* benchmarks (harness/micro/timers.hpp), as a table and a
chart in results/timers/.

    harness/micro/timers                           # build/bin/cm-micro, 6 repetitions, CPU 1
    harness/micro/timers --repetitions 2 --out /tmp/timers      # a quick look

Two operations against N pending timers (as N requests waiting in /delay): arm one among them and
cancel it (a request whose client went away), and arm one already due and run the loop until it
fired (a wait that ends). Each figure is the CPU time per operation: the median over the
repetitions with its distribution-free 95% interval (cmharness.stats; six repetitions give one).
The run is pinned to one CPU (the last); nothing else should run meanwhile.

Writes results/timers/README.md, timers.json (cm-micro's JSON, every repetition, and the
provenance) and timers.png. Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import shlex
import sys

from cmharness import ROOT, benchmarks, charts, default_bin_dir, proc, processes, provenance, \
    results, stats

OPS = (("arm_cancel", "arm + cancel"), ("expire", "arm due + fire"))
#: cm-micro's group -> (the model it stands for, where its timers live).
STRUCTURES = {
    "asio": ("asio_coro", "io_context timer_queue: a binary heap; epoll wakes on a timerfd"),
    "asio_uring": ("asio_coro_uring", "the same heap; io_uring wakes on one IORING_OP_TIMEOUT"),
    "uv": ("libuv_callbacks", "uv_loop_t timer heap: a binary min-heap of uv_timer_t"),
    "uring": ("uring_coro", "the kernel: an hrtimer per IORING_OP_TIMEOUT"),
    "blocking": ("blocking", "a thread each, asleep in a timed futex wait (an hrtimer each)"),
    "wheel": ("--timers wheel", "cm::TimerWheel: a hashed wheel of 4,096 slots of 250 µs"),
}


def parse(data):
    """{(group, op, pending): [CPU ns of each repetition]} and {name: error} from cm-micro's JSON."""
    found, errors = benchmarks.stats_of(data)
    out = {}
    for name, s in found.items():
        head, _, arg = name.partition("/pending:")
        group, _, op = head.removeprefix("BM_").partition("_timers_")
        if s.cpu_runs:
            out[(group, op, int(arg))] = s.cpu_runs
    return out, errors


def estimates(found):
    return {key: stats.estimate(values) for key, values in found.items()}


def table(est, sizes):
    head = "| model | where its timers live | " + " | ".join(
        f"{label}, {n:,} pending" for _, label in OPS for n in sizes) + " |"
    lines = [head, "| --- | --- | " + " | ".join("---:" for _ in OPS for _ in sizes) + " |"]
    for group, (model, where) in STRUCTURES.items():
        if not any(k[0] == group for k in est):
            continue
        cells = [benchmarks.ns_estimate(est[(group, op, n)]) if (group, op, n) in est else "not run"
                 for op, _ in OPS for n in sizes]
        lines.append(f"| {model} | {where} | " + " | ".join(cells) + " |")
    return lines


def draw(est, sizes, path):
    plt = results.pyplot("timers")
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(OPS), figsize=(12, 5), squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, (op, label) in zip(axes[0], OPS):
        for k, (group, (model, _)) in enumerate(STRUCTURES.items()):
            pts = [(n, est[(group, op, n)]) for n in sizes if (group, op, n) in est]
            if not pts:
                continue
            xs, es = [n for n, _ in pts], [e for _, e in pts]
            low = [e.estimate - (e.low if e.low is not None else e.estimate) for e in es]
            high = [(e.high if e.high is not None else e.estimate) - e.estimate for e in es]
            ax.errorbar(xs, [e.estimate for e in es], yerr=[low, high], marker="osD^v"[k % 5],
                        color=colours(k), capsize=3, label=model)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"{n:,}" for n in sizes])
        ax.set_xlabel("timers pending")
        ax.set_ylabel("CPU per operation, ns (log)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="major", color="0.9")
    seen = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=len(seen), fontsize=8,
               frameon=False)
    fig.suptitle("One timer against N pending, in each model's own structure and in the wheel "
                 "(median, 95% interval)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    charts.save(fig, path)
    return True


def markdown(est, errors, sizes, meta, chart):
    prov = meta["provenance"]
    lines = ["# Timers: one timer against N pending, in each model's own structure", "",
             "Each async model keeps a waiting request's timer in a different place; the blocking "
             "model keeps a whole thread. Here cm-micro holds N timers pending an hour ahead in "
             "the model's own structure (as N requests waiting in `/delay`), then measures one "
             "more: **arm + cancel** (armed among them, then cancelled, as when a client goes "
             "away) and **arm due + fire** (armed already due, and the loop run until its handler "
             "ran, as when a wait ends). CPU time per operation, in ns: the median over "
             f"{meta['repetitions']} repetitions with its 95% interval `[low high]`.", ""]
    if chart:
        lines += ["![CPU per timer operation against the timers pending](timers.png)", ""]
    lines += table(est, sizes) + [""]
    lines += ["- What each operation includes differs with the API, as it does in the model: "
              "Asio's cancel is completed by running its aborted handler (a loop turn); libuv's "
              "`uv_timer_stop` needs none; io_uring's is an `IORING_OP_TIMEOUT_REMOVE` submitted "
              "with the timeout and both completions reaped (one `io_uring_enter`).",
              "- The blocking model's row holds a thread per pending timer (64 KB stacks): "
              "100,000 threads are more than this machine lets one user start (`ulimit -u`), so "
              "it stops at 10,000. Its figure is the CPU of one more thread's 1 µs sleep.",
              "- The wheel's row is the wheel alone, on the benchmark's own clock (it is sans "
              "I/O): its **arm due + fire** is an `advance()` to the next tick, without the loop's "
              "wake-up that the other rows include. A model with `--timers wheel` pays that wake "
              "once per tick that holds a due timer, whatever the number of timers in it; the "
              "wheel's cost grows with N because a slot also holds the far timers of later turns "
              "(N / 4,096 each), passed over at each visit.",
              "- Source: `harness/micro/*_bench.cpp` (`BM_*_timers_*`), the sizes and due times "
              "in `harness/micro/timers.hpp`."]
    if errors:
        lines += ["", "Not measured:", ""] + [f"- `{n}`: {e}" for n, e in sorted(errors.items())]
    lines += ["", *provenance.conditions_markdown(
        prov, ended_utc=meta["ended_utc"], load_after=meta["load_after"],
        pinning=f"cm-micro on CPU {meta['cpu']}", command=meta["command"]),
        f"- cm-micro: `{meta['cm_micro']}`", "- Every repetition: [`timers.json`](timers.json).", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(default_bin_dir(), "cm-micro"))
    ap.add_argument("--repetitions", type=int, default=6)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per repetition")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "timers"))
    args = ap.parse_args()
    cpu = proc.allowed_cpus()[-1]
    cmd = [args.binary, "--benchmark_filter=_timers_", "--benchmark_format=json",
           f"--benchmark_repetitions={args.repetitions}",
           f"--benchmark_min_time={args.min_time:g}"]
    prov = provenance.provenance(os.path.dirname(os.path.abspath(args.binary)))
    data = benchmarks.run(cmd, "timers", [cpu], timeout=1800)
    found, errors = parse(data)
    est = estimates(found)
    sizes = sorted({k[2] for k in found})
    meta = {"provenance": prov, "ended_utc": provenance.utc_now(),
            "load_after": list(proc.load_average()), "cpu": cpu, "repetitions": args.repetitions,
            "command": shlex.join(["harness/micro/timers"] + sys.argv[1:]),
            "cm_micro": processes.shown(cmd)}
    os.makedirs(args.out, exist_ok=True)
    chart = draw(est, sizes, os.path.join(args.out, "timers.png"))
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(markdown(est, errors, sizes, meta, chart))
    with open(os.path.join(args.out, "timers.json"), "w") as f:
        json.dump({"meta": meta, "estimates": {f"{g} {o} {n}": e.to_json()
                                               for (g, o, n), e in est.items()},
                   "errors": errors, "cm_micro": data}, f, indent=1)
        f.write("\n")
    print("\n".join(table(est, sizes)))
    return 0
