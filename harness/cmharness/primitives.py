"""What each model's primitives cost: the body of results/micro.md (harness/micro/report writes
the page). What each benchmark measures, a table per group of them, the comparisons the page draws
(the offloads, pool against thread per call; our parser against raw llhttp), each of two medians
with their distribution-free 95% intervals ("no difference measured here" where they overlap), and
the seeds' published figures converted beside ours.
"""

from . import stats
from .benchmarks import ns, ns_estimate

GROUPS = [
    ("core", "Shared core: cm_common over llhttp (one thread)",
     "Parsing is measured twice on the same bytes: `cm` is cm::RequestParser (llhttp, the copies into "
     "a cm::Request, the limit checks, one pause per head and per request), `llhttp` is raw llhttp "
     "with empty callbacks; the difference is the wrapper's own cost."),
    ("asio", "Boost.Asio, C++20 coroutines, one io_context (hint 1) run by one thread",
     "`BM_asio_*` run on Asio's default epoll reactor (the asio_coro model); `BM_asio_uring_*` are the "
     "same code compiled on Asio's io_uring backend (`BOOST_ASIO_HAS_IO_URING`, "
     "`BOOST_ASIO_DISABLE_EPOLL`: the asio_coro_uring model). Each io_context holds a listening "
     "socket, as a model's loop does: without an I/O object Asio has no reactor task and its thread "
     "would wait on a condition variable instead of in the kernel's poll. On epoll every post round "
     "then makes one `epoll_wait(0)` (`strace -c build/bin/cm-micro --benchmark_filter=BM_asio_post_resume "
     "--benchmark_min_time=0.1` counted only `epoll_wait`, about one per iteration), while the "
     "io_uring backend made no syscall at all for the same loop (`strace -f -c`, filter "
     "`BM_asio_uring_post_resume`): it reads the completion ring in memory. On epoll a zero "
     "steady_timer is a kernel timer: each iteration makes two `timerfd_settime` calls and one "
     "`epoll_wait` (`strace -f -c ... --benchmark_filter=BM_asio_timer_zero --benchmark_min_time=0.2` "
     "counted 18,952 `timerfd_settime` for 9,481 `epoll_wait`)."),
    ("uv", "libuv, one uv_loop_t run by one thread, callbacks",
     "Each loop also holds one uv_async_t, as a model's loop holds its stop handle, so a round goes "
     "through `epoll_wait` as in a server. libuv keeps timers in its own heap: a due zero timer fires "
     "in the next round's timer phase with no syscall besides that round's `epoll_wait(0)` (`strace -f "
     "-c ... --benchmark_filter=BM_uv_timer_zero` counted only `epoll_wait`, about one per iteration)."),
    ("uring", "io_uring, one ring run by one thread",
     "`*_raw` use liburing alone (one `io_uring_submit_and_wait` per operation); the others go through "
     "the uring_coro model's runtime (uring_coro/include/cm/uring/: Task, Ring, its awaitables). "
     "`Ring::spawn` starts a task at once on the caller's thread (no loop round), unlike `co_spawn`, "
     "which posts the start."),
    ("offload", "Offload round trip: from the loop to a worker and back",
     "Real time is the round trip as the loop sees it (the work itself is empty); loop CPU is the "
     "loop thread's own CPU time per call (what aeronet calls event loop time per call)."),
]

WHAT = {
    "BM_core_parse_get_cm": "`GET /delay/10` with Host, User-Agent, Accept (84 bytes), cm::RequestParser",
    "BM_core_parse_get_llhttp": "the same bytes, raw llhttp",
    "BM_core_parse_pipelined16_cm": "16 pipelined `GET /delay/10` in one buffer, cm::RequestParser",
    "BM_core_parse_pipelined16_llhttp": "the same bytes, raw llhttp",
    "BM_core_parse_chunked16k_cm": "`POST /echo`, 16 KiB body in 16 chunks, cm::RequestParser",
    "BM_core_parse_chunked16k_llhttp": "the same bytes, raw llhttp",
    "BM_core_route/delay": "cm::plan for `/delay/10`",
    "BM_core_route/plaintext": "cm::plan for `/plaintext`",
    "BM_core_route/not_found": "cm::plan for a 404",
    "BM_core_serialize": "cm::serialize of the `/delay/10` reply (Date from its cache)",
    "BM_core_session_round": "Session: received -> next -> write_reply (clock read included)",
    "BM_asio_post_resume": "`co_await post(executor, use_awaitable)` on a loop holding a listener",
    "BM_asio_post_resume_bare": "the same on an io_context without I/O objects (the seed's setup)",
    "BM_asio_uring_post_resume_bare": "the same, Asio on io_uring, without I/O objects",
    "BM_asio_timer_zero": "steady_timer armed at 0 and `co_await`ed",
    "BM_asio_co_spawn": "co_spawn a coroutine that returns at once, run the loop until it ends",
    "BM_asio_await_child": "`co_await` a child awaitable<void> (no suspension)",
    "BM_uv_async_send": "uv_async_send + the uv_run(ONCE) that calls it back",
    "BM_uv_idle_round": "one loop round (uv_run NOWAIT) with an idle callback",
    "BM_uv_timer_zero": "uv_timer_start(0) + the round that fires it",
    "BM_uv_callback_chain/1": "new context + handle, 1 callback, close, free",
    "BM_uv_callback_chain/8": "new context + handle, 8 callbacks one round apart, close, free",
    "BM_uring_nop_raw": "liburing: NOP submitted and reaped (one syscall)",
    "BM_uring_timeout_zero_raw": "liburing: zero IORING_OP_TIMEOUT submitted and reaped",
    "BM_uring_nop": "runtime: `co_await Nop(ring)` in a Task",
    "BM_uring_timeout_zero": "runtime: `co_await Timeout(ring, 0ns)`",
    "BM_uring_timeout_deadline_now": "runtime: `co_await Timeout(ring, steady_clock::now())` (absolute, as the model arms /delay)",
    "BM_uring_spawn": "runtime: Ring::spawn of a Task that finishes at once",
    "BM_uring_await_child": "runtime: `co_await` a child Task (no suspension)",
    "BM_asio_uring_post_resume": "the same, Asio on io_uring",
    "BM_asio_uring_timer_zero": "the same, Asio on io_uring",
    "BM_asio_uring_co_spawn": "the same, Asio on io_uring",
    "BM_asio_uring_await_child": "the same, Asio on io_uring",
    "BM_offload_asio_uring_thread": "asio on io_uring, thread per call as the model (thread_pool(1), joined)",
    "BM_offload_asio_uring_thread_detached": "asio on io_uring, detached std::thread per call",
    "BM_offload_asio_uring_pool": "asio on io_uring, co_spawn onto a thread_pool (64 threads)",
    "BM_offload_asio_thread": "asio, thread per call as the model does it (thread_pool(1), co_spawn, joined)",
    "BM_offload_asio_thread_detached": "asio, detached std::thread per call (aeronet's deferWork)",
    "BM_offload_asio_pool": "asio, co_spawn onto the model's thread_pool (64 threads)",
    "BM_offload_uv_thread": "libuv, std::thread per call, uv_async_send back, joined (as the model)",
    "BM_offload_uv_pool": "libuv, uv_queue_work (UV_THREADPOOL_SIZE=64, as the model)",
    "BM_offload_uring_thread": "io_uring, std::thread per call, Ring::post back, joined",
    "BM_offload_uring_pool": "io_uring, pool whose workers Ring::post completions back",
}


def group_of(name):
    body = name[3:] if name.startswith("BM_") else name
    return body.split("_", 1)[0]


# -- a table per group --------------------------------------------------------------------------

def pct(sd, mean):
    return "–" if sd is None or not mean else f"{100 * sd / mean:.1f}%"


def rate(value, unit):
    if not value:
        return ""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}/s"
    return f"{value:.0f} {unit}/s"


def table(names, stats_):
    lines = ["| benchmark | what | real ns/op mean | median [95% interval] | stddev | cv "
             "| CPU ns/op mean | CPU cv | throughput (mean) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name in names:
        s = stats_[name]
        throughput = ", ".join(x for x in (rate(s.bytes, "B"), rate(s.items, "items")) if x)
        lines.append(f"| `{name}` | {WHAT.get(name, '')} | {ns(s.real)} | "
                     f"{ns_estimate(s.estimate('real'))} | {ns(s.real_sd)} | "
                     f"{pct(s.real_sd, s.real)} | {ns(s.cpu)} | {pct(s.cpu_sd, s.cpu)} | "
                     f"{throughput} |")
    return "\n".join(lines)


def group_sections(stats_):
    out = []
    for key, title, intro in GROUPS:
        names = [n for n in stats_ if group_of(n) == key]
        if not names:
            continue
        out += [f"## {title}", ""] + ([intro, ""] if intro else []) + [table(names, stats_), ""]
        notes = core_notes(core_comparisons(stats_)) if key == "core" else ""
        if notes:
            out += [notes, ""]
    return out


# -- comparisons: two medians, each with its interval -------------------------------------------

#: What stats.compare says of two estimates whose intervals overlap.
NO_DIFFERENCE = "no difference measured here"


def cheaper(a, b, a_label, b_label):
    """Which of two costs (Estimates) is lower: a_label, b_label, or "no difference measured here"
    when their intervals overlap (always, without intervals)."""
    return {"lower": a_label, "higher": b_label}.get(stats.compare(a, b), NO_DIFFERENCE)


def said(winner, a, b):
    """The end of a comparison's sentence: who is cheaper and by what factor of the medians."""
    if winner == NO_DIFFERENCE:
        return f"{winner} (the intervals overlap)"
    low, high = sorted((a.estimate, b.estimate))
    if low <= 0:
        return f"{winner} is cheaper"
    return f"{winner} is cheaper, {high / low:.1f}× (medians)"


def compare_json(a_name, a, b_name, b, winner):
    """{a_name: a's Estimate, b_name: b's, "cheaper": winner} for the JSON."""
    return {a_name: a.to_json(), b_name: b.to_json(), "cheaper": winner}


OFFLOAD_MODELS = (("asio", "asio"), ("asio_uring", "asio on io_uring"), ("uv", "libuv"),
                  ("uring", "io_uring"))
THREADS = (("thread", "thread per call", ""),
           ("thread_detached", "detached thread per call", " (aeronet's way)"))


def offload_pairs(stats_):
    """(label, kind, pool name, thread name) of every pool measured with its thread per call."""
    pairs = []
    for model, label in OFFLOAD_MODELS:
        pool = f"BM_offload_{model}_pool"
        for suffix, kind, way in THREADS:
            thread = f"BM_offload_{model}_{suffix}"
            if pool in stats_ and thread in stats_:
                pairs.append((label + way, kind, pool, thread))
    return pairs


def offload_comparisons(stats_):
    """Every pool against its thread per call, in real time and in the loop thread's CPU:
    [{"label", "kind", "pool", "thread", "real": {...}, "cpu": {...}}]."""
    out = []
    for label, kind, pool, thread in offload_pairs(stats_):
        row = {"label": label, "kind": kind, "pool": pool, "thread": thread}
        for time_kind in ("real", "cpu"):
            p, t = stats_[pool].estimate(time_kind), stats_[thread].estimate(time_kind)
            winner = cheaper(p, t, "the pool", f"the {kind}")
            row[time_kind] = compare_json("pool", p, "thread", t, winner)
        out.append(row)
    return out


def compare_line(c):
    """One sentence per pair: the round trip and the loop thread's CPU, pool against thread."""
    parts = []
    for time_kind, what in (("real", "round trip (real time)"),
                            ("cpu", "the loop thread's own CPU per call")):
        p, t = (stats.Estimate.from_json(c[time_kind][k]) for k in ("pool", "thread"))
        parts.append(f"{what}: pool {ns_estimate(p)} ns, {c['kind']} {ns_estimate(t)} ns: "
                     f"{said(c[time_kind]['cheaper'], p, t)}")
    return f"- {c['label']}: " + "; ".join(parts) + "."


def tally(comparisons, time_kind):
    """How many comparisons the pool won, a thread per call won, and neither."""
    winners = [c[time_kind]["cheaper"] for c in comparisons]
    pool, none = winners.count("the pool"), winners.count(NO_DIFFERENCE)
    return pool, len(winners) - pool - none, none


def fastest_line(stats_):
    """The fastest pool round trip against the fastest thread per call (medians, real time); there
    is one of each, as offload_verdict() asks only when some model had both."""
    pools = [n for n in stats_ if n.startswith("BM_offload_") and n.endswith("_pool")]
    threads = [n for n in stats_ if n.startswith("BM_offload_") and "_thread" in n]
    pool = min(pools, key=lambda n: stats_[n].estimate().estimate)
    thread = min(threads, key=lambda n: stats_[n].estimate().estimate)
    p, t = stats_[pool].estimate(), stats_[thread].estimate()
    winner = cheaper(p, t, "a pool", "a thread per call")
    return (f"The fastest pool round trip (`{pool}`, {ns_estimate(p)} ns) against the fastest "
            f"thread per call (`{thread}`, {ns_estimate(t)} ns): {said(winner, p, t)}.")


def offload_verdict(stats_, comparisons):
    out = ["## Which offload is cheaper here", ""]
    if not comparisons:
        return "\n".join(out + ["No model had both offloads in this run."])
    n = len(comparisons)
    real, cpu = tally(comparisons, "real"), tally(comparisons, "cpu")
    reps = max(stats_[c["pool"]].repetitions for c in comparisons)
    out.append(
        f"Each figure is the median over the repetitions ({reps}) with its 95% interval "
        "`[low high]` (distribution-free, from the order statistics; an interval needs 6 "
        "repetitions); where the two intervals of a comparison overlap, no difference is "
        f"measured here. Round trips (real time): the pool is cheaper in {real[0]} of the {n} "
        f"comparisons below, a thread per call in {real[1]}, no difference measured in "
        f"{real[2]}. In the loop thread's own CPU per call, which scheduling disturbs less: the "
        f"pool in {cpu[0]}, a thread per call in {cpu[1]}, no difference in {cpu[2]}. Medians, "
        "because a thread per call varies widely from one repetition to the next (see the cv "
        "column above): each one creates a thread, and how soon the kernel runs it depends on "
        "what else the machine does. " + fastest_line(stats_) + " Per model:")
    out.append("")
    out += [compare_line(c) for c in comparisons]
    return "\n".join(out)


PARSE_CASES = (("get", "one `GET /delay/10`"), ("pipelined16", "16 pipelined requests"),
               ("chunked16k", "a 16 KiB chunked body"))


def core_comparisons(stats_):
    """cm::RequestParser against raw llhttp on the same bytes, in CPU time."""
    out = []
    for case, label in PARSE_CASES:
        cm_ = stats_.get(f"BM_core_parse_{case}_cm")
        raw = stats_.get(f"BM_core_parse_{case}_llhttp")
        if cm_ and raw:
            a, b = cm_.estimate("cpu"), raw.estimate("cpu")
            winner = cheaper(a, b, "cm::RequestParser", "raw llhttp")
            out.append({"label": label, "case": case,
                        "cpu": compare_json("cm", a, "llhttp", b, winner)})
    return out


def core_notes(comparisons):
    out = []
    for c in comparisons:
        a, b = (stats.Estimate.from_json(c["cpu"][k]) for k in ("cm", "llhttp"))
        line = (f"- {c['label']}: cm::RequestParser {ns_estimate(a)} ns, raw llhttp "
                f"{ns_estimate(b)} ns (CPU, median [95% interval])")
        if c["cpu"]["cheaper"] == NO_DIFFERENCE:
            out.append(f"{line}: {NO_DIFFERENCE}.")
        else:
            out.append(f"{line}: the wrapper adds {ns(a.estimate - b.estimate)} ns "
                       f"({a.estimate / b.estimate:.1f}× llhttp alone).")
    return "\n".join(out)


# -- the seeds' figures -------------------------------------------------------------------------

# The seeds' published figures, as printed there (seeds/003: boost.async, Table 6, "results for 50M
# times in ms"; seeds/000: aeronet's async handler guide, Performance).
BOOST_ASYNC_POSTS = 50_000_000
BOOST_ASYNC_POST_MS = {  # (implementation, compiler) -> ms for 50M `co_await post`
    ("async (boost.async task)", "gcc 12"): 2472, ("async (boost.async task)", "clang 16"): 2098,
    ("awaitable (asio::awaitable)", "gcc 12"): 2432, ("awaitable (asio::awaitable)", "clang 16"): 2253,
    ("stackful (boost.context)", "gcc 12"): 3655, ("stackful (boost.context)", "clang 16"): 3725,
}
# The seed's other tables (no counterpart here; converted for scale): (table, what, operations,
# {(implementation, compiler): ms}).
BOOST_ASYNC_OTHER = [
    ("Table 7", "noop coroutines in parallel: zero-size channel send && receive", 3_000_000,
     {("async", "gcc 12"): 1563, ("async", "clang 16"): 1468,
      ("awaitable", "gcc 12"): 2800, ("awaitable", "clang 16"): 2805}),
    ("Table 8", "immediate completion: size-1 channel send then receive", 10_000_000,
     {("async", "gcc 12"): 1810, ("async", "clang 16"): 1864, ("awaitable", "gcc 12"): 3109,
      ("awaitable", "clang 16"): 4110, ("stackful", "gcc 12"): 3922, ("stackful", "clang 16"): 4705}),
    ("Table 9", "async::channel against asio::experimental::channel", 3_000_000,
     {("async", "gcc"): 500, ("async", "clang"): 350, ("awaitable", "gcc"): 790,
      ("awaitable", "clang"): 770, ("stackful", "gcc"): 867, ("stackful", "clang"): 907}),
    ("Table 10", "associated allocator of an operation", 2_000_000,
     {("std::allocator", "gcc"): 1136, ("std::allocator", "clang"): 1139,
      ("async::monotonic", "gcc"): 1149, ("async::monotonic", "clang"): 1270,
      ("pmr::monotonic", "gcc"): 1164, ("pmr::monotonic", "clang"): 1173,
      ("async::sbo", "gcc"): 1021, ("async::sbo", "clang"): 1060}),
]
AERONET_DEFER_US = (10, 15)              # "about 10 to 15 µs of event loop time per call"
AERONET_ASYNC_NO_SUSPENSION_RPS = 178_000  # Trivial, Async, no suspension, 1 server CPU
AERONET_ASYNC_DEFER_RPS = 53_000           # Trivial, Async + deferWork(), 1 server CPU

SEED_POSTS = (("BM_asio_post_resume_bare", "no I/O object, as the seed"),
              ("BM_asio_post_resume", "a loop holding a listener"),
              ("BM_asio_uring_post_resume_bare", "io_uring backend, no I/O object"),
              ("BM_asio_uring_post_resume", "io_uring backend, a loop holding a listener"))


def boost_async_lines(stats_):
    out = ["boost.async (seeds/003, Table 6: `co_await asio::post` in a loop, \"results for 50M "
           "times in ms\"), converted as ms × 10⁶ / 50,000,000 = ns per post:", "",
           "| implementation | compiler | seed: ms for 50M | seed: ns/post |",
           "| --- | --- | ---: | ---: |"]
    for (impl, compiler), ms in BOOST_ASYNC_POST_MS.items():
        out.append(f"| {impl} | {compiler} | {ms:,} | {ms * 1e6 / BOOST_ASYNC_POSTS:.1f} |")
    seed = BOOST_ASYNC_POST_MS[("awaitable (asio::awaitable)", "gcc 12")] * 1e6 / BOOST_ASYNC_POSTS
    ours = [(n, label) for n, label in SEED_POSTS if n in stats_]
    for name, label in ours:
        post = stats_[name]
        out.append(f"| **here**: `{name}` ({label}) | g++ 12 | "
                   f"{post.real * BOOST_ASYNC_POSTS / 1e6:,.0f} (from the mean) | "
                   f"**{ns(post.real)}** real, {ns(post.cpu)} CPU |")
    out.append("")
    if ours:
        bare = stats_[ours[0][0]]
        out.append(f"`{ours[0][0]}` costs {bare.real / seed:.1f}× the seed's asio::awaitable "
                   f"figure on gcc 12 in real time ({bare.cpu / seed:.1f}× in CPU time). The seed "
                   "does not name its machine, so only the order of magnitude compares.")
    else:
        out.append("(No asio post benchmark in this run: cm-micro was built without Boost.)")
    out += ["", "The seed's other boost.async tables, converted the same way (ms × 10⁶ / "
            "operations); cm-micro has no counterpart to them, they are here for scale:", "",
            "| seed table | what | operations | implementation, compiler: ns/op |",
            "| --- | --- | ---: | --- |"]
    for label, what, count, figures in BOOST_ASYNC_OTHER:
        cells = "; ".join(f"{impl} {compiler}: {ms * 1e6 / count:,.0f}"
                          for (impl, compiler), ms in figures.items())
        out.append(f"| {label} | {what} | {count:,} | {cells} |")
    return out


def aeronet_lines(stats_):
    low, high = (us * 1000 for us in AERONET_DEFER_US)
    derived = (1 / AERONET_ASYNC_DEFER_RPS - 1 / AERONET_ASYNC_NO_SUSPENSION_RPS) * 1e9
    out = [f"aeronet (seeds/000): \"deferWork() costs about {AERONET_DEFER_US[0]} to "
           f"{AERONET_DEFER_US[1]} µs of event loop time per call\", i.e. {low:,}–{high:,} "
           "ns/op, mostly the thread creation. Its own table agrees: on 1 server CPU a trivial "
           f"async handler serves {AERONET_ASYNC_NO_SUSPENSION_RPS:,} requests/s without "
           f"suspension and {AERONET_ASYNC_DEFER_RPS:,} with one deferWork, "
           f"1/{AERONET_ASYNC_DEFER_RPS:,} − "
           f"1/{AERONET_ASYNC_NO_SUSPENSION_RPS:,} s = {derived:,.0f} ns more per request.", "",
           "| offload here | round trip, real ns/op (mean) | loop thread CPU ns/op (mean) "
           "| aeronet: ns/op per deferWork |",
           "| --- | ---: | ---: | ---: |"]
    for name in sorted(n for n in stats_ if n.startswith("BM_offload_")):
        s = stats_[name]
        seed = f"{low:,}–{high:,}" if "thread" in name else "(no pool in aeronet)"
        out.append(f"| `{name}` | {ns(s.real)} | {ns(s.cpu)} | {seed} |")
    return out


def seeds_section(stats_):
    out = ["## The seeds' figures beside ours", ""] + boost_async_lines(stats_) + [""]
    return "\n".join(out + aeronet_lines(stats_))
