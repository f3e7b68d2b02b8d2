"""Child processes: started pinned to CPUs, each stopped by its pid on the way out, whatever
happened.

Every child this module starts is registered; stop_all() (run at exit, and on SIGTERM / SIGINT
once install_signal_handlers() was called) stops the ones still running. A child also gets SIGTERM
if this process dies first (PR_SET_PDEATHSIG), so nothing outlives a tool that was killed.
"""

import atexit
import ctypes
import dataclasses
import os
import shlex
import signal
import subprocess
import time

from . import proc

_PR_SET_PDEATHSIG = 1
_STARTED = {}  # pid -> Popen, in the order started


def _prepare(cpus):
    def run_in_child():
        if cpus:
            os.sched_setaffinity(0, cpus)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass

    return run_in_child


def start(argv, cpus=(), **popen_args):
    """Starts argv pinned to `cpus` (not pinned when empty); returns the Popen, registered."""
    p = subprocess.Popen(argv, preexec_fn=_prepare(list(cpus)), **popen_args)
    _STARTED[p.pid] = p
    return p


def stop(p, sig=signal.SIGTERM, grace=10.0, tree=None):
    """Signals one child, waits up to `grace` s, then SIGKILLs it and `tree` (its descendants, read
    before: nginx's workers). Returns how it ended: "exit 0", "killed by signal 9 after 10 s"."""
    killed = False
    if p.poll() is None:
        tree = tree if tree is not None else proc.process_tree(p.pid)
        try:
            p.send_signal(sig)
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            for pid in tree:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
            killed = True
        except ProcessLookupError:
            pass
    _STARTED.pop(p.pid, None)
    return describe(p.returncode) + (f" after {grace:g} s" if killed else "")


def describe(returncode):
    if returncode is None:
        return "running"
    return f"killed by signal {-returncode}" if returncode < 0 else f"exit {returncode}"


def stop_all():
    for p in reversed(list(_STARTED.values())):
        stop(p, grace=5.0)


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def install_signal_handlers():
    """SIGTERM and SIGINT end the tool through SystemExit, so stop_all() runs."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


atexit.register(stop_all)


def raise_open_files():
    """Raises the soft open-files limit to the hard one; children inherit it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@dataclasses.dataclass
class Finished:
    """A child run to its end by run(): its output, how long it took and the CPU it used."""

    argv: list
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # user + system, the child and the descendants it waited for


def _children_cpu_s():
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(argv, cpus=(), *, timeout=None, check=True, env=None):
    """Runs argv pinned to `cpus` to its end, its output captured as text; returns a Finished.
    After `timeout` s it is stopped and RuntimeError raised; with `check`, RuntimeError (the
    command and the end of its stderr) when it exits non-zero. cpu_s is read from RUSAGE_CHILDREN
    around the run, so it is the child's own only while no other child of this tool ends meanwhile
    (a tool that runs one command at a time, beside servers that keep running)."""
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    p = start(argv, cpus, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p, grace=2.0)
        p.communicate()
        raise RuntimeError(f"{shlex.join(argv)}: still running after {timeout:g} s, stopped")
    _STARTED.pop(p.pid, None)
    done = Finished(list(argv), p.returncode, out, err, time.monotonic() - t0,
                    _children_cpu_s() - cpu0)
    if check and p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: {describe(p.returncode)}: "
                           f"{(err or out).strip()[-2000:]}")
    return done


def shown(argv, cpus=(), replace=()):
    """A command as a page shows it, for a reader to type: `taskset -c CPUS` first when it ran
    pinned, the repository's paths relative to it, and each (text, placeholder) of `replace` put
    in -- a run's own port, pid or scratch folder, which the reader's run will not share."""
    from . import ROOT

    words = [os.path.relpath(a, ROOT) if a.startswith(ROOT + "/") else a for a in map(str, argv)]
    if cpus:
        words = ["taskset", "-c", ",".join(str(c) for c in cpus)] + words
    for old, new in replace:
        words = [w.replace(old, new) for w in words]
    return shlex.join(words)
