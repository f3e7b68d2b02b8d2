"""A throwaway PostgreSQL cluster for the project: the database a `/db` route waits on.

    with database.Cluster() as db:        # initdb in a temporary folder, started, filled
        db.conninfo                       # "host=/tmp/cm-pg-.../socket port=... dbname=cm user=cm"
        db.uri                            # "postgresql://cm@127.0.0.1:PORT/cm" (TCP, loopback)
        db.sql("SELECT count(*) FROM world")
    # stopped (pg_ctl stop -m fast), its folder removed: nothing left running

PostgreSQL comes from Debian (scripts/install-deps installs postgresql; its programs live in
/usr/lib/postgresql/VERSION/bin, the newest is used, or PG_BIN's). The cluster listens on a Unix
socket in its own folder and on a free port of 127.0.0.1, with trust authentication for the one
user `cm` and no durability (fsync off: nothing in it outlives the run). It is made as the user
`postgres` when run as root, since the server refuses to run as root. Its database `cm` holds
TechEmpower's table `World`: `world(id, randomnumber)`, rows 1..WORLD_ROWS, each randomnumber a
fixed function of its id (world_number), so every model's `/db/row/{id}` answers the same bytes and
a test knows them. pg_stat_statements is loaded, so a run can count the queries the database ran.
"""

import atexit
import glob
import os
import shutil
import subprocess
import tempfile
import time

from . import servers

WORLD_ROWS = 10000
USER = "cm"
DATABASE = "cm"
SETTINGS = ("listen_addresses=127.0.0.1", "fsync=off", "synchronous_commit=off",
            "full_page_writes=off", "max_connections=300",
            "shared_preload_libraries=pg_stat_statements")


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

    def __init__(self, directory=None, rows=WORLD_ROWS):
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

    def _as_postgres(self, program, *args, check=True):
        done = subprocess.run(self.as_user + [os.path.join(self.bin, program), *args],
                              capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{program}: {done.stderr.strip() or done.stdout.strip()}")
        return done
