#!/usr/bin/python3
"""Tests of freshness.py: a cited figure is fresh while its model's folders (and common/, servers/)
are as its results file recorded them, or a verification record covers the current tree. Each case
builds a small git repository in a temporary folder and runs the tool as ctest does (a child python
with --root). Run: /usr/bin/python3 docs/tools/test_freshness.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable or "/usr/bin/python3"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(TOOLS)), "harness"))
from cmharness.provenance import tree_hashes  # noqa: E402

STARTED = "2026-12-02 10:00:00 UTC"

# Line 2: asio_coro; 3: libuv_callbacks; 4: nginx alone; 5: a ratio of asio_coro_uring to nginx;
# 6: a ratio of libuv_callbacks to nginx.
PAGE = (
    "Measured in [quick](../results/quick/results.md):\n"
    "asio_coro answers 75,768<!--fig quick asio_coro plaintext 128 rps--> rps,\n"
    "libuv_callbacks 19,672<!--fig quick libuv_callbacks delay 2000 rps--> rps,\n"
    "nginx 82,496<!--fig quick nginx plaintext 128 rps--> rps;\n"
    "asio_coro_uring 1.2<!--fig quick ratio asio_coro_uring/standard nginx plaintext 128-->"
    " times,\n"
    "libuv_callbacks 94%<!--fig quick percent libuv_callbacks nginx plaintext 128--> of nginx.\n"
)
ASIO_FIG = "docs/page.md:2: 75,768<!--fig quick asio_coro plaintext 128 rps-->"
LIBUV_FIG = "docs/page.md:3:"
NGINX_FIG = "docs/page.md:4:"
URING_RATIO = ("docs/page.md:5: 1.2"
               "<!--fig quick ratio asio_coro_uring/standard nginx plaintext 128-->")
LIBUV_RATIO = "docs/page.md:6:"

# Line 5: asio_coro's row; 6: libuv_callbacks'; 7: nginx's; asio_coro_uring has no row, so the
# headline's first line (3) cites it.
README = (
    "# A project\n"
    "\n"
    "<!-- headline: written by harness/plot from results/quick/results.json -->\n"
    "| server | rps |\n"
    "| asio_coro | 75,768 |\n"
    "| libuv_callbacks | 19,672 |\n"
    "| nginx | 82,496 |\n"
    "<!-- /headline -->\n"
)
SERVERS = ("asio_coro", "asio_coro_uring", "libuv_callbacks", "nginx")
FILES = {
    "CMakeLists.txt": "",
    "asio_coro/x.cpp": "int asio_coro;\n",
    "libuv_callbacks/y.cpp": "int libuv;\n",
    "common/c.hpp": "int common;\n",
    "servers/s.cpp": "int launcher;\n",
    "docs/page.md": PAGE,
    "README.md": README,
}


class FreshnessTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for rel, text in FILES.items():
            self.write(rel, text)
        self.git("init", "-q")
        self.commit("the models")
        self.trees = tree_hashes(root=self.root)
        self.write_results({"started_utc": STARTED, "provenance": {"trees": self.trees}})

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel: str, text: str, mode: str = "w") -> None:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(text)

    def git(self, *args: str) -> str:
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
        return subprocess.run(["git", "-C", self.root, *args], check=True, capture_output=True,
                              text=True, env=env).stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def write_results(self, meta: dict, claims: list | None = None) -> None:
        targets = [{"server": s, "variant": "standard", "rows": []} for s in SERVERS]
        doc = {"meta": meta, "targets": targets}
        if claims is not None:
            doc["claims"] = claims
        self.write("results/quick/results.json", json.dumps(doc))

    def verification(self, trees: dict, verdicts: dict, started: str = STARTED) -> dict:
        claims = [{"id": f"plaintext {server}/nginx", "servers": [server, "nginx"],
                   "verdict": verdict, "committed": {}, "rerun": {}, "change": 0.01}
                  for server, verdict in verdicts.items()]
        return {"recorded_utc": "2026-12-02 11:00:00 UTC", "results_started_utc": started,
                "provenance": {"trees": trees}, "claims": claims}

    def write_verifications(self, *records: dict) -> None:
        self.write("results/quick/verifications.json", json.dumps(list(records)))

    def touch_asio_coro(self) -> None:
        self.write("asio_coro/x.cpp", "\n", mode="a")

    def run_tool(self, *args: str, root: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, os.path.join(TOOLS, "freshness.py"), "--root",
                               root or self.root, *args],
                              capture_output=True, text=True, check=False)

    def assert_fresh(self, done: subprocess.CompletedProcess, count: int = 9) -> None:
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"freshness: {count} cited figures are fresh", done.stdout)

    def test_figures_measured_on_the_current_tree_are_fresh(self):
        self.assert_fresh(self.run_tool())

    def test_a_blank_line_in_a_model_makes_its_figures_stale_and_no_other(self):
        self.touch_asio_coro()
        now = tree_hashes(root=self.root)["asio_coro"]
        done = self.run_tool()
        self.assertEqual(done.returncode, 1, done.stdout)
        was = self.trees["asio_coro"]
        moved = f"    asio_coro: asio_coro/ recorded {was[:12]}, now {now[:12]}\n"
        self.assertIn(f"{ASIO_FIG}\n{moved}", done.stderr)
        self.assertIn(URING_RATIO + "\n    asio_coro_uring: asio_coro/", done.stderr)
        self.assertIn("README.md:5: | asio_coro | 75,768 |", done.stderr)
        self.assertIn("README.md:3: (headline block of results/quick/results.json)  "
                      "[headline: asio_coro_uring]", done.stderr)
        self.assertIn(f"recorded {was}, now {now}", done.stderr)  # the summary: whole hashes
        for fresh in (LIBUV_FIG, NGINX_FIG, LIBUV_RATIO, "README.md:6:", "README.md:7:",
                      "libuv_callbacks:", "common/"):
            self.assertNotIn(fresh, done.stderr)
        self.assertIn("run: build/bin/cm-price quick   (rerun)", done.stderr)
        self.assertIn("its results make no claims, so only a rerun measures them", done.stderr)
        self.assertIn("freshness: 4 of 9 cited figures are stale", done.stderr)

    def test_the_verification_to_run_names_the_stale_servers_and_the_peers_of_their_ratios(self):
        claims = [{"id": f"plaintext {s}/nginx", "servers": [f"{s}/standard", "nginx"]}
                  for s in ("asio_coro", "libuv_callbacks")]
        claims.append({"id": "plaintext asio_coro_uring", "servers": ["asio_coro_uring"]})
        self.write_results({"started_utc": STARTED, "provenance": {"trees": self.trees}}, claims)
        self.touch_asio_coro()
        done = self.run_tool()
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("run: build/bin/cm-price verify quick --models asio_coro,asio_coro_uring,"
                      "nginx   (every claim holds: fresh again)", done.stderr)
        self.assertIn("or: build/bin/cm-price quick   (rerun)", done.stderr)

    def test_a_change_to_common_stales_every_model_but_not_a_peer(self):
        self.write("common/c.hpp", "\n", mode="a")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(LIBUV_FIG, done.stderr)
        self.assertIn("libuv_callbacks: common/ recorded", done.stderr)
        self.assertNotIn(NGINX_FIG, done.stderr)
        self.assertNotIn("README.md:7:", done.stderr)
        self.assertIn("freshness: 7 of 9", done.stderr)

    def test_a_change_only_to_tests_fuzz_targets_or_prose_leaves_the_figures_fresh(self):
        self.write("asio_coro/tests/x_test.cpp", "int t;\n")
        self.write("common/fuzz/corpus/get", "GET / HTTP/1.1\r\n\r\n")
        self.write("asio_coro/README.md", "# asio_coro\n")
        done = self.run_tool("--list")
        self.assert_fresh(done)
        self.assertIn(f"fresh  {ASIO_FIG}  (asio_coro: measured on the current code (its recorded "
                      "trees; since then only tests, fuzz targets or prose changed))", done.stdout)

    def test_a_change_to_the_code_beside_the_tests_stales_as_before(self):
        self.write("asio_coro/tests/x_test.cpp", "int t;\n")
        self.touch_asio_coro()
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(ASIO_FIG, done.stderr)
        self.assertIn("freshness: 4 of 9", done.stderr)

    def test_a_verification_on_the_current_tree_that_holds_makes_them_fresh(self):
        self.touch_asio_coro()
        now = tree_hashes(root=self.root)
        self.write_verifications(self.verification(now, {"asio_coro": "holds",
                                                         "asio_coro_uring": "holds"}))
        done = self.run_tool("--list")
        self.assert_fresh(done)
        self.assertIn(f"fresh  {ASIO_FIG}  (asio_coro: verified on the current tree", done.stdout)

    def test_a_changed_claim_does_not_cover_the_server(self):
        self.touch_asio_coro()
        now = tree_hashes(root=self.root)
        self.write_verifications(self.verification(now, {"asio_coro": "changed",
                                                         "asio_coro_uring": "holds"}))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(ASIO_FIG, done.stderr)
        self.assertIn("says: plaintext asio_coro/nginx changed by +1.0%", done.stderr)
        self.assertNotIn("docs/page.md:5:", done.stderr)  # asio_coro_uring's claim holds
        self.assertIn("freshness: 2 of 9", done.stderr)

    def test_a_later_changed_on_the_same_tree_undoes_an_earlier_holds(self):
        self.touch_asio_coro()
        now = tree_hashes(root=self.root)
        self.write_verifications(self.verification(now, {"asio_coro": "holds"}),
                                 self.verification(now, {"asio_coro": "noise"}))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(ASIO_FIG, done.stderr)
        self.assertIn("asio_coro/nginx noise", done.stderr)

    def verify_asio_coro_by_row(self, plaintext: str, delay: str) -> None:
        """After a change to asio_coro, a record with a verdict for each of its two rows (and
        asio_coro_uring's claim holding)."""
        self.touch_asio_coro()
        record = self.verification(tree_hashes(root=self.root), {"asio_coro_uring": "holds"})
        for row, verdict in (("plaintext - 128", plaintext), ("delay 100 2000", delay)):
            record["claims"].append({"id": f"asio_coro {row} efficiency", "servers": ["asio_coro"],
                                     "label": "asio_coro", "row": row, "verdict": verdict,
                                     "committed": {}, "rerun": {}, "change": 0.02})
        self.write_verifications(record)

    def test_a_figure_is_covered_by_its_rows_claim_when_another_row_is_noise(self):
        self.verify_asio_coro_by_row(plaintext="holds", delay="noise")
        done = self.run_tool("--list")
        self.assertEqual(done.returncode, 1)
        self.assertIn(f"fresh  {ASIO_FIG}  (asio_coro: verified on the current tree "
                      "2026-12-02 11:00:00 UTC (its row's claim holds", done.stdout)
        # the headline stands for every figure of the server: the noisy row's claim keeps it stale
        self.assertIn("README.md:5: | asio_coro | 75,768 |", done.stderr)
        self.assertIn("says: asio_coro delay 100 2000 efficiency noise", done.stderr)
        self.assertIn("freshness: 1 of 9", done.stderr)

    def test_a_changed_claim_of_another_row_uncovers_every_figure_of_the_server(self):
        self.verify_asio_coro_by_row(plaintext="holds", delay="changed")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(ASIO_FIG, done.stderr)
        self.assertIn("says: asio_coro delay 100 2000 efficiency changed by +2.0%", done.stderr)
        self.assertIn("freshness: 2 of 9", done.stderr)

    def test_a_figure_names_its_row_as_the_claims_do(self):
        sys.path.insert(0, TOOLS)
        from freshness import spec_row  # noqa: E402

        self.assertEqual(spec_row("offload asio_coro/pool block 64 rps"),
                         ("asio_coro (pool)", "block", "64"))
        self.assertEqual(spec_row("quick asio_coro plaintext 128 rps"),
                         ("asio_coro", "plaintext", "128"))
        self.assertIsNone(spec_row("quick ratio asio_coro nginx plaintext 128"))

    def test_a_record_covers_only_the_servers_its_claims_name(self):
        self.touch_asio_coro()
        self.write_verifications(self.verification(tree_hashes(root=self.root),
                                                   {"asio_coro": "holds"}))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertNotIn(ASIO_FIG, done.stderr)
        self.assertIn(URING_RATIO, done.stderr)
        self.assertIn("no verification record in results/quick/verifications.json covers the "
                      "current tree for asio_coro_uring", done.stderr)

    def test_a_record_of_another_tree_or_another_run_does_not_cover(self):
        self.touch_asio_coro()
        holds = {"asio_coro": "holds", "asio_coro_uring": "holds"}
        self.write_verifications(self.verification(self.trees, holds),
                                 self.verification(tree_hashes(root=self.root), holds,
                                                   started="2026-12-01 09:00:00 UTC"))
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(ASIO_FIG, done.stderr)
        self.assertIn("no verification record", done.stderr)

    def test_an_old_results_file_is_read_as_the_trees_of_its_commit(self):
        head = self.git("rev-parse", "HEAD")
        self.write_results({"started_utc": STARTED,
                            "commit": {"head": head, "dirty": True, "changed_paths": 1}})
        self.assert_fresh(self.run_tool())
        self.write("libuv_callbacks/y.cpp", "int libuv2;\n")
        self.commit("libuv_callbacks moves on")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(LIBUV_FIG, done.stderr)
        self.assertIn(LIBUV_RATIO, done.stderr)
        self.assertNotIn(ASIO_FIG, done.stderr)
        self.assertIn(f"the trees of commit {head[:12]} (no recorded trees; marked dirty, 1 "
                      "changed paths)", done.stderr)

    def test_an_old_results_file_of_an_unknown_commit_is_stale(self):
        self.write_results({"started_utc": STARTED, "commit": {"head": "1" * 40, "dirty": False}})
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("which this repository does not have", done.stderr)
        self.assertNotIn(NGINX_FIG, done.stderr)

    def test_figures_of_nginx_alone_are_never_stale(self):
        self.write("docs/page.md", PAGE.splitlines(keepends=True)[0]
                   + "nginx 82,496<!--fig quick nginx plaintext 128 rps-->.\n")
        self.write("README.md", "nothing quoted\n")
        self.write_results({"started_utc": STARTED, "provenance": {"trees": {}}})
        for folder in ("asio_coro/x.cpp", "common/c.hpp", "servers/s.cpp"):
            self.write(folder, "\n", mode="a")
        self.assert_fresh(self.run_tool(), count=1)

    def test_list_shows_every_figure(self):
        self.touch_asio_coro()
        done = self.run_tool("--list")
        self.assertEqual(done.returncode, 1)
        self.assertIn(f"stale  {ASIO_FIG}", done.stdout)
        self.assertIn(f"fresh  {NGINX_FIG}", done.stdout)
        self.assertIn("(nginx: a peer: no folder of this project)", done.stdout)
        self.assertEqual(len(done.stdout.splitlines()), 9)

    def test_a_profile_without_results_fails(self):
        self.write("docs/page.md", PAGE + "x<!--fig arena asio_coro plaintext 128 rps-->\n")
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn("docs/page.md:7: x<!--fig arena asio_coro plaintext 128 rps-->: "
                      "results/arena: no results/arena/results.json", done.stderr)

    def test_usage_errors_exit_2(self):
        self.assertEqual(self.run_tool("--bogus").returncode, 2)
        with tempfile.TemporaryDirectory() as elsewhere:
            self.assertEqual(self.run_tool(root=elsewhere).returncode, 2)

    def test_a_tree_that_is_not_a_git_checkout_is_skipped(self):
        with tempfile.TemporaryDirectory() as plain:
            os.makedirs(os.path.join(plain, "docs"))
            open(os.path.join(plain, "CMakeLists.txt"), "w").close()
            done = self.run_tool(root=plain)
        self.assertEqual(done.returncode, 77, done.stderr)
        self.assertIn("skipped:", done.stdout)


if __name__ == "__main__":
    unittest.main()
