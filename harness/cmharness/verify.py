"""cm-price verify and cm-price check: does a committed claim still hold, and does any committed
row claim more than its ceiling? (Criterion.rs's comparison with a saved baseline, for claims.)

    cm-price verify quick     rerun quick with the committed run's own settings, into a scratch
                              folder; each committed claim: holds (the intervals overlap), changed
                              (disjoint: by how much), or noise (the rerun's interval too wide to
                              tell); appends a record to results/quick/verifications.json. A
                              rerun on the code the committed run measured is a reproduction:
                              later verifications judge the claim by the range the committed run
                              and its reproductions span together, which results.md lists
                              ("Reruns of this code"). With
                              --models, only the claims of those servers (name the peer a ratio
                              is taken to: --models asio_coro,nginx)
    cm-price check [FILE...]  every results/*/results.json (or the files named): the rows whose
                              efficiency interval reaches above 100.5%, and the rounds above 105%
    cm-price compare A B      two runs' results.json: does every claim's interval overlap, and
                              does either run reverse an ordering the other claims?
    cm-price reruns [PROFILE] each results.md's "Reruns of this code" again, from its records
    cm-price render [PROFILE] each results.md again, from its results.json and records
"""

import glob
import json
import os
import sys
import tempfile

from . import ROOT, profiles, provenance, stats


def same_code(trees, other, servers):
    """Two runs measured the same code for these servers: every folder they depend on holds the
    same code in both (provenance.folders_of, a peer depends on none; provenance.same_code)."""
    folders = sorted({f for s in servers for f in provenance.folders_of(s)})
    return provenance.same_code(trees, other, folders)


def reproductions(committed_doc, records):
    """{claim id: [Estimate]}: each claim as earlier verifications measured it again on the code
    the committed run measured (same results file, same trees for the claim's servers)."""
    meta = committed_doc["meta"]
    trees = meta.get("provenance", {}).get("trees", {})
    out = {}
    for r in records:
        if r.get("results_started_utc") != meta["started_utc"]:
            continue
        again = r.get("provenance", {}).get("trees", {})
        for c in r.get("claims", []):
            if c.get("rerun") and same_code(trees, again, c["servers"]):
                out.setdefault(c["id"], []).append(stats.Estimate.from_json(c["rerun"]))
    return out


def compare_claims(committed, rerun, reproduced=None):
    """[{id, servers, committed, range, rerun, verdict, change}] for every committed claim; a claim
    the rerun did not make is "missing". A claim that runs of its own code have measured again
    (reproduced: {id: [Estimate]}) is judged by the range they span together (stats.hull): rounds
    inside one run share the minutes they ran in, and two runs of the same code can disagree."""
    fresh = {c["id"]: c for c in rerun}
    reproduced = reproduced or {}
    out = []
    for c in committed:
        was = stats.Estimate.from_json(c["estimate"])
        span = stats.hull([was, *reproduced.get(c["id"], [])])
        entry = {"id": c["id"], "servers": c["servers"], "label": c.get("label"),
                 "row": c.get("row"), "committed": c["estimate"],
                 "range": span.to_json() if span is not was else None}
        r = fresh.get(c["id"])
        if r is None:
            out.append(dict(entry, rerun=None, verdict="missing", change=None))
            continue
        verdict, change = stats.verdict(span, stats.Estimate.from_json(r["estimate"]))
        out.append(dict(entry, rerun=r["estimate"], verdict=verdict, change=change))
    return out


RERUNS_BEGIN = "<!-- reruns: written by cm-price verify -->"
RERUNS_END = "<!-- /reruns -->"


def reruns_markdown(committed_doc, records):
    """A results page's section on the claims that reruns of its own code measured again: the
    run's interval, each rerun's estimate, and the range they span (by which a verification of
    changed code is judged). Empty when no rerun of this code exists."""
    again = reproductions(committed_doc, records)
    rows = []
    for c in committed_doc["claims"]:
        runs = again.get(c["id"])
        if not runs:
            continue
        was = stats.Estimate.from_json(c["estimate"])
        span = stats.hull([was, *runs])
        estimates = ", ".join(f"{r.estimate:.3f}" for r in runs)
        rows.append(f"| {c['id']} | {was.format('{:.3f}')} | {len(runs)}: {estimates} | "
                    f"[{span.low:.3f} {span.high:.3f}] |")
    if not rows:
        return ""
    return "\n".join([
        RERUNS_BEGIN, "", "## Reruns of this code", "",
        "`cm-price verify` on the code this run measured (the same tree hashes) measures each "
        "claim again. The rounds of one run share the machine's state of those minutes; the "
        "range below spans every run of this code, and a verification of changed code is judged "
        "by it ([results/README.md](../README.md#claims-that-hold-and-figures-that-stay-current)).",
        "", "| claim | this run | reruns: estimates | range of the runs |", "|---|--:|---|--:|",
        *rows, "", RERUNS_END])


def write_reruns(folder, committed_doc, records):
    """Puts reruns_markdown() at the end of folder/results.md, in place of the last one."""
    path = os.path.join(folder, "results.md")
    if not os.path.exists(path):
        return
    with open(path) as f:
        text = f.read()
    if RERUNS_BEGIN in text:
        end = text.index(RERUNS_END, text.index(RERUNS_BEGIN)) + len(RERUNS_END)
        text = text[:text.index(RERUNS_BEGIN)].rstrip("\n") + text[end:]
    block = reruns_markdown(committed_doc, records)
    text = text.rstrip("\n") + ("\n\n" + block if block else "") + "\n"
    with open(path, "w") as f:
        f.write(text)


def record(committed_doc, rerun_doc, compared):
    return {"recorded_utc": provenance.utc_now(),
            "results_started_utc": committed_doc["meta"]["started_utc"],
            "rerun_started_utc": rerun_doc["meta"]["started_utc"],
            "provenance": rerun_doc["meta"]["provenance"], "claims": compared}


def read_records(folder):
    path = os.path.join(folder, "verifications.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def append_record(folder, rec):
    path = os.path.join(folder, "verifications.json")
    records = read_records(folder)
    records.append(rec)
    with open(path, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    return path


def table(compared):
    lines = ["| claim | committed | rerun | verdict |", "|---|--:|--:|---|"]
    for c in compared:
        fmt = "{:.3f}"
        was = stats.Estimate.from_json(c["committed"]).format(fmt)
        if c.get("range"):
            span = stats.Estimate.from_json(c["range"])
            was += f", runs of the measured code: [{fmt.format(span.low)} {fmt.format(span.high)}]"
        now = stats.Estimate.from_json(c["rerun"]).format(fmt) if c["rerun"] else "-"
        change = f" ({c['change']:+.1%})" if c["change"] is not None and \
            c["verdict"] == "changed" else ""
        lines.append(f"| {c['id']} | {was} | {now} | {c['verdict']}{change} |")
    return "\n".join(lines)


def verify(argv, run_profile, profile_from_settings, parse_args):
    args = parse_args(argv)
    if profiles.load(args.profile).kind == "latency":
        print("cm-price verify: the latency profile makes no claims to verify (its figures are "
              "curves, not efficiencies): run `build/bin/cm-price latency` again", file=sys.stderr)
        return 2
    name = profiles.load(args.profile).name
    folder = os.path.join(args.out or os.path.join(ROOT, "results"), name)
    with open(os.path.join(folder, "results.json")) as f:
        committed = json.load(f)
    if committed.get("schema", 1) < 2:
        print(f"cm-price verify: {folder}/results.json predates claims with intervals (schema 1): "
              f"rerun `build/bin/cm-price {name}` first", file=sys.stderr)
        return 2
    p = profile_from_settings(committed["meta"]["profile_settings"])
    # More rounds for a row the planned ones leave undecided only narrow the rerun's interval:
    # the committed run's settings otherwise, so the rerun measures what it measured.
    p.max_rounds = args.max_rounds or max(p.max_rounds, profiles.load(args.profile).max_rounds)
    args.no_charts = True
    with tempfile.TemporaryDirectory(prefix="cm-price-verify.") as scratch:
        rerun, _, failed = run_profile(p, args, scratch)
    ran = {t["name"] for t in rerun["targets"] if t["priced"]}
    # With --models, the claims of the servers left out are not this verification's to judge.
    claims = [c for c in committed["claims"] if not args.models or set(c["servers"]) <= ran]
    compared = compare_claims(claims, rerun["claims"],
                              reproductions(committed, read_records(folder)))
    path = append_record(folder, record(committed, rerun, compared))
    render_folder(folder)  # the claims a rerun did not reproduce are marked in its table
    print("\n" + table(compared) + "\n")
    counts = {}
    for c in compared:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    print(", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + f"; record: {path}")
    return 0 if not failed and set(counts) == {"holds"} else 1


def _old_format_efficiencies(doc):
    """Schema 1 (before intervals): each row's efficiency over its rounds."""
    for t in doc.get("targets", []):
        for r in t.get("rows", []):
            effs = [m.get("efficiency") for m in r.get("rounds", []) if not m.get("error")]
            est = stats.estimate(effs)
            if est:
                variant = r.get("variant", "-")
                label = r.get("server", "?") + ("" if variant in ("-", "standard")
                                                else f" ({variant})")
                yield f"{label} {r.get('path')} x {r.get('connections_requested')}", est


def above(doc):
    """(claim id, Estimate) of every efficiency above its ceiling in a results document."""
    if doc.get("schema", 1) >= 2:
        return [(c["id"], stats.Estimate.from_json(c["estimate"])) for c in doc["claims"]
                if c["kind"] == "efficiency" and
                stats.above_ceiling(stats.Estimate.from_json(c["estimate"]))]
    return [(i, e) for i, e in _old_format_efficiencies(doc) if stats.above_ceiling(e)]


#: A round past its ceiling by more than this is a defect the bracketing windows should have
#: caught (cmharness.price): `cm-price check` fails on one in a committed file.
ROUND_LIMIT = 1.05


def rounds_above(doc, limit=ROUND_LIMIT):
    """(server, row key, round number, efficiency) of every round priced above `limit` of its
    ceiling in a results document, defect or not."""
    out = []
    for t in doc.get("targets", []):
        for r in t.get("rows", []):
            for k, m in enumerate(r.get("rounds", [])):
                eff = (m or {}).get("efficiency")
                if eff is not None and not m.get("error") and eff > limit:
                    out.append((t.get("label", t.get("name", "?")), r.get("key", "?"), k, eff))
    return out


def check(argv):
    """No committed efficiency interval reaches above its ceiling (stats.above_ceiling) and no
    round lies above ROUND_LIMIT of it; exit 1 naming each that does."""
    files = argv or sorted(glob.glob(os.path.join(ROOT, "results", "*", "results.json")))
    bad = 0
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        found = above(doc)
        rounds = rounds_above(doc)
        bad += len(found) + len(rounds)
        rel = os.path.relpath(path, ROOT)
        print(f"{rel}: " + ("no efficiency above its ceiling" if not found else
                            f"{len(found)} above their ceiling")
              + ("" if not rounds else f"; {len(rounds)} rounds above {ROUND_LIMIT:.0%} of it"))
        for cid, est in found:
            print(f"  {cid}: {est.format('{:.3f}')}")
        for label, key, k, eff in rounds:
            print(f"  {label} {key} round {k + 1}: {eff:.3f}")
    return 1 if bad else 0


def orderings(claims):
    """{(column, a, b)} for every pair of claims of one column whose intervals are disjoint, a's
    above b's (a column: the same row, kind and reference)."""
    out = set()
    for a in claims:
        for b in claims:
            col = (a["row"], a["kind"], a["reference"])
            if a is b or col != (b["row"], b["kind"], b["reference"]):
                continue
            est_a = stats.Estimate.from_json(a["estimate"])
            if est_a.above(stats.Estimate.from_json(b["estimate"])):
                out.add((col, a["label"], b["label"]))
    return out


def agreement(first, second):
    """Two runs of one profile: (lines, ok). ok when every claim's intervals overlap and no
    ordering one run claims is reversed by the other."""
    by_id = {c["id"]: c for c in second}
    lines, ok = [], True
    for c in first:
        other = by_id.get(c["id"])
        a = stats.Estimate.from_json(c["estimate"])
        b = stats.Estimate.from_json(other["estimate"]) if other else None
        overlap = b is not None and a.overlaps(b)
        ok &= overlap
        lines.append(f"| {c['id']} | {a.format('{:.3f}')} | "
                     f"{b.format('{:.3f}') if b else '-'} | {'yes' if overlap else 'NO'} |")
    one, two = orderings(first), orderings(second)
    reversed_ = sorted((col, x, y) for col, x, y in one if (col, y, x) in two)
    ok &= not reversed_
    lines.append("")
    lines.append(f"orderings: {len(one)} in the first run, {len(two)} in the second, "
                 f"{len(one & two)} in both, {len(reversed_)} reversed")
    lines += [f"  reversed: {x} > {y} ({col[0]} {col[1]})" for col, x, y in reversed_]
    return lines, ok


def compare_runs(argv):
    if len(argv) != 2:
        print("usage: cm-price compare RESULTS_A.json RESULTS_B.json", file=sys.stderr)
        return 2
    docs = []
    for path in argv:
        with open(path) as f:
            docs.append(json.load(f))
    lines, ok = agreement(docs[0]["claims"], docs[1]["claims"])
    print("| claim | first run | second run | intervals overlap |\n|---|--:|--:|---|")
    print("\n".join(lines))
    print("the two runs agree" if ok else "the two runs DISAGREE")
    return 0 if ok else 1


def reruns(argv):
    """cm-price reruns [PROFILE...]: each profile's results.md "Reruns of this code" section, from
    its results.json and verifications.json (verify writes it too)."""
    names = argv or sorted(os.path.basename(os.path.dirname(p)) for p in
                           glob.glob(os.path.join(ROOT, "results", "*", "verifications.json")))
    for name in names:
        folder = os.path.join(ROOT, "results", name)
        with open(os.path.join(folder, "results.json")) as f:
            doc = json.load(f)
        write_reruns(folder, doc, read_records(folder))
        print(f"results/{name}/results.md: {len(reproductions(doc, read_records(folder)))} "
              f"claims with reruns of this code")
    return 0


def render(argv, root=None):
    """cm-price render [PROFILE...]: each profile's results.md written again from its results.json
    and verifications.json (its charts as they are) -- after a change to how the page is written,
    never to what was measured. Every profile with a results.json by default."""
    base = os.path.join(root or ROOT, "results")
    names = argv or sorted(n for n in os.listdir(base)
                           if os.path.exists(os.path.join(base, n, "results.json"))
                           and os.path.exists(os.path.join(base, n, "machine.json")))
    for name in names:
        render_folder(os.path.join(base, name))
        print(f"results/{name}/results.md: written again from its results.json")
    return 0


def render_folder(folder):
    """folder/results.md from its results.json and verifications.json: the claims that reruns of
    their code did not reproduce marked in the claims table, and the reruns listed at the end."""
    from . import latency_report, report, results
    with open(os.path.join(folder, "results.json")) as f:
        doc = json.load(f)
    latency = doc["meta"].get("profile_settings", {}).get("kind") == "latency"
    if latency:  # its summaries are computed from the windows it keeps: computed again
        from .latency import dumps, resummarize
        with open(os.path.join(folder, "results.json"), "w") as f:
            f.write(dumps(resummarize(doc)))
        plt = results.pyplot("cm-price render")
        if plt is not None:  # its chart is drawn from them alone (harness/plot draws the others)
            latency_report.draw(doc, os.path.join(folder, latency_report.CHART), plt)
    elif results.add_variant_pairs(doc):  # the variants' pairs, from the rounds it keeps
        with open(os.path.join(folder, "results.json"), "w") as f:
            f.write(json.dumps(doc, indent=1) + "\n")
    records = read_records(folder)
    with open(os.path.join(folder, "results.md"), "w") as f:
        if latency:
            f.write(latency_report.markdown(doc, results.charts_in(folder)))
        else:
            f.write(report.markdown(doc, results.charts_in(folder),
                                    reproduced=reproductions(doc, records)))
    write_reruns(folder, doc, records)


def main(mode, argv, run_profile, profile_from_settings, parse_args):
    if mode == "render":
        return render(argv)
    if mode == "check":
        return check(argv)
    if mode == "reruns":
        return reruns(argv)
    if mode == "compare":
        return compare_runs(argv)
    return verify(argv, run_profile, profile_from_settings, parse_args)
