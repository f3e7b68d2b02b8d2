"""report -- runs cm-micro with repetitions and writes results/micro.md, and results/micro.json
beside it, from cm-micro's JSON output.

    harness/micro/report                    # build/bin/cm-micro, 10 x 0.1 s -> results/micro.md
    harness/micro/report --repetitions 5 --binary build/h-micro/bin/cm-micro --note "busy machine"
    harness/micro/report --json run.json    # convert a saved run instead (build/micro.json)
    harness/micro/report --json run.json --out /tmp/micro.md   # ... into /tmp/micro.{md,json}

It runs `cm-micro --benchmark_format=json --benchmark_repetitions=N`, which reports every
repetition and Google Benchmark's aggregates over them (cmharness.benchmarks reads them), and writes
the page around what cmharness.primitives makes of them: one table per group (ns/op: mean, median
with its 95% interval, stddev and cv, real and CPU time), which offload (thread per call or pool)
is cheaper here, the seeds' own figures beside ours. It records where the figures come from
(cmharness.provenance: the machine, the commit, the tree hash of each model's folder, the load
before and after) in the JSON. The raw output of the run, with that provenance, is kept in
build/micro.json (--save-json), so --json can convert it again later.
Debian's /usr/bin/python3, standard library only.
"""
import argparse
import dataclasses
import json
import os
import shlex
import sys

from cmharness import ROOT, benchmarks, default_bin_dir, primitives, proc, processes, provenance, \
    results


# -- the page and its JSON ----------------------------------------------------------------------

@dataclasses.dataclass
class Source:
    """Where a run of cm-micro comes from: the commands, its conditions, its provenance."""

    invoked: str  # this report's command line
    command: str  # the cm-micro command that ran
    note: str
    load_before: str
    load_after: str
    prov: dict
    prov_when: str  # when the provenance was read


def load_text(value):
    """A load average as the page shows it: from a list, or a string a run saved before."""
    if isinstance(value, (list, tuple)):
        return provenance.load_average_text(value)
    return value if isinstance(value, str) else "?"


def micro_provenance(bin_dir):
    """provenance(), with Google Benchmark's package among the machine's libraries."""
    prov = provenance.provenance(bin_dir)
    prov["machine"]["libraries"].update(
        {"benchmark": provenance.package_versions(["libbenchmark-dev"])["libbenchmark-dev"]})
    return prov


def source_of(data, args, invoked):
    """The Source of a run: what a run of this report saved in the context of cm-micro's JSON,
    else (a run saved without it) the provenance read now."""
    context = data.get("context", {})
    prov, when = context.get("cm_provenance"), "read when cm-micro ran"
    if prov is None:
        exe = context.get("executable")
        prov = micro_provenance(os.path.dirname(exe) if exe else None)
        when = "read when this file was written: the saved run carries none"
    command = context.get("cm_micro_command", f"(converted from {args.json})")
    return Source(invoked, command, args.note, load_text(context.get("load_before")),
                  load_text(context.get("load_after")), prov, when)


def machine_lines(m, context):
    """The machine (provenance.machine_markdown's list) and what Google Benchmark read of it."""
    lines = provenance.machine_markdown(m).splitlines()[2:]  # without its "# Machine" title
    libs = ", ".join(f"{k} {context[k]}" for k in ("boost", "libuv", "llhttp") if k in context)
    return lines + [
        f"- Google Benchmark read {context.get('num_cpus', '?')} CPUs at "
        f"{context.get('mhz_per_cpu', '?')} MHz; its library_build_type = "
        f"{context.get('library_build_type', '?')} (Debian's libbenchmark reports \"debug\"; "
        "that is the library's own build, not cm-micro's)",
        f"- cm-micro as compiled: {context.get('compiler', '?')}, build type "
        f"{context.get('cm_build_type', '?')}; libraries {libs or '?'}"]


def header_lines(context, source, reps, json_name):
    out = ["# Micro-benchmarks: what each model's primitives cost", "",
           "Regenerate (from the repository root, on a quiet machine):", "",
           "    make micro        # = make build && harness/micro/report", "",
           "This file came from:", "", f"    {source.invoked}", "", "which ran:", "",
           f"    {source.command}", "",
           f"- run: {context.get('date', '?')}; {reps} repetitions of each benchmark; times are "
           "ns per operation (one iteration), `real` = wall clock, `CPU` = the benchmark "
           "thread's CPU time. Mean, median, stddev and cv are Google Benchmark's aggregates over "
           "the repetitions; `[low high]` is the median's distribution-free 95% interval "
           "(cmharness.stats; it needs 6 repetitions).",
           f"- commit ({source.prov_when}): {provenance.commit_line(source.prov['commit'])}",
           f"- load average before / after the run: {source.load_before} / {source.load_after}"]
    if source.note:
        out.append(f"- conditions: {source.note}")
    out += ["- provenance (machine, commit, the tree hash of each model's folder) and every "
            f"figure with its interval: [`{json_name}`]({json_name})", ""]
    return out


def render(data, source, json_name):
    """The whole of results/micro.md."""
    context = data.get("context", {})
    stats_, errors = benchmarks.stats_of(data)
    reps = max((s.repetitions for s in stats_.values()), default=1)
    out = header_lines(context, source, reps, json_name)
    out += ["## Machine", ""] + machine_lines(source.prov["machine"], context) + [""]
    out += primitives.group_sections(stats_)
    if errors:
        out += ["## Not measured in this run", ""]
        out += [f"- `{name}`: {message}" for name, message in errors.items()] + [""]
    out += [primitives.offload_verdict(stats_, primitives.offload_comparisons(stats_)), "",
            primitives.seeds_section(stats_), ""]
    return "\n".join(out)


def record(data, source):
    """results/micro.json: the provenance, the conditions, every benchmark and comparison."""
    stats_, errors = benchmarks.stats_of(data)
    figures = {name: {"group": primitives.group_of(name), **s.to_json()}
               for name, s in stats_.items()}
    return {"tool": "harness/micro/report", "command": source.invoked,
            "cm_micro_command": source.command, "provenance": source.prov,
            "provenance_read": source.prov_when, "run_date": data.get("context", {}).get("date"),
            "load_average_before": source.load_before, "load_average_after": source.load_after,
            "note": source.note, "benchmarks": figures, "errors": errors,
            "offload": primitives.offload_comparisons(stats_),
            "core_parse": primitives.core_comparisons(stats_)}


# -- main ---------------------------------------------------------------------------------------

def run_cm_micro(args):
    """Runs cm-micro; its JSON, its context extended with the command, the load before and after
    and the provenance, saved to --save-json."""
    cmd = [args.binary, "--benchmark_format=json", f"--benchmark_repetitions={args.repetitions}",
           f"--benchmark_min_time={args.min_time}"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    prov = micro_provenance(os.path.dirname(os.path.abspath(args.binary)))
    data = benchmarks.run(cmd, "report")
    data.setdefault("context", {}).update(
        {"cm_micro_command": processes.shown(cmd), "load_before": prov["load_average"],
         "load_after": list(proc.load_average()), "cm_provenance": prov})
    if args.save_json:
        os.makedirs(os.path.dirname(os.path.abspath(args.save_json)), exist_ok=True)
        with open(args.save_json, "w") as f:
            json.dump(data, f, indent=1)
    return data


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(default_bin_dir(), "cm-micro"))
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--min-time", type=float, default=0.1,
                        help="--benchmark_min_time per repetition, in seconds of the benchmark's "
                             "own clock (default 0.1: Google Benchmark's 0.5 makes a "
                             "10-repetition run take about 8 minutes here, the blocking rows "
                             "counting CPU time)")
    parser.add_argument("--filter", default=None,
                        help="--benchmark_filter (default: every benchmark)")
    parser.add_argument("--json", help="convert this saved output instead of running cm-micro")
    parser.add_argument("--save-json", default=os.path.join(ROOT, "build", "micro.json"),
                        help="where the raw JSON of the run is kept (default: build/micro.json)")
    parser.add_argument("--note", default="", help="conditions of the run, printed in the file")
    parser.add_argument("--out", default=os.path.join(ROOT, "results", "micro.md"),
                        help="the Markdown; the JSON goes beside it (results/micro.json)")
    return parser.parse_args(argv)


def main():
    args = parse_args()
    processes.install_signal_handlers()
    if args.json:
        with open(args.json) as f:
            data = json.load(f)
    else:
        data = run_cm_micro(args)
    source = source_of(data, args, shlex.join(["harness/micro/report"] + sys.argv[1:]))
    json_name = os.path.basename(results.json_beside(args.out))
    path = results.write_page(args.out, render(data, source, json_name), record(data, source))
    print(f"report: wrote {args.out} and {path}", file=sys.stderr)
