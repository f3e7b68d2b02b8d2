#!/usr/bin/python3
"""Starts threads until the kernel refuses one, and says which limit it reached.

The blocking model holds a thread per waiting request, and each thread reserves a stack (8 MiB by
default, `ulimit -s`). What stops tens of thousands of them is not the address space (x86-64 gives
a process 128 TiB: some 16 million such stacks) but a count, whichever comes first:

- kernel.pid_max: every thread is a task with an id, counted over the whole machine;
- kernel.threads-max: the tasks the kernel will hold, from its memory;
- vm.max_map_count: the memory maps of one process -- each thread's stack is two (the stack and
  its guard page);
- RLIMIT_NPROC (`ulimit -u`): the tasks of one user;
- memory, where overcommit is strict (vm.overcommit_memory = 2): each stack is then committed.

Each thread is libc's pause(), started with pthread_create and default attributes (the stack size
of `ulimit -s`, as std::thread and the blocking model get): no Python runs in it. When
pthread_create fails, the tool prints how many it started, the error, and each limit beside what
was in use at that moment; then it exits, and the threads with it.

    docs/exercises/tools/thread-limit.py              # up to 100,000 threads
    docs/exercises/tools/thread-limit.py --max 5000   # stop there (nothing refused: no limit named)
    docs/exercises/tools/thread-limit.py --max 10000 --hold 20 &   # hold them while another runs:
    docs/exercises/tools/thread-limit.py                            # a machine-wide limit binds
                                                                    # both, a per-process one not

Linux only; standard library only (ctypes). It takes about a second per 10,000 threads.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import resource
import sys
import time


def read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def tasks_on_the_machine() -> int | None:
    """Every task (thread) the kernel holds now: the 4th field of /proc/loadavg is running/total."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


def maps_of_this_process() -> int:
    with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
        return sum(1 for _ in f)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=100_000, help="threads to start at most")
    ap.add_argument("--hold", type=float, default=0, help="seconds to keep the threads before exiting")
    args = ap.parse_args()

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    pause = ctypes.cast(libc.pause, ctypes.c_void_p)  # the thread's whole life: pause()
    create = libc.pthread_create
    create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    thread = ctypes.c_ulong()
    started, error = 0, 0
    while started < args.max:
        error = create(ctypes.byref(thread), None, pause, None)
        if error:
            break
        started += 1

    soft_nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    print(f"thread-limit: started {started:,} threads of {stack // 1024 if stack > 0 else 'unlimited'} KiB "
          f"stacks" + (f"; the next was refused: {os.strerror(error)}" if error else f" (--max {args.max:,})"))
    tasks, maps = tasks_on_the_machine(), maps_of_this_process()
    room = []  # (threads more it would allow, name)
    limits = [
        ("kernel.pid_max (tasks on the machine)", tasks, read_int("/proc/sys/kernel/pid_max")),
        ("kernel.threads-max (tasks on the machine)", tasks, read_int("/proc/sys/kernel/threads-max")),
        ("vm.max_map_count (maps of this process)", maps, read_int("/proc/sys/vm/max_map_count")),
        ("RLIMIT_NPROC, ulimit -u (tasks of this user)", None,
         soft_nproc if soft_nproc != resource.RLIM_INFINITY else None),
    ]
    reached = []
    for name, used, limit in limits:
        if limit is None:
            continue
        shown = f"{used:,} of {limit:,}" if used is not None else f"limit {limit:,}"
        near = used is not None and used >= 0.99 * limit
        reached += [name] if near else []
        if used is not None:
            per_thread = 2 if "max_map_count" in name else 1
            room.append(((limit - used) // per_thread, name))
        print(f"  {name}: {shown}{'  <- reached' if near else ''}")
    print(f"  vm.overcommit_memory: {read_int('/proc/sys/vm/overcommit_memory')} (2: strict, stacks are committed)")
    if error:
        print("thread-limit: the limit reached: " + (", ".join(reached) if reached else
              "none of these within 1% (memory, or a cgroup's pids.max)"))
        least = min(room)
        print(f"thread-limit: the least room left: {least[1]}, {least[0]:,} more threads")
    sys.stdout.flush()
    if args.hold > 0:
        time.sleep(args.hold)
    os._exit(0)  # the paused threads end with the process


if __name__ == "__main__":
    sys.exit(main())
