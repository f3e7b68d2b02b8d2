"""A throwaway PostgreSQL cluster for the project: the database a `/db` route waits on.

    with database.Cluster() as db:        # initdb in a temporary folder, started, filled
        db.conninfo                       # "host=/tmp/cm-pg-.../socket port=... dbname=cm user=cm"
        db.uri                            # "postgresql://cm@127.0.0.1:PORT/cm" (TCP, loopback)
        db.sql("SELECT count(*) FROM world")
    # stopped (pg_ctl stop -m fast), its folder removed: nothing left running

PostgreSQL comes from Debian (scripts/install-deps installs postgresql; its programs live in
/usr/lib/postgresql/VERSION/bin, the newest is used, or PG_BIN's). The cluster listens on a Unix
socket in its own folder and on a free port of 127.0.0.1, with trust authentication for the one
user `cm`, no durability (fsync off: nothing in it outlives the run) and room for 1,000
connections (cm-price's db profile keeps 23 servers running, each with its pools). It is made as
the user `postgres` when run as root, since the server refuses to run as root. Its database `cm` holds
TechEmpower's table `World`: `world(id, randomnumber)`, rows 1..WORLD_ROWS, each randomnumber a
fixed function of its id (world_number), so every model's `/db/row/{id}` answers the same bytes and
a test knows them. pg_stat_statements is loaded, so a run can count the queries the database ran.
"""

import atexit
import dataclasses
import glob
import os
import shutil
import subprocess
import tempfile
import time

from . import proc, servers

WORLD_ROWS = 10000
USER = "cm"
DATABASE = "cm"
SETTINGS = ("listen_addresses=127.0.0.1", "fsync=off", "synchronous_commit=off",
            "full_page_writes=off", "max_connections=1000",
            "shared_preload_libraries=pg_stat_statements")


#: How the two statements of the /db routes begin (common/src/database.cpp), as
#: pg_stat_statements records them: the queries a run counts.
SLEEP_SQL_START = "SELECT $1::int FROM pg_sleep("
ROW_SQL_START = "SELECT id, randomnumber FROM world WHERE id ="


def world_number(row_id):
    """The randomnumber of World's row `row_id`: fixed, spread over 1..WORLD_ROWS."""
    return row_id * 7919 % WORLD_ROWS + 1


def alive(pid):
    """Whether process pid runs: it exists and is not a zombie (an exited process its parent has
    not reaped yet: a stopped postmaster's parent is init, which may reap it late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def bin_dir():
    """The folder of PostgreSQL's programs (PG_BIN, or Debian's newest), or None."""
    if os.environ.get("PG_BIN"):
        return os.environ["PG_BIN"]
    found = glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
    found.sort(key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


class Cluster:
    """One PostgreSQL cluster in a folder of its own (`directory`, or a new temporary one)."""

    def __init__(self, directory=None, rows=WORLD_ROWS, cpus=()):
        self.cpus = list(cpus)  # the CPUs its processes run on (none: any)
        self.bin = bin_dir()
        if not self.bin:
            raise RuntimeError("PostgreSQL is not installed (scripts/install-deps installs "
                               "postgresql)")
        self.owned = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="cm-pg-")
        self.data = os.path.join(self.dir, "data")
        self.socket_dir = os.path.join(self.dir, "socket")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.rows = rows
        self.port = None
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    # -- the connection strings a server is given ----------------------------------------------

    @property
    def conninfo(self):
        return f"host={self.socket_dir} port={self.port} dbname={DATABASE} user={USER}"

    @property
    def uri(self):
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    # -- life ------------------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *_):
        self.stop()

    def start(self):
        """initdb, start on a free port (three tries: another process may take the port between
        its choice and the start), create the database and fill World. Returns the conninfo."""
        os.makedirs(self.socket_dir, exist_ok=True)
        if self.as_user:
            shutil.chown(self.dir, "postgres")
            shutil.chown(self.socket_dir, "postgres")
        atexit.register(self.stop)
        self._as_postgres("initdb", "-D", self.data, "--auth=trust", f"--username={USER}",
                          "--encoding=UTF8", "--locale=C", "--no-sync")
        for _ in range(3):
            self.port = servers.free_port()
            options = " ".join([f"-p {self.port}", f"-k {self.socket_dir}"] +
                               [f"-c {s}" for s in SETTINGS])
            started = self._as_postgres("pg_ctl", "-D", self.data, "-l", self.log_path, "-w",
                                        "-t", "30", "-o", options, "start", check=False)
            if started.returncode == 0:
                break
        else:
            raise RuntimeError(f"PostgreSQL did not start: {self.log_tail()}")
        self.sql(f"CREATE DATABASE {DATABASE}", database="postgres")
        self.sql("CREATE EXTENSION pg_stat_statements;"
                 "CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL);"
                 "INSERT INTO world SELECT i, i * 7919 % " + str(WORLD_ROWS) + " + 1 "
                 f"FROM generate_series(1, {self.rows}) AS i;"
                 "ANALYZE world;")
        return self.conninfo

    def describe(self):
        """What a results page says of the database: its version and settings."""
        version = self.sql("SHOW server_version")
        where = f", on CPU {proc.cpu_list(self.cpus)}" if self.cpus else ""
        return (f"PostgreSQL {version} (Debian's), a cluster of its own{where}, "
                f"{self.rows:,} rows in World; " + ", ".join(SETTINGS))

    def detach(self):
        """Leaves the cluster running when this program exits (`harness/db-cluster start`)."""
        atexit.unregister(self.stop)

    def running(self):
        """The postmaster's pid while it runs, else None."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def stop(self):
        """Stops the server (fast: open sessions are cut) and removes the folder it made."""
        atexit.unregister(self.stop)
        pid = self.running()
        if pid:
            done = self._as_postgres("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "30",
                                     "stop", check=False)
            if done.returncode != 0 and self.running():
                os.kill(pid, 9)
                deadline = time.monotonic() + 10
                while self.running() and time.monotonic() < deadline:
                    time.sleep(0.05)
        if self.owned:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- use -------------------------------------------------------------------------------------

    def sql(self, statements, database=DATABASE):
        """Runs SQL through psql on the Unix socket; its output, unaligned, without headers."""
        done = subprocess.run([os.path.join(self.bin, "psql"), "-h", self.socket_dir, "-p",
                               str(self.port), "-U", USER, "-d", database, "-v", "ON_ERROR_STOP=1",
                               "-X", "-A", "-t", "-q", "-c", statements],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql: {done.stderr.strip()}")
        return done.stdout.strip()

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- what the database did (cm-price's db profile) ----------------------------------------

    def reset_counts(self):
        """Forgets the statements counted so far (pg_stat_statements_reset)."""
        self.sql("SELECT pg_stat_statements_reset()")

    def query_counts(self):
        """(calls, ms): the queries of the /db routes completed since reset_counts() and the
        milliseconds the database spent executing them (pg_stat_statements' total_exec_time:
        from the query's arrival at the executor to its result, pg_sleep's own wait included)."""
        calls, ms = self.sql("SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0) "
                             f"FROM pg_stat_statements WHERE query LIKE '{SLEEP_SQL_START}%' "
                             f"OR query LIKE '{ROW_SQL_START}%'").split("|")
        return int(calls), float(ms)

    def wait_idle(self, limit_s=10.0):
        """Waits until no server connection runs a query (pg_stat_activity), limit_s at most (0:
        looks once): a query a server still runs is counted once it completes. Whether it became
        idle."""
        deadline = time.monotonic() + limit_s
        while True:
            busy = int(self.sql("SELECT count(*) FROM pg_stat_activity WHERE "
                                "application_name = 'cm-server' AND state = 'active'"))
            if busy == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def wait_quiet(self, quiet_s=0.5, limit_s=60.0):
        """Waits until no /db query has run or completed for quiet_s, limit_s at most; whether it
        did. A server can go on querying after its clients left: the driver on the loop works
        through every request still queued in its sockets, 2,000 of them at /db/sleep/10 (20 s),
        with a moment between two queries when none runs, which wait_idle() alone takes for the
        end. A count reset then would give those queries to the next row."""
        deadline = time.monotonic() + limit_s
        calls = self.query_counts()[0]
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() - quiet_since >= quiet_s:
                return True
            time.sleep(0.05)
            now = self.query_counts()[0]
            if now != calls or not self.wait_idle(0):
                calls, quiet_since = now, time.monotonic()
        return False

    def tally(self):
        """Starts counting what the database does (Tally.finish() says)."""
        return Tally(self)

    def cpu_by_process(self):
        """{pid: CPU seconds} of the cluster's live processes: the postmaster and every process
        it runs now (the servers' backends among them)."""
        pid = self.running()
        out = {}
        for p in proc.process_tree(pid) if pid else ():
            try:
                out[p] = proc.cpu_seconds(p)
            except (OSError, IndexError, ValueError):
                pass  # ended meanwhile
        return out

    def _as_postgres(self, program, *args, check=True):
        pin = ["taskset", "-c", proc.cpu_list(self.cpus)] if self.cpus else []
        done = subprocess.run(pin + self.as_user + [os.path.join(self.bin, program), *args],
                              capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{program}: {done.stderr.strip() or done.stdout.strip()}")
        return done


class Tally:
    """What a cluster did between its start and finish(): the /db queries it completed (counted
    from zero: pg_stat_statements is reset) and the CPU seconds its processes spent.

    The CPU is that of the processes alive at finish(), less what each had spent at the start:
    the servers' backends, which live through the run. A psql the harness runs (the reset, the
    count) costs its own backend some 30 ms of CPU to start; those backends have ended by then,
    or start after the reading, and are not counted."""

    def __init__(self, cluster, quiet_limit_s=60.0):
        self.cluster = cluster
        # What the row before still has the database do is not this row's: the count starts
        # once the database is quiet (quiet_at_start says whether it got so in time).
        self.quiet_at_start = cluster.wait_quiet(limit_s=quiet_limit_s)
        cluster.reset_counts()
        self.cpu_start = cluster.cpu_by_process()

    def finish(self, idle_limit_s=10.0):
        """A Count: the CPU first, then waits for the queries still running (idle_limit_s at
        most; idle says whether none was left), so each is counted once it completes."""
        end = self.cluster.cpu_by_process()
        cpu_s = sum(max(0.0, t - self.cpu_start.get(pid, 0.0)) for pid, t in end.items())
        idle = self.cluster.wait_quiet(limit_s=idle_limit_s)
        queries, exec_ms = self.cluster.query_counts()
        return Count(queries, cpu_s, exec_ms, idle)


@dataclasses.dataclass(frozen=True)
class Count:
    """What a Tally found: the /db queries completed, the database's CPU seconds meanwhile, the
    milliseconds it spent executing those queries, and whether none was still running."""
    queries: int
    cpu_s: float
    exec_ms: float
    idle: bool
