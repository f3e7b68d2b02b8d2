"""What /proc says about a process and about the machine. Pure readers: no process is started here.

Every function that reads a process raises ProcessLookupError when the process is gone.
"""

import os

HZ = os.sysconf("SC_CLK_TCK")


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError as e:
        raise ProcessLookupError(path) from e


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (field 3, the state, is index 0)."""
    return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()


def cpu_seconds(pid):
    """User + system CPU seconds of one process, all its threads (fields 14 and 15)."""
    f = _stat_fields(pid)
    return (int(f[11]) + int(f[12])) / HZ


def children(pid):
    """The pids of a process's children (those of every one of its threads)."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def process_tree(pid):
    """`pid` and every live descendant (nginx's workers, say)."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children(p)
    return tree


def status(pid):
    """/proc/PID/status as a dict of its lines' values (strings, units left on)."""
    out = {}
    for line in _read(f"/proc/{pid}/status").splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def status_kib(pid, key):
    """A "kB" line of /proc/PID/status ("VmRSS", "VmHWM", ...) in KiB; KeyError when missing."""
    return int(status(pid)[key].split()[0])


def thread_count(pid):
    return int(status(pid)["Threads"])


def context_switches(pid):
    """(voluntary, involuntary) context switches of a process, summed over all its threads
    (/proc/PID/status counts the main thread's alone)."""
    voluntary = involuntary = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            s = _read(f"/proc/{pid}/task/{tid}/status")
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        for line in s.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary


def thread_states(pids):
    """The state letter of every thread of these processes ("R", "S", "T", ...)."""
    states = []
    for p in pids:
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return states


def reset_peak_rss(pid):
    """Resets VmHWM to the current RSS (writing 5 to clear_refs); False when not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def machine_ticks(text=None):
    """(total, idle, steal) clock ticks of the "cpu" line of /proc/stat, summed over every CPU.
    total leaves out guest and guest_nice (already counted in user and nice); idle includes
    iowait."""
    text = text if text is not None else _read("/proc/stat")
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            if len(f) < 9:
                raise ValueError("the cpu line of /proc/stat has fewer than 8 fields")
            v = [int(x) for x in f[1:9]]
            return sum(v), v[3] + v[4], v[7]
    raise ValueError("/proc/stat has no cpu line")


def cpus_busy_seconds(cpus, text=None):
    """The seconds the given CPUs have been busy since boot, summed, by whatever ran on them:
    every tick of their /proc/stat "cpuN" lines but idle, iowait and steal."""
    text = text if text is not None else _read("/proc/stat")
    wanted, busy = {f"cpu{c}" for c in cpus}, 0
    for line in text.splitlines():
        f = line.split()
        if f and f[0] in wanted:
            v = [int(x) for x in f[1:9]]
            busy += sum(v) - v[3] - v[4] - v[7]
            wanted.discard(f[0])
    if wanted:
        raise ValueError(f"/proc/stat has no line for {', '.join(sorted(wanted))}")
    return busy / HZ


def machine_share(before, after, server_cpu_s, load_cpu_s):
    """What the rest of the machine did between two machine_ticks() readings, as shares of all
    the CPUs' time: (steal, others); others = CPU used by neither the server nor the load."""
    total = after[0] - before[0]
    if total <= 0:
        return 0.0, 0.0
    steal = (after[2] - before[2]) / total
    busy_s = (total - (after[1] - before[1]) - (after[2] - before[2])) / HZ
    others = max(0.0, busy_s - server_cpu_s - load_cpu_s) / (total / HZ)
    return steal, others


def load_average(text=None):
    """The 1-, 5- and 15-minute load averages."""
    text = text if text is not None else _read("/proc/loadavg")
    return tuple(float(x) for x in text.split()[:3])


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


def cpu_list(cpus):
    """"0-3,6" from [0, 1, 2, 3, 6]."""
    cpus, out, i = sorted(cpus), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def split_cpus(server_count=None):
    """(server CPUs, load CPUs): the first `server_count` (default half, at least 1) allowed CPUs
    for the server, the rest for the load; with one CPU both get it (not pinned apart)."""
    cpus = allowed_cpus()
    if len(cpus) < 2:
        return cpus, cpus
    k = min(server_count or max(1, len(cpus) // 2), len(cpus) - 1)
    return cpus[:k], cpus[k:]


def pinning_line(server_cpus, client_cpus, server="the server", client="the load"):
    """"cm-server on CPU 0, cm-load on CPU 1": where split_cpus() put the two sides, for a page."""
    if list(server_cpus) == list(client_cpus):
        return f"one CPU: {server} and {client} share CPU {cpu_list(server_cpus)}"
    return f"{server} on CPU {cpu_list(server_cpus)}, {client} on CPU {cpu_list(client_cpus)}"
