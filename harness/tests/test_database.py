"""The project's throwaway PostgreSQL cluster (cmharness/database.py, harness/db-cluster): it
starts with nothing to configure, holds World with the rows every model will answer, answers
pg_sleep with the value asked for, is reachable by its conninfo and its URI, and leaves nothing
running once stopped. Skipped where PostgreSQL is not installed."""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)

from cmharness import database  # noqa: E402

TOOL = os.path.join(HARNESS, "db-cluster")


def psql(target, sql):
    """psql's unaligned output of sql on the cluster a conninfo or URI names."""
    done = subprocess.run([os.path.join(database.bin_dir(), "psql"), target, "-X", "-A", "-t",
                           "-c", sql], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


@unittest.skipUnless(database.bin_dir(), "PostgreSQL is not installed (scripts/install-deps)")
class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.db = database.Cluster(rows=1000)
        cls.db.start()

    @classmethod
    def tearDownClass(cls):
        cls.db.stop()

    def test_world_holds_its_rows_each_a_fixed_function_of_its_id(self):
        self.assertEqual(self.db.sql("SELECT count(*), min(id), max(id) FROM world"),
                         "1000|1|1000")
        for row_id in (1, 42, 1000):
            self.assertEqual(self.db.sql(f"SELECT randomnumber FROM world WHERE id = {row_id}"),
                             str(database.world_number(row_id)))

    def test_the_conninfo_and_the_uri_both_reach_it(self):
        self.assertEqual(psql(self.db.conninfo, "SELECT current_user, current_database()"),
                         "cm|cm")
        self.assertTrue(self.db.uri.startswith("postgresql://cm@127.0.0.1:"))
        self.assertEqual(psql(self.db.uri, "SELECT 1"), "1")

    def test_a_sleep_answers_the_value_it_was_asked_for(self):
        self.assertEqual(self.db.sql("SELECT 25::int FROM pg_sleep(25 / 1000.0)"), "25")

    def test_the_database_counts_the_queries_it_ran(self):
        self.db.sql("SELECT pg_stat_statements_reset()")
        for _ in range(3):
            self.db.sql("SELECT randomnumber FROM world WHERE id = 7")
        calls = self.db.sql("SELECT calls FROM pg_stat_statements "
                            "WHERE query LIKE 'SELECT randomnumber FROM world%'")
        self.assertEqual(calls, "3")


    def test_a_tally_counts_the_route_queries_once_they_complete(self):
        tally = self.db.tally()
        for ms in (5, 6):
            self.db.sql(f"SELECT {ms}::int FROM pg_sleep({ms}::int / 1000.0)")
        self.db.sql("SELECT id, randomnumber FROM world WHERE id = 7")
        self.db.sql("SELECT count(*) FROM world")  # not a /db route's statement: not counted
        # A query a server still runs (cm-server's application name) is waited for, then counted.
        env = dict(os.environ, PGAPPNAME="cm-server")
        psql = [os.path.join(database.bin_dir(), "psql"), self.db.conninfo, "-X", "-A", "-t"]
        running = subprocess.Popen(
            psql + ["-c", "SELECT 400::int FROM pg_sleep(400::int / 1000.0)"], env=env,
            stdout=subprocess.DEVNULL)
        # The database's CPU is read from its processes: a backend that lives on past the tally,
        # as a pool's connection does, with CPU enough to see (a short psql's backend exits with
        # its CPU before finish(), and pg_sleep spends none).
        held = subprocess.Popen(psql, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held.stdin.write("SELECT count(*) FROM generate_series(1, 3000000);\n")
        held.stdin.flush()
        self.assertEqual(held.stdout.readline().strip(), "3000000")
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.db.sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cm-server' "
                    "AND state = 'active'") == "0":
                time.sleep(0.01)
            count = tally.finish()
        finally:
            running.wait(timeout=30)
            held.stdin.close()
            held.wait(timeout=30)
        self.assertTrue(count.idle)
        self.assertEqual(count.queries, 4)
        self.assertGreater(count.cpu_s, 0)
        # pg_sleep's waits are the database's own time: 5 + 6 + 400 ms, and a little more
        self.assertGreaterEqual(count.exec_ms, 411)
        self.assertLess(count.exec_ms, 411 + 1000)

    def test_a_tally_starts_once_the_row_before_stopped_querying(self):
        """A server still working through its queue after its clients left (the driver on the
        loop) queries with gaps between queries: the next row's count starts after the last."""
        psql_bin = os.path.join(database.bin_dir(), "psql")
        query = "SELECT 10::int FROM pg_sleep(10::int / 1000.0)"
        leftover = subprocess.Popen(
            ["bash", "-c", f'for i in $(seq 12); do "{psql_bin}" "$0" -X -A -t -c "{query}"; done',
             self.db.conninfo], env=dict(os.environ, PGAPPNAME="cm-server"),
            stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.2)  # it has begun
            tally = self.db.tally()
            self.assertIsNotNone(leftover.poll(), "the count started while it still queried")
            count = tally.finish()
        finally:
            leftover.wait(timeout=60)
        self.assertTrue(tally.quiet_at_start)
        self.assertEqual(count.queries, 0)

    def test_its_processes_run_on_the_cpus_it_was_given(self):
        cpus = sorted(os.sched_getaffinity(0))[-1:]
        with database.Cluster(rows=10, cpus=cpus) as db:
            self.assertEqual(os.sched_getaffinity(db.running()), set(cpus))
            self.assertIn(f"on CPU {cpus[0]}", db.describe())


@unittest.skipUnless(database.bin_dir(), "PostgreSQL is not installed (scripts/install-deps)")
class StopAndToolTest(unittest.TestCase):
    def test_stop_leaves_nothing_running_and_no_folder(self):
        db = database.Cluster(rows=10)
        db.start()
        pid = db.running()
        self.assertTrue(pid)
        db.stop()
        self.assertIsNone(db.running())
        self.assertFalse(database.alive(pid), "the postmaster runs on")
        self.assertFalse(os.path.exists(db.dir))

    def test_run_gives_the_command_its_conninfo_and_its_status(self):
        count = ("psql \"$CM_DB\" -XAtc 'SELECT count(*) FROM world' && "
                 "psql \"$CM_DB_URI\" -XAtc 'SELECT 1'")
        path = database.bin_dir() + ":" + os.environ["PATH"]
        done = subprocess.run([TOOL, "run", "--rows", "20", "--", "sh", "-c", count],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PATH=path))
        self.assertEqual((done.returncode, done.stdout), (0, "20\n1\n"), done.stderr)
        done = subprocess.run([TOOL, "run", "--rows", "1", "--", "sh", "-c", "exit 3"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 3, done.stderr)

    def test_start_leaves_it_running_and_stop_removes_it(self):
        with tempfile.TemporaryDirectory() as parent:
            os.chmod(parent, 0o755)  # the user postgres (when run as root) reaches the folder
            folder = os.path.join(parent, "db")
            started = subprocess.run([TOOL, "start", "--dir", folder, "--rows", "5"],
                                     capture_output=True, text=True, timeout=120)
            self.assertEqual(started.returncode, 0, started.stderr)
            conninfo = started.stdout.strip()
            with open(os.path.join(folder, "conninfo")) as f:
                self.assertEqual(f.read().strip(), conninfo)
            try:
                self.assertEqual(psql(conninfo, "SELECT count(*) FROM world"), "5")
            finally:
                stopped = subprocess.run([TOOL, "stop", "--dir", folder], capture_output=True,
                                         text=True, timeout=120)
            self.assertEqual(stopped.returncode, 0, stopped.stderr)
            self.assertFalse(os.path.exists(folder))

    def test_bad_use_is_a_clear_error(self):
        done = subprocess.run([TOOL, "run"], capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 2)
        self.assertIn("no command given", done.stderr)
        done = subprocess.run([TOOL, "stop", "--dir", "/nonexistent/cm-db"], capture_output=True,
                              text=True, timeout=30)
        self.assertEqual(done.returncode, 2)
        self.assertIn("holds no cluster", done.stderr)


if __name__ == "__main__":
    unittest.main()
