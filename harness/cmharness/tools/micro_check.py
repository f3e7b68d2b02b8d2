"""check -- runs cm-micro briefly and checks that every benchmark ran (the ctest cm_micro_runs).

    harness/micro/check build/bin/cm-micro core asio offload_asio ...
    harness/micro/check --uring-unavailable build/bin/cm-micro uring offload_uring

The groups are the name prefixes this build compiled in (BM_<group>_...). It asserts that
cm-micro exits 0, that every benchmark it registers (--benchmark_list_tests) produced a result in
its JSON output, that each expected group has benchmarks, and that none reported an error except
io_uring's clean "io_uring unavailable" skip. It asserts nothing about speed.

With --uring-unavailable it runs only the io_uring benchmarks with CM_URING_SIMULATE_ENOSYS=1
(the kernel is not asked, the ring fails with ENOSYS as on an old kernel) and asserts that each of
them stopped with the clean "io_uring unavailable" skip, and that cm-micro still exited 0.
"""
import json
import os
import sys
import tempfile

from cmharness import processes


def fail(message):
    print("check: FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    unavailable = bool(args) and args[0] == "--uring-unavailable"
    if unavailable:
        args = args[1:]
    if len(args) < 2:
        fail("usage: check [--uring-unavailable] CM_MICRO GROUP...")
    binary, groups = args[0], args[1:]
    env = dict(os.environ)
    selection = []
    if unavailable:
        env["CM_URING_SIMULATE_ENOSYS"] = "1"
        selection = ["--benchmark_filter=uring"]

    listed = processes.run([binary, "--benchmark_list_tests=true"] + selection, timeout=60,
                           check=False, env=env)
    if listed.returncode != 0:
        fail(f"--benchmark_list_tests exited {listed.returncode}: {listed.stderr.strip()}")
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    if not names:
        fail("cm-micro registers no benchmark")

    for group in groups:
        if not any(name.startswith(f"BM_{group}_") for name in names):
            fail(f"group {group!r} was built but registers no BM_{group}_* benchmark")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "micro.json")
        run = processes.run([binary, "--benchmark_min_time=0.01", f"--benchmark_out={out}",
                             "--benchmark_out_format=json"] + selection, timeout=200,
                            check=False, env=env)
        if run.returncode != 0:
            fail(f"cm-micro exited {run.returncode}: {run.stderr.strip()[-2000:]}")
        with open(out) as f:
            report = json.load(f)

    results = {b["name"]: b for b in report.get("benchmarks", [])}
    missing = [name for name in names if name not in results]
    if missing:
        fail("no result for: " + ", ".join(missing))
    skipped = []
    for name, result in results.items():
        if result.get("error_occurred"):
            message = result.get("error_message", "")
            if not message.startswith("io_uring unavailable"):
                fail(f"{name} reported an error: {message}")
            skipped.append(name)
        elif result.get("iterations", 0) < 1:
            fail(f"{name} ran no iteration")
    if unavailable and len(skipped) != len(names):
        ran = sorted(set(names) - set(skipped))
        fail("with io_uring unavailable these ran anyway: " + ", ".join(ran))
    print(f"check: {len(names)} benchmarks ran ({len(skipped)} skipped: io_uring unavailable), "
          f"groups: {' '.join(groups)}")
