"""plot -- draws the charts of a cm-price result, next to it (or into --out).

    /usr/bin/python3 harness/plot results/delay-sweep/results.json
    /usr/bin/python3 harness/plot results/quick/results.json --out /tmp/charts

Run it with Debian's /usr/bin/python3, which has python3-matplotlib (the python3 first on PATH
may be another interpreter without it). cm-price draws the same charts after each run
(cmharness.results.chart); this draws them again from a results.json. What each chart shows, and
how: cmharness/profile_charts.py. A delay sweep's headline.md is written beside its chart, and
into the README only when the output folder is the repository's results/delay-sweep.
"""
import argparse
import json
import os

from cmharness import profile_charts, results


def main(argv=None):
    ap = argparse.ArgumentParser(description="draws the charts of a cm-price result "
                                             "(see cmharness/profile_charts.py)")
    ap.add_argument("results_json", help="results/<profile>/results.json")
    ap.add_argument("--out", help="the folder to write the charts into (default: beside the "
                                  "JSON); the README's headline is rewritten only when it is the "
                                  "repository's results/delay-sweep")
    a = ap.parse_args(argv)
    plt = results.pyplot("plot")
    if plt is None:
        return 1
    with open(a.results_json) as f:
        doc = json.load(f)
    out = os.path.abspath(a.out or os.path.dirname(os.path.abspath(a.results_json)))
    profile_charts.draw(doc, out, plt)
    return 0
