#!/usr/bin/python3
"""growth.py -- how many times one operation's cost grows from 1,000 to 100,000 timers pending.

    build/bin/cm-micro --benchmark_filter='BM_(uv|wheel)_timers_arm_cancel' --benchmark_format=csv \\
        | docs/exercises/tools/growth.py

For exercise 14 (docs/exercises/14-where-the-timers-live.md): reads Google Benchmark's CSV on its
standard input and prints, for each benchmark run at both pending:1000 and pending:100000, its CPU
time at each and the ratio of the two:

    BM_uv_timers_arm_cancel grows 1.62 times (57.6 ns at 1,000 pending, 93.6 ns at 100,000)

A benchmark that reported an error is named, with its error, instead. Standard library only.
"""
import csv
import re
import sys

NAME = re.compile(r"^(?P<base>[^/]+)/pending:(?P<n>\d+)$")


def main():
    cpu, errors = {}, {}
    for row in csv.DictReader(line for line in sys.stdin if not line.startswith("#")):
        m = NAME.match(row.get("name", ""))
        if not m:
            continue
        if row.get("error_occurred") == "true":
            errors[m["base"]] = row.get("error_message", "")
            continue
        cpu[(m["base"], int(m["n"]))] = float(row["cpu_time"])
    bases = sorted({base for base, _ in cpu} | set(errors))
    if not bases:
        sys.exit("growth.py: no BM_*/pending:N lines in the input (cm-micro --benchmark_format=csv)")
    for base in bases:
        if base in errors:
            print(f"{base}: not measured: {errors[base]}")
        elif (base, 1000) in cpu and (base, 100000) in cpu:
            low, high = cpu[(base, 1000)], cpu[(base, 100000)]
            print(f"{base} grows {high / low:.2f} times ({low:,.1f} ns at 1,000 pending, "
                  f"{high:,.1f} ns at 100,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
