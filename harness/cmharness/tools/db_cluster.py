"""db-cluster -- a throwaway PostgreSQL cluster for the project, with nothing to configure.

    harness/db-cluster run -- CMD [ARG...]    start one, run CMD with CM_DB set to its conninfo
                                             (and CM_DB_URI to its TCP URI), stop it; CMD's status
    harness/db-cluster start --dir DIR        start one in DIR (a new folder) and leave it running;
                                             prints the conninfo, also written to DIR/conninfo
    harness/db-cluster stop --dir DIR         stop the one in DIR and remove DIR

For example:

    harness/db-cluster run -- sh -c 'psql "$CM_DB" -Atc "SELECT count(*) FROM world"'   # 10000

The cluster (cmharness/database.py): initdb in the folder, as the user postgres when run as root,
a Unix socket in the folder and a free port on 127.0.0.1, trust authentication for the user cm,
fsync off; its database cm holds TechEmpower's World table (--rows rows, 10,000 by default: id and
randomnumber, a fixed function of the id) and loads pg_stat_statements. `run` stops it however CMD
ends (SIGINT and SIGTERM included), and `stop` removes what `start` made: nothing is left running.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys

from cmharness import database


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = ap.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="start a cluster, run a command with CM_DB, stop it")
    run.add_argument("--rows", type=int, default=database.WORLD_ROWS, help="rows of World")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    start = verbs.add_parser("start", help="start a cluster in a new folder and leave it running")
    start.add_argument("--dir", required=True, help="the folder (must not exist yet)")
    start.add_argument("--rows", type=int, default=database.WORLD_ROWS, help="rows of World")
    stop = verbs.add_parser("stop", help="stop the cluster in a folder and remove the folder")
    stop.add_argument("--dir", required=True)
    args = ap.parse_args(argv)
    if args.verb == "run":
        args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not args.command:
            ap.error("run: no command given (harness/db-cluster run -- CMD [ARG...])")
    if getattr(args, "rows", 1) < 1:
        ap.error("--rows must be at least 1")
    return args


def run(args):
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(signum)

    with database.Cluster(rows=args.rows) as db:
        signal.signal(signal.SIGTERM, interrupted)
        env = dict(os.environ, CM_DB=db.conninfo, CM_DB_URI=db.uri)
        try:
            return subprocess.run(args.command, env=env).returncode
        except FileNotFoundError:
            print(f"db-cluster: no such command: {args.command[0]}", file=sys.stderr)
            return 127
        except KeyboardInterrupt:
            return 130


def start(args):
    if os.path.exists(args.dir):
        print(f"db-cluster: {args.dir} exists; start makes a new folder", file=sys.stderr)
        return 2
    os.makedirs(args.dir)
    db = database.Cluster(directory=os.path.abspath(args.dir), rows=args.rows)
    try:
        db.start()
    except BaseException:
        db.stop()
        shutil.rmtree(args.dir, ignore_errors=True)
        raise
    db.detach()
    with open(os.path.join(args.dir, "conninfo"), "w") as f:
        f.write(db.conninfo + "\n")
    print(db.conninfo)
    return 0


def stop(args):
    conninfo = os.path.join(args.dir, "conninfo")
    if not os.path.isfile(conninfo):
        print(f"db-cluster: {args.dir} holds no cluster started by db-cluster", file=sys.stderr)
        return 2
    database.Cluster(directory=os.path.abspath(args.dir)).stop()
    shutil.rmtree(args.dir, ignore_errors=True)
    return 0


def main(argv=None):
    args = parse_args(argv)
    try:
        return {"run": run, "start": start, "stop": stop}[args.verb](args)
    except RuntimeError as e:
        print(f"db-cluster: {e}", file=sys.stderr)
        return 1
