"""Where a result comes from: the machine, its load, the commit, and the git tree hash of every
model's folder and of common/ as they were measured (the working tree's content, committed or not).

A figure in the docs is fresh while the code its results file recorded for its model (and for
common/) is the current code (docs/tools/freshness.py): the same tree hashes, or trees that differ
only where nothing of the server is built from (same_code: tests, fuzz targets, prose).
provenance() is the one function every tool records.
"""

import datetime
import functools
import hashlib
import os
import platform
import re
import resource
import shutil
import subprocess
import tempfile

from . import ROOT, proc

#: The folder whose code a server's figures describe; every model's figures also depend on common/
#: and servers/ (the launcher). nginx and node are not the project's code: no folder.
MODEL_FOLDERS = {
    "blocking": "blocking",
    "asio_coro": "asio_coro",
    "asio_coro_uring": "asio_coro",
    "libuv_callbacks": "libuv_callbacks",
    "uring_coro": "uring_coro",
}
SHARED_FOLDERS = ("common", "servers")
TRACKED = tuple(sorted(set(MODEL_FOLDERS.values()))) + SHARED_FOLDERS + ("harness",)


def folders_of(server):
    """The folders a server's figures depend on: its own and the shared ones (none for a peer)."""
    own = MODEL_FOLDERS.get(server)
    return [own, *SHARED_FOLDERS] if own else []


#: What in a tracked folder no server is built from: its tests (with their fixtures), its fuzz
#: targets and its prose. A change there moves the folder's tree hash but not a figure measured on it.
NOT_BUILT = re.compile(r"(^|/)(tests|fuzz)/|\.md$")


@functools.lru_cache(maxsize=None)
def code_hash(tree, root=ROOT):
    """A hash of the part of a folder's tree a server is built from: every file's path and blob
    hash (`git ls-tree -r`) but those NOT_BUILT matches. None when the repository does not hold the
    tree (a run on uncommitted code, read in another clone): then only the tree hash can tell."""
    if not tree:
        return None
    try:
        listing = git("ls-tree", "-r", "--full-tree", tree, root=root)
    except RuntimeError:
        return None
    kept = [line for line in listing.splitlines() if not NOT_BUILT.search(line.split("\t", 1)[1])]
    return hashlib.sha1("\n".join(kept).encode()).hexdigest()


def same_code(trees, other, folders, root=ROOT):
    """Two records of trees ({folder: tree hash}) hold the same code in every folder given: the
    same tree, or trees whose code_hash agrees (they differ only in tests, fuzz targets or prose)."""
    for folder in folders:
        a, b = trees.get(folder), other.get(folder)
        if a != b and (code_hash(a, root) is None or code_hash(a, root) != code_hash(b, root)):
            return False
    return True


def first_line(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (p.stdout or p.stderr).strip().splitlines()
    return lines[0] if lines else ""


def git(*args, root=ROOT, env=None):
    p = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout.strip()


def tree_hashes(folders=TRACKED, root=ROOT):
    """{folder: git tree hash of its content in the working tree}, staged or not, untracked files
    included (ignored ones left out), computed in a scratch index so the real one is untouched.
    The hash equals `git rev-parse HEAD:folder` when the folder has no change."""
    with tempfile.TemporaryDirectory() as scratch:
        index = os.path.join(scratch, "index")
        git_dir = git("rev-parse", "--absolute-git-dir", root=root)
        shutil.copyfile(os.path.join(git_dir, "index"), index)
        env = {"GIT_INDEX_FILE": index}
        present = [f for f in folders if os.path.isdir(os.path.join(root, f))]
        if present:
            git("add", "-A", "--", *present, root=root, env=env)
        tree = git("write-tree", root=root, env=env)
        out = {}
        for folder in folders:
            try:
                out[folder] = git("rev-parse", f"{tree}:{folder}", root=root)
            except RuntimeError:
                out[folder] = None  # not in this checkout
        return out


def trees_at(commit, folders=TRACKED, root=ROOT):
    """{folder: tree hash} at a commit (for a result that recorded only its commit)."""
    out = {}
    for folder in folders:
        try:
            out[folder] = git("rev-parse", f"{commit}:{folder}", root=root)
        except RuntimeError:
            out[folder] = None
    return out


def commit(root=ROOT):
    """HEAD, and whether the tree differs from it outside results/ (which a run rewrites)."""
    try:
        head = git("rev-parse", "HEAD", root=root)
        changed = git("status", "--porcelain", "--", ".", ":!results", root=root).splitlines()
    except (RuntimeError, OSError):
        return {"head": "unknown (not a git checkout)", "dirty": None, "changed_paths": None}
    return {"head": head, "dirty": bool(changed), "changed_paths": len(changed)}


def _cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def _memory():
    with open("/proc/meminfo") as f:
        kib = int(f.readline().split()[1])
    return f"{kib / 1024 / 1024:.1f} GiB"


def _os_name():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "unknown"


def _package_version(package):
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown (no dpkg-query)"
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else "not installed"


def _build(bin_dir):
    """The compiler and build type of the build tree that holds bin_dir (its CMakeCache.txt)."""
    cache = os.path.join(os.path.realpath(bin_dir or os.path.join(ROOT, "build/bin")), "..",
                         "CMakeCache.txt")
    found = {}
    try:
        with open(cache) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                found[key.split(":")[0]] = value
    except OSError:
        return {"build_type": "unknown", "compiler": "unknown"}
    compiler = found.get("CMAKE_CXX_COMPILER", "")
    return {"build_type": found.get("CMAKE_BUILD_TYPE", "unknown"),
            "compiler": first_line([compiler, "--version"]) if compiler else "unknown"}


def machine(bin_dir=None):
    """What the machine is: CPUs, memory, kernel, OS, limits, libraries, peers, the build."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as f:
            uring = f.read().strip()
    except OSError:
        uring = "(no such sysctl)"
    u = platform.uname()
    nginx = first_line(["nginx", "-v"]) or first_line(["/usr/sbin/nginx", "-v"])
    node = first_line(["node", "--version"])
    go = first_line(["/usr/bin/go", "version"])
    tokio = _package_version("librust-tokio-dev")
    hyper = _package_version("librust-hyper-dev")
    return {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpus_allowed": proc.cpu_list(proc.allowed_cpus()),
        "memory": _memory(),
        "kernel": f"{u.system} {u.release} {u.version} {u.machine}",
        "os": _os_name(),
        "open_files_limit": {"soft": soft, "hard": hard},
        "io_uring_disabled": uring,
        **_build(bin_dir),
        "libraries": {
            "boost": _package_version("libboost1.81-dev"),
            "libuv": _package_version("libuv1-dev"),
            "liburing": _package_version("liburing-dev"),
            "llhttp": _package_version("node-llhttp"),
        },
        "peers": {"nginx": nginx or "not installed", "node": f"node {node}" if node else
                  "not installed", "go": go or "not installed",
                  "tokio": f"librust-tokio-dev {tokio}, librust-hyper-dev {hyper}"},
    }


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def provenance(bin_dir=None, root=ROOT):
    """Everything a result records about where it comes from, read now."""
    return {
        "machine": machine(bin_dir),
        "load_average": list(proc.load_average()),
        "commit": commit(root),
        "trees": tree_hashes(root=root),
        "recorded_utc": utc_now(),
    }


def machine_markdown(m):
    """The machine as a Markdown list, for a results folder's machine.md."""
    lines = ["# Machine", ""]
    for key, value in m.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        lines.append(f"- {key.replace('_', ' ')}: {value}")
    return "\n".join(lines) + "\n"


def machine_line(m):
    """One line for a results page: "AMD EPYC, 2 CPUs, 23.5 GiB, Linux 6.1.0-18-amd64", from
    machine()."""
    kernel = " ".join(m["kernel"].split()[:2])  # the system and its release, not the build string
    return f"{m['cpu_model']}, {m['logical_cpus']} CPUs, {m['memory']}, {kernel}"


def commit_line(c):
    """One line for a results page from commit(): the short HEAD, and whether the tree differed."""
    if c["dirty"] is None:
        return c["head"]
    line = c["head"][:12]
    if c["dirty"]:
        line += f" (with uncommitted changes: {c['changed_paths']} paths outside results/)"
    return line


def load_average_text(values):
    """"1.40 1.58 1.97", as /proc/loadavg writes the three averages."""
    return " ".join(f"{x:.2f}" for x in values)


def conditions_markdown(prov, *, ended_utc, load_after, pinning, command, machine_extra=""):
    """The "## Conditions" list of a results page, as lines: when it ran, the load average before
    (from `prov`, a provenance() read at the start) and after, the machine (and `machine_extra`,
    a tool's own versions), where it was pinned, the commit and the command that ran."""
    return ["## Conditions", "",
            f"- When: {prov['recorded_utc']} to {ended_utc}",
            f"- Load average (1, 5, 15 min): {load_average_text(prov['load_average'])} before, "
            f"{load_average_text(load_after)} after",
            f"- Machine: {machine_line(prov['machine'])}{machine_extra}",
            f"- Pinning: {pinning}",
            f"- Commit: {commit_line(prov['commit'])}",
            f"- This run: `{command}`"]


def package_versions(packages):
    """{package: its installed Debian version, or "not installed"}: a tool's own instruments (Google
    Benchmark's libbenchmark-dev, say) beside the libraries machine() records. Only dpkg-query's
    stdout counts: for a package it does not know it writes its complaint on stderr."""
    out = {}
    for package in packages:
        try:
            p = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                               text=True, timeout=10)
            version = p.stdout.strip() if p.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            version = ""
        out[package] = version or "not installed"
    return out
