"""Profiles, ceilings and the runner's pure parts: what a row is, what binds it, how it starts."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cmharness import ceilings, load, price, profiles  # noqa: E402
from tests.test_claims import cm_load_json  # noqa: E402


def profile(**extra):
    doc = {"name": "t", "rows": [
        {"id": "plaintext", "path": "/plaintext", "connections": [128], "cpu_ceiling": True},
        {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [1000, 4000],
         "sweep": True, "stagger": True},
        {"id": "block", "path": "/block/{ms}", "delay_ms": [100], "connections": [200],
         "stagger": True}]}
    doc.update(extra)
    return profiles.parse(doc)


class Profiles(unittest.TestCase):
    def test_rows_expand_with_the_ceiling_first(self):
        p = profile()
        self.assertEqual([r.key for r in p.rows],
                         ["plaintext - 128", "delay 100 1000", "delay 100 4000", "block 100 200"])
        self.assertEqual(p.rows[1].mean_delay_ms, 100)
        self.assertEqual(p.rows[1].label(), "/delay/100 x 1,000")

    def test_unknown_keys_and_bad_delays_are_refused_by_name(self):
        with self.assertRaisesRegex(profiles.ProfileError, 'unknown key "rounsd"'):
            profile(rounsd=3)
        with self.assertRaisesRegex(profiles.ProfileError, "expected ms"):
            profiles.parse_delay("1.5")
        with self.assertRaisesRegex(profiles.ProfileError, "A <= B"):
            profiles.parse_delay("90:10")
        self.assertEqual(profiles.parse_delay("10:90"), (10, 90))

    def test_overrides_replace_the_sweep_rows_only(self):
        p = profiles.apply_overrides(profile(), connections=[10, 20], rounds=9)
        self.assertEqual(p.rounds, 9)
        self.assertEqual(sorted(r.key for r in p.rows),
                         ["block 100 200", "delay 100 10", "delay 100 20", "plaintext - 128"])

    def test_the_ceiling_window_may_take_the_rows_connections(self):
        self.assertFalse(profile().ceiling_at_row_connections)
        p = profile(ceiling_window={"duration_s": 0.5, "connections": "row"})
        self.assertTrue(p.ceiling_at_row_connections)
        with self.assertRaisesRegex(profiles.ProfileError, "ceiling_window.connections"):
            profile(ceiling_window={"connections": 512})

    def test_timeout_is_three_delays_or_two_seconds(self):
        p = profile()
        self.assertEqual(profiles.timeout_ms(p, p.rows[1]), 2000)
        row = profiles.Row("delay", "/delay/{ms}", 10, delay="500:1000")
        self.assertEqual(profiles.timeout_ms(p, row), 3000)

    def test_a_row_with_a_body_is_a_post_that_expects_it_back(self):
        p = profile(rows=[{"id": "get", "path": "/plaintext", "connections": [100],
                           "cpu_ceiling": True},
                          {"id": "post", "path": "/echo", "body": "Hello", "connections": [100]}])
        get, post = p.rows
        self.assertEqual((get.method, post.method, post.body), ("GET", "POST", "Hello"))
        self.assertEqual(post.label(), "POST /echo x 100")
        self.assertEqual(get.label(), "/plaintext x 100")
        argv = load.command("http://127.0.0.1:1/echo", connections=100, body=post.body)
        self.assertNotIn("--drain", argv)
        self.assertIn("--drain", load.command("http://127.0.0.1:1/db/row/1", connections=1,
                                              drain=True))
        self.assertEqual(argv[argv.index("--body") + 1], "Hello")
        self.assertNotIn("--body", load.command("http://127.0.0.1:1/plaintext", connections=1))
        with self.assertRaisesRegex(profiles.ProfileError, "body is the text a row POSTs"):
            profile(rows=[{"id": "p", "path": "/echo", "body": "x", "connections": [1],
                           "cpu_ceiling": True}])
        with self.assertRaisesRegex(profiles.ProfileError, "body is the text a row POSTs"):
            profile(rows=[{"id": "p", "path": "/echo", "body": 5, "connections": [1]}])

    def test_models_may_be_named(self):
        p = profile(models=["uring_coro"])
        self.assertTrue(profiles.prices_model(p, "uring_coro"))
        self.assertFalse(profiles.prices_model(p, "asio_coro"))
        self.assertFalse(profiles.prices_model(profile(models="async"), "blocking"))
        self.assertTrue(profiles.prices_model(profile(), "blocking"))
        targets, _ = price.plan_targets(p, ["asio_coro", "uring_coro"], peers=False)
        self.assertEqual([t.name for t in targets], ["uring_coro"])
        for bad in ([], ["tokio"], "some"):
            with self.assertRaisesRegex(profiles.ProfileError, "models"):
                profile(models=bad)

    def test_a_variant_may_run_on_some_models_only(self):
        p = profile(variants=[{"name": "pool 16", "server_args": ["--db-pool", "16"]},
                              {"name": "on the loop", "server_args": ["--db-mode", "blocking"],
                               "models": "async"},
                              {"name": "uring only", "models": ["uring_coro"]}])
        targets, _ = price.plan_targets(p, ["blocking", "asio_coro", "uring_coro"], peers=False)
        self.assertEqual([t.label for t in targets],
                         ["blocking (pool 16)", "asio_coro (pool 16)", "asio_coro (on the loop)",
                          "uring_coro (pool 16)", "uring_coro (on the loop)",
                          "uring_coro (uring only)"])
        for bad in ([], "some"):
            with self.assertRaisesRegex(profiles.ProfileError, r"variants\[0\]\.models"):
                profile(variants=[{"name": "x", "models": bad}])
        with self.assertRaisesRegex(profiles.ProfileError, 'unknown key "flags"'):
            profile(variants=[{"name": "x", "flags": []}])

    def test_a_db_route_needs_the_database(self):
        rows = [{"id": "plaintext", "path": "/plaintext", "connections": [128], "cpu_ceiling": True},
                {"id": "db", "path": "/db/sleep/{ms}", "delay_ms": [10], "connections": [2000]}]
        self.assertTrue(profile(rows=rows, database=True).database)
        self.assertFalse(profile().database)
        with self.assertRaisesRegex(profiles.ProfileError, '/db/ route needs "database": true'):
            profile(rows=rows)
        with self.assertRaisesRegex(profiles.ProfileError, "database: true or false"):
            profile(rows=rows, database="yes")
        self.assertEqual(profile(rows=rows, database=True).rows[1].mean_delay_ms, 10)

    def test_every_committed_profile_parses(self):
        for name in ("quick", "delay-sweep", "arena", "offload", "seed-echo", "db"):
            p = profiles.load(name)
            self.assertTrue(p.rows[0].cpu_ceiling, name)
            self.assertGreaterEqual(p.rounds, 6, f"{name}: a 95% interval needs 6 rounds")


class Ceilings(unittest.TestCase):
    def test_the_lowest_ceiling_binds(self):
        c = ceilings.compute(2000, 100, threads=None, cpu_rps=80000)
        self.assertEqual((c.connection, c.cpu, c.bound()), (20000, 80000, "connections"))
        self.assertAlmostEqual(ceilings.efficiency(19800, c), 0.99)

    def test_a_tie_names_both(self):
        c = ceilings.compute(64, 100, threads=64, cpu_rps=50000)
        self.assertEqual(c.bound(), "connections = threads")

    def test_a_tie_the_threads_forced_reads_as_the_threads(self):
        # 16,000 connections offered, 64 opened (the rest wait in the backlog): threads bind
        self.assertEqual(ceilings.binding_label("connections = threads", 16000, 100, 640), "threads")
        self.assertEqual(ceilings.binding_label("connections = threads or threads", 4000, 100, 640),
                         "threads")

    def test_a_tie_the_offered_connections_reach_stays_a_tie(self):
        # 64 connections on a pool of 64: either ceiling binds
        self.assertEqual(ceilings.binding_label("connections = threads", 64, 1, 64000),
                         "connections = threads")
        self.assertEqual(ceilings.binding_label("connections or cpu", 16000, 100, None),
                         "connections or cpu")

    def test_cpu_work_is_bounded_by_the_work_alone(self):
        # the work alone bounds a /cpu/N row, whatever /plaintext measured
        c = ceilings.compute(64, 0, cpu_rps=100000, compute_us=50)
        self.assertAlmostEqual(c.cpu, 20000)
        self.assertAlmostEqual(ceilings.compute(64, 0, cpu_rps=10000, compute_us=50).cpu, 20000)
        self.assertAlmostEqual(ceilings.compute(64, 0, compute_us=50, server_cpus=2).cpu, 40000)

    def test_which_threads_a_waiting_request_holds(self):
        wt = ceilings.waiting_threads
        self.assertEqual(wt("blocking", "/delay/10", workers=64), 64)
        self.assertIsNone(wt("async", "/delay/10"))
        self.assertEqual(wt("async", "/delay/10", loops=2, wait_mode="sleep"), 2)
        self.assertEqual(wt("async", "/block/1", pool=16), 16)
        self.assertEqual(wt("async", "/block/1", loops=1, offload="inline"), 1)
        self.assertIsNone(wt("async", "/block/1", offload="thread"))
        self.assertIsNone(wt("peer", "/delay/10"))
        self.assertIsNone(wt("peer", "/block/10", peer="nginx"))
        self.assertIsNone(wt("peer", "/delay/10", peer="tokio"))
        self.assertEqual(wt("peer", "/block/10", peer="tokio"), 512)  # spawn_blocking's pool
        self.assertEqual(wt("peer", "/block/10", peer="go"), 10000)  # SetMaxThreads


    def test_the_database_pool_is_a_ceiling_of_its_own(self):
        # 2,000 connections waiting 10 ms on 16 database connections: 1,600 a second
        c = ceilings.compute(2000, 10, threads=None, cpu_rps=30000, db_connections=16)
        self.assertEqual((c.connection, c.database, c.bound()), (200000, 1600, "database"))
        self.assertAlmostEqual(ceilings.efficiency(1584, c), 0.99)
        # the blocking model with 64 workers on 16 connections: the pool binds, not the threads
        c = ceilings.compute(2000, 10, threads=64, db_connections=16)
        self.assertEqual((c.thread, c.bound()), (6400, "database"))
        # no delay (/db/row/N): no database ceiling, the CPU binds
        self.assertIsNone(ceilings.compute(256, 0, cpu_rps=30000, db_connections=16).database)

    def test_which_database_connections_and_threads_a_db_request_holds(self):
        dc, wt = ceilings.database_connections, ceilings.waiting_threads
        self.assertEqual(dc("async", "/db/sleep/10", db_pool=16, loops=2), 32)  # a pool per loop
        self.assertEqual(dc("async", "/db/sleep/10", db_pool=16, loops=2, db_mode="pool"), 16)
        self.assertEqual(dc("blocking", "/db/sleep/10", db_pool=4, loops=64), 4)
        self.assertIsNone(dc("async", "/delay/10", db_pool=16))
        self.assertIsNone(dc("peer", "/db/sleep/10", db_pool=16))
        self.assertIsNone(wt("async", "/db/sleep/10"))  # readiness: the loop goes on
        self.assertEqual(wt("async", "/db/sleep/10", loops=1, db_mode="blocking"), 1)
        self.assertEqual(wt("async", "/db/sleep/10", pool=64, db_mode="pool"), 64)
        self.assertEqual(wt("blocking", "/db/row/42", workers=64), 64)


class Runner(unittest.TestCase):
    def test_stagger_spreads_the_threads_phases_over_one_delay(self):
        row = profiles.Row("block", "/block/{ms}", 200, delay="100", stagger=True)
        self.assertEqual(price.stagger_ms(row, threads=64, cap_ms=4000), 100 * 200 / 64)
        self.assertEqual(price.stagger_ms(row, threads=None, cap_ms=4000), 100)
        big = profiles.Row("delay", "/delay/{ms}", 16000, delay="100", stagger=True)
        self.assertEqual(price.stagger_ms(big, threads=64, cap_ms=4000), 4000)
        plain = profiles.Row("plaintext", "/plaintext", 128)
        self.assertEqual(price.stagger_ms(plain, threads=None, cap_ms=4000), 0)

    def test_settle_waits_until_the_server_answers_promptly(self):
        class Busy:
            calls = 0

            def get(self, path, timeout):
                self.calls += 1
                if self.calls <= 2:  # two slow answers: a backlog still being worked off
                    time.sleep(0.08)

        busy = Busy()
        waited = price.settle(busy, prompt_s=0.05)
        self.assertEqual(busy.calls, 3)
        self.assertGreaterEqual(waited, 0.16)

    def test_a_window_cm_load_could_not_open_is_an_error_not_a_crash(self):
        """A server that took no connection (its loop stuck): cm-load writes a result with no
        window, and the row is an error naming it."""
        class Stuck:
            def cpu_seconds(self):
                return 1.0

        doc = cm_load_json(0, 128)
        doc.update(duration_s=0.0, connections_open=0, requests=0)
        empty = load.LoadResult.from_json(doc)
        targets, _ = price.plan_targets(profile(), ["asio_coro"], peers=False)
        r = price.Runner(profile(), price.Settings("bin", "work", [0], [1], progress=False), targets)
        m = price.Measurement(0, 0, profile().rows[0])
        r._run_window(m, Stuck(), lambda on_poll: load.LoadRun(
            empty, "exit 1", None, "cm-load: no connection could be opened", 30.0))
        self.assertIn("no window measured: cm-load: no connection could be opened", m.error)
        self.assertFalse(m.ok)

    def test_cpu_between_interpolates(self):
        samples = [(0.0, 0.0), (1.0, 0.5), (2.0, 1.5)]
        self.assertAlmostEqual(price.cpu_between(samples, 0.5, 1.5), 1.0 - 0.25)
        self.assertAlmostEqual(price.cpu_between(samples, -1, 5), 1.5)
        self.assertEqual(price.cpu_between([], 0, 1), 0)

    def test_targets_and_their_rows(self):
        p = profile(peers=["nginx", "node"], variants=[{"name": "inline"}, {"name": "pool"}])
        targets, skipped = price.plan_targets(p, ["blocking", "asio_coro"], peers=False)
        self.assertEqual([t.label for t in targets], ["blocking (inline)", "blocking (pool)",
                                                      "asio_coro (inline)", "asio_coro (pool)"])
        self.assertEqual(skipped, [])
        nginx = price.Target("nginx", profiles.Variant("-"))
        node = price.Target("node", profiles.Variant("-"))
        self.assertEqual([r.id for r in price.rows_for(nginx, p.rows)], ["plaintext"])
        self.assertEqual([r.id for r in price.rows_for(node, p.rows)],
                         ["plaintext", "delay", "delay"])
        with self.assertRaisesRegex(profiles.ProfileError, "not a built model"):
            price.plan_targets(p, ["blocking"], only=["nope"])

    def test_a_variant_takes_its_ceiling_from_the_first_variant(self):
        p = profile(variants=[{"name": "inline", "server_args": ["--offload", "inline"]},
                              {"name": "pool", "server_args": ["--offload", "pool"]}])
        targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
        s = price.Settings("bin", "work", [0], [1])
        r = price.Runner(p, s, targets)
        inline, pool = targets
        self.assertIs(r.ceiling_source(pool), inline)
        self.assertTrue(r.is_ceiling(inline, p.rows[0]))
        self.assertFalse(r.is_ceiling(pool, p.rows[0]))
        self.assertEqual(pool.arg("--offload", "standard"), "pool")


    def test_a_profile_may_price_each_variant_against_its_own_ceiling(self):
        p = profile(variants=[{"name": "model", "server_args": ["--timers", "model"]},
                              {"name": "wheel", "server_args": ["--timers", "wheel"]}],
                    ceiling_window={"per_variant": True})
        targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
        r = price.Runner(p, price.Settings("bin", "work", [0], [1]), targets)
        model, wheel = targets
        self.assertIs(r.ceiling_source(wheel), wheel)
        self.assertTrue(r.is_ceiling(wheel, p.rows[0]))

    def test_a_variants_ceiling_window_takes_the_rows_connections(self):
        """A variant priced against its first variant's server still gets the CPU ceiling at the
        row's connections when the profile asks for it (the ceiling at 18,000 connections is
        not the one at 128)."""
        p = profile(rounds=1, variants=[{"name": "a"}, {"name": "b"}],
                    ceiling_window={"connections": "row"})
        targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
        seen = []

        class Windows(price.Runner):
            def measure(self, target, server, row, rnd, *, duration_s, warmup_s, extra=()):
                seen.append((target.label, row.cpu_ceiling, row.connections))
                return price.Measurement(rnd, 0, row, window_s=1.0, result=load.LoadResult.from_json(
                    cm_load_json(50_000, row.connections, row.mean_delay_ms)))

        r = Windows(p, price.Settings("bin", "work", [0], [1], progress=False), targets)
        first, second = targets
        r.servers[first.label] = None
        delay = next(row for row in p.rows if not row.cpu_ceiling)
        r.row_on(second, None, delay, 0)
        self.assertIn((first.label, True, delay.connections), seen)


    def test_a_variant_may_ask_for_longer_windows_than_the_profiles(self):
        """A variant whose answers leave in batches (Asio's io_uring backend, 128 at a time, with
        the database driver on its loop) is measured in windows of many batches; its CPU-ceiling
        windows and the other variants' rows keep the profile's."""
        p = profile(rounds=1, duration_s=1.0,
                    variants=[{"name": "a"}, {"name": "slow", "min_duration_s": 20}])
        self.assertEqual([p.window_s(v) for v in p.variants], [1.0, 20.0])
        self.assertEqual(profile(duration_s=30, variants=[{"name": "slow", "min_duration_s": 20}])
                         .window_s(profiles.Variant("slow", min_duration_s=20)), 30)
        for bad in (0, -1, "20"):
            with self.assertRaisesRegex(profiles.ProfileError, r"variants\[0\]\.min_duration_s"):
                profile(variants=[{"name": "x", "min_duration_s": bad}])
        targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
        seen = []

        class Windows(price.Runner):
            def measure(self, target, server, row, rnd, *, duration_s, warmup_s, extra=()):
                seen.append((target.variant.name, row.cpu_ceiling, duration_s))
                return price.Measurement(rnd, 0, row, window_s=1.0, result=load.LoadResult.from_json(
                    cm_load_json(50_000, row.connections, row.mean_delay_ms)))

        r = Windows(p, price.Settings("bin", "work", [0], [1], progress=False), targets)
        delay = next(row for row in p.rows if not row.cpu_ceiling)
        for t in targets:
            r.servers[t.label] = None
            r.row_on(t, None, delay, 0)
        rows = [(name, d) for name, ceiling, d in seen if not ceiling]
        self.assertEqual(rows, [("a", 1.0), ("slow", 20.0)])
        self.assertEqual({d for _, ceiling, d in seen if ceiling}, {p.ceiling_duration_s})


class AFailedCeiling(unittest.TestCase):
    """A row whose back-to-back CPU-ceiling window failed has nothing to be priced against: the
    round is an error, not an efficiency against the next ceiling up (connections / delay)."""

    class Windows(price.Runner):
        def __init__(self, p, ceiling_error):
            targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
            super().__init__(p, price.Settings("bin", "work", [0], [1], progress=False), targets)
            self.ceiling_error = ceiling_error

        def measure(self, target, server, row, rnd, *, duration_s, warmup_s, extra=()):
            if row.cpu_ceiling:
                return price.Measurement(rnd, 0, row, error=self.ceiling_error) \
                    if self.ceiling_error else price.Measurement(
                        rnd, 0, row, window_s=1.0,
                        result=load.LoadResult.from_json(cm_load_json(50_000, 128, 0)))
            return price.Measurement(rnd, 0, row, window_s=1.0, result=load.LoadResult.from_json(
                cm_load_json(40_000, row.connections, row.mean_delay_ms)))

    def row(self, ceiling_error):
        p = profile(rounds=1)
        r = self.Windows(p, ceiling_error)
        delay = next(row for row in p.rows if not row.cpu_ceiling)
        return r.row_on(r.targets[0], None, delay, 0)

    def test_the_round_is_an_error_naming_the_ceilings_failure(self):
        m = self.row("cm-load exit 2: --window-at: the window was due 300 ms before ...")
        self.assertFalse(m.ok)
        self.assertIn("its CPU ceiling window failed: cm-load exit 2", m.error)

    def test_a_ceiling_that_was_measured_prices_the_row(self):
        m = self.row("")
        self.assertTrue(m.ok)
        self.assertEqual(m.cpu_ceiling_rps, 50_000)


class Bracketing(unittest.TestCase):
    """A row's CPU ceiling is the largest of windows right before and after it; more after while
    the row still answered above them; a round above them all is a defect, not a figure."""

    class Windows(price.Runner):
        def __init__(self, p, ceilings, row_rps):
            targets, _ = price.plan_targets(p, ["asio_coro"], peers=False)
            super().__init__(p, price.Settings("bin", "work", [0], [1], progress=False), targets)
            self.ceilings, self.row_rps, self.windows = list(ceilings), row_rps, []
            self.shapes = []  # each ceiling window's row and warm-up

        def measure(self, target, server, row, rnd, *, duration_s, warmup_s, extra=()):
            rps = self.ceilings.pop(0) if row.cpu_ceiling else self.row_rps
            if row.cpu_ceiling:
                self.windows.append(row.connections)
                self.shapes.append((row.label(), warmup_s))
            return price.Measurement(rnd, 0, row, window_s=1.0, result=load.LoadResult.from_json(
                cm_load_json(rps, row.connections, row.mean_delay_ms)))

    def run_row(self, ceilings, row_rps, server=None, **extra):
        # 100,000 connections waiting 100 ms: a connection ceiling of 1M, far above the CPU's
        p = profile(rounds=1, rows=[
            {"id": "plaintext", "path": "/plaintext", "connections": [128], "cpu_ceiling": True},
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [100000]}],
            **extra)
        r = self.Windows(p, ceilings, row_rps)
        m = r.row_on(r.targets[0], server, p.rows[1], 0, fresh=server is not None)
        price.price(m, r.targets[0], p, r.settings)
        return m, r

    def test_a_profile_may_alternate_plaintext_and_delay_windows_around_a_delay_row(self):
        """ceiling_window.delay_ms: the window after a /delay row is /delay/N with as many
        connections, the next /plaintext again; the row is priced against the largest."""
        m, r = self.run_row([48_000, 52_000, 61_000, 99_999], 60_000,
                            ceiling_window={"connections": "row", "delay_ms": 1})
        self.assertEqual([label for label, _ in r.shapes], ["/plaintext x 100,000",
                                                            "/delay/1 x 100,000",
                                                            "/plaintext x 100,000"])
        self.assertEqual(m.cpu_ceiling_rps, 61_000)
        self.assertFalse(m.defect)

    def test_only_a_delay_row_gets_delay_windows(self):
        p = profile(ceiling_window={"delay_ms": 1})
        shape = [price.ceiling_shape(p, p.rows[0], p.rows[-1], i).label() for i in range(3)]
        self.assertEqual(shape, ["/plaintext x 128"] * 3)  # the /block row
        shape = [price.ceiling_shape(p, p.rows[0], p.rows[1], i).label() for i in range(3)]
        self.assertEqual(shape, ["/plaintext x 128", "/delay/1 x 128", "/plaintext x 128"])
        plain = profile()
        self.assertEqual(price.ceiling_shape(plain, p.rows[0], p.rows[1], 1).label(),
                         "/plaintext x 128")

    def test_a_fresh_servers_first_ceiling_window_is_warmed_longer(self):
        class Fresh:
            def readings(self):
                return proc_readings

        proc_readings = type("Readings", (), {"rss_kib": 4096})()
        m, r = self.run_row([48_000, 55_000], 50_000, server=Fresh(),
                            ceiling_window={"warmup_s": 0.25, "fresh_warmup_s": 2})
        self.assertEqual([warm for _, warm in r.shapes], [2.25, 0.25])
        self.assertEqual(m.rss_before_kib, 4096)  # the idle reading, before any window
        _, kept = self.run_row([48_000, 55_000], 50_000,
                               ceiling_window={"warmup_s": 0.25, "fresh_warmup_s": 2})
        self.assertEqual([warm for _, warm in kept.shapes], [0.25, 0.25])  # a server kept running

    def test_the_row_is_priced_against_the_larger_of_before_and_after(self):
        m, _ = self.run_row([48_000, 55_000, 99_999], 50_000)
        self.assertEqual(m.ceiling_windows, [48_000, 55_000])
        self.assertEqual(m.cpu_ceiling_rps, 55_000)
        self.assertAlmostEqual(m.efficiency, 50_000 / 55_000)
        self.assertFalse(m.defect)
        self.assertTrue(m.counted)

    def test_a_row_still_above_gets_more_windows_and_is_a_defect_past_them_all(self):
        m, _ = self.run_row([48_000, 50_000, 52_000, 53_000, 99_999], 60_000)
        self.assertEqual(len(m.ceiling_windows), price.MAX_CEILING_WINDOWS)
        self.assertEqual(m.cpu_ceiling_rps, 53_000)
        self.assertIn("defect", m.defect)
        self.assertFalse(m.counted)
        self.assertIn("more-ceiling-windows", [k for k, _ in m.notes])

    def test_a_later_window_that_bounds_the_row_ends_the_search(self):
        m, _ = self.run_row([48_000, 49_000, 61_000, 70_000], 60_000)
        self.assertEqual(m.ceiling_windows, [48_000, 49_000, 61_000])
        self.assertFalse(m.defect)

    def test_within_half_a_percent_of_its_ceiling_a_row_is_counted(self):
        m, _ = self.run_row([49_000, 49_900], 50_000)
        self.assertEqual(len(m.ceiling_windows), 2)
        self.assertFalse(m.defect)

    def test_at_the_rows_connections_the_ceiling_is_measured_there_whatever_the_sprint(self):
        """A profile that prices at the row's shape draws its ceiling at every point: no sprint
        window stands in for it, however far above the other ceilings it lies."""
        p = profile(rounds=1, ceiling_window={"connections": "row"})
        r = self.Windows(p, [], 0)
        sprint = price.Measurement(0, 0, p.rows[0], window_s=1.0, is_ceiling=True,
                                   result=load.LoadResult.from_json(cm_load_json(500_000)))
        r.measurements[("asio_coro", p.rows[0].key)] = [sprint]
        self.assertIsNone(r.sprint_ceiling(r.targets[0], p.rows[1], 0))
        q = profile(rounds=1)
        r2 = self.Windows(q, [], 0)
        r2.measurements[("asio_coro", q.rows[0].key)] = [sprint]
        self.assertEqual(r2.sprint_ceiling(r2.targets[0], q.rows[1], 0), 500_000)


class MoreRounds(unittest.TestCase):
    """A row the planned rounds leave undecided gets more, up to max_rounds; a decided one not."""

    class Scripted(price.Runner):
        """The Runner's rounds with each window's efficiency scripted, no server started."""

        def __init__(self, p, script):
            targets, _ = price.plan_targets(p, ["asio_coro", "uring_coro"], peers=False)
            super().__init__(p, price.Settings("bin", "work", [0], [1], progress=False), targets)
            self.script = script  # label -> efficiency of each round, in turn

        def validate_all(self):
            pass

        def sprint(self, rnd):
            pass

        def measure_row(self, target, row, rnd):
            """A window at the scripted share of the connections' ceiling (1,000 / 100 ms)."""
            rps = self.script[target.label][rnd] * 10_000
            m = price.Measurement(rnd, 0, row, window_s=1.0, result=load.LoadResult.from_json(
                cm_load_json(rps, row.connections, row.mean_delay_ms)))
            m.cpu_ceiling_rps = 1e6
            return m

    def test_a_wide_interval_gets_more_rounds_until_it_narrows_or_max_rounds(self):
        p = profile(rounds=6, max_rounds=12, rows=[
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [1000]}])
        steady = [0.99, 0.98, 0.99, 1.0, 0.97, 0.99] + [0.99] * 6
        # one disturbed round sets a 6-round interval (min..max); more rounds trim it
        disturbed = [0.9, 0.2, 0.95, 0.92, 0.91, 0.93] + [0.92, 0.94, 0.9, 0.93, 0.91, 0.92]
        r = self.Scripted(p, {"asio_coro": steady, "uring_coro": disturbed}).run()
        key = p.rows[0].key
        self.assertEqual(len(r.measurements[("asio_coro", key)]), 6)
        wide = r.measurements[("uring_coro", key)]
        self.assertGreater(len(wide), 6)
        self.assertLessEqual(len(wide), 12)
        self.assertEqual([m.round for m in wide], list(range(len(wide))))
        self.assertEqual(price.undecided(r.measurements), set())

    def test_without_max_rounds_the_planned_rounds_are_all(self):
        p = profile(rounds=6, rows=[
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [1000]}])
        wild = [0.1, 0.9, 0.2, 0.8, 0.3, 0.7] * 2
        r = self.Scripted(p, {"asio_coro": wild, "uring_coro": wild}).run()
        self.assertEqual({len(v) for v in r.measurements.values()}, {6})
        self.assertEqual(price.undecided(r.measurements),
                         {("asio_coro", p.rows[0].key), ("uring_coro", p.rows[0].key)})

    def test_a_round_above_its_ceiling_is_measured_again(self):
        p = profile(rounds=6, max_rounds=12, rows=[
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [1000]}])
        steady = [0.99, 0.98, 0.99, 1.0, 0.97, 0.99] + [0.99] * 6
        # round 2 answers 20% above connections / delay: a defect, so a seventh round is measured
        one_defect = [0.99, 0.98, 1.2, 1.0, 0.97, 0.99] + [0.98] * 6
        r = self.Scripted(p, {"asio_coro": steady, "uring_coro": one_defect}).run()
        key = p.rows[0].key
        self.assertEqual(len(r.measurements[("asio_coro", key)]), 6)
        again = r.measurements[("uring_coro", key)]
        self.assertEqual(len(again), 7)
        self.assertTrue(again[2].defect)
        self.assertEqual(sum(m.counted for m in again), 6)
        self.assertEqual(price.undecided(r.measurements, planned=6), set())

    def test_defects_are_measured_again_only_up_to_max_rounds(self):
        p = profile(rounds=6, max_rounds=8, rows=[
            {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [1000]}])
        steady = [0.99] * 8
        always_above = [1.28] * 8  # a window too short for the server's bursts: never priceable
        r = self.Scripted(p, {"asio_coro": steady, "uring_coro": always_above}).run()
        rounds = r.measurements[("uring_coro", p.rows[0].key)]
        self.assertEqual(len(rounds), 8)
        self.assertTrue(all(m.defect for m in rounds))

    def test_a_row_with_every_round_failed_is_left_alone(self):
        row = profiles.Row("delay", "/delay/{ms}", 1000, delay="100")
        failed = [price.Measurement(k, k, row, error="could not start") for k in range(6)]
        self.assertEqual(price.undecided({("m", row.key): failed}), set())


if __name__ == "__main__":
    unittest.main()
