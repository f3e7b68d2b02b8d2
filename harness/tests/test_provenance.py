"""cmharness.provenance: the lines a results page writes from provenance()."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import unittest  # noqa: E402

from cmharness import provenance  # noqa: E402



class ConditionsLines(unittest.TestCase):
    """machine_line, commit_line, load_average_text, conditions_markdown: a results page's lines."""

    MACHINE = {"cpu_model": "AMD EPYC", "logical_cpus": 2, "memory": "23.5 GiB",
               "kernel": "Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC x86_64"}

    def test_machine_line(self):
        self.assertEqual(provenance.machine_line(self.MACHINE),
                         "AMD EPYC, 2 CPUs, 23.5 GiB, Linux 6.18.44-fc-v1045")

    def test_commit_line(self):
        head = "b75a94a50956ed53ea0bc104e0d2d82120e2a0a5"
        self.assertEqual(provenance.commit_line({"head": head, "dirty": False, "changed_paths": 0}),
                         "b75a94a50956")
        self.assertEqual(provenance.commit_line({"head": head, "dirty": True, "changed_paths": 4}),
                         "b75a94a50956 (with uncommitted changes: 4 paths outside results/)")
        unknown = {"head": "unknown (not a git checkout)", "dirty": None, "changed_paths": None}
        self.assertEqual(provenance.commit_line(unknown), "unknown (not a git checkout)")

    def test_load_average_text(self):
        self.assertEqual(provenance.load_average_text([1.4, 1.58, 1.971]), "1.40 1.58 1.97")

    def test_conditions_markdown(self):
        prov = {"machine": self.MACHINE, "load_average": [0.5, 0.25, 0.0],
                "commit": {"head": "a" * 40, "dirty": False, "changed_paths": 0},
                "recorded_utc": "2026-12-01 14:16:02 UTC"}
        lines = provenance.conditions_markdown(
            prov, ended_utc="2026-12-01 14:20:20 UTC", load_after=(1, 2, 3),
            pinning="cm-server on CPU 0, cm-load on CPU 1", command="harness/soak --model x",
            machine_extra="; slowhttptest version 1.8.2")
        self.assertEqual(lines, [
            "## Conditions", "",
            "- When: 2026-12-01 14:16:02 UTC to 2026-12-01 14:20:20 UTC",
            "- Load average (1, 5, 15 min): 0.50 0.25 0.00 before, 1.00 2.00 3.00 after",
            "- Machine: AMD EPYC, 2 CPUs, 23.5 GiB, Linux 6.18.44-fc-v1045; slowhttptest version 1.8.2",
            "- Pinning: cm-server on CPU 0, cm-load on CPU 1",
            "- Commit: aaaaaaaaaaaa",
            "- This run: `harness/soak --model x`"])


class PackageVersions(unittest.TestCase):
    """provenance.package_versions: dpkg's version, never its complaint about an unknown name."""

    def test_unknown_package(self):
        self.assertEqual(provenance.package_versions(["no-such-package-cm-test"]),
                         {"no-such-package-cm-test": "not installed"})

    def test_known_package_has_a_version(self):
        version = provenance.package_versions(["dpkg"])["dpkg"]
        self.assertNotIn("dpkg-query", version)
        self.assertRegex(version, r"^[0-9]")


class CodeHash(unittest.TestCase):
    """code_hash/same_code: a folder's trees that differ only in tests, fuzz targets or prose hold
    the same code; any other file makes them differ."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        subprocess.run(["git", "-C", self.root, "init", "-q"], check=True)
        self.write("m/src/a.cpp", "int a;\n")
        subprocess.run(["git", "-C", self.root, "add", "-A"], check=True)
        self.was = provenance.tree_hashes(("m",), root=self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def same_as_before(self):
        now = provenance.tree_hashes(("m",), root=self.root)
        self.assertNotEqual(now["m"], self.was["m"])
        return provenance.same_code(self.was, now, ["m"], root=self.root)

    def test_tests_fuzz_targets_and_prose_are_not_code(self):
        self.write("m/tests/a_test.cpp", "int t;\n")
        self.write("m/runtime/tests/b_test.cpp", "int u;\n")
        self.write("m/fuzz/corpus/one", "GET /\n")
        self.write("m/README.md", "# m\n")
        self.assertTrue(self.same_as_before())

    def test_any_other_file_is_code(self):
        for rel in ("m/src/a.cpp", "m/CMakeLists.txt", "m/contests.cpp", "m/src/tests.hpp"):
            with self.subTest(rel=rel):
                self.write(rel, "changed\n")
                self.assertFalse(self.same_as_before())
                self.was = provenance.tree_hashes(("m",), root=self.root)

    def test_a_tree_this_repository_does_not_hold_is_only_its_own_hash(self):
        self.assertIsNone(provenance.code_hash("0" * 40, root=self.root))
        unknown = {"m": "0" * 40}
        self.assertFalse(provenance.same_code(unknown, self.was, ["m"], root=self.root))
        self.assertTrue(provenance.same_code(unknown, dict(unknown), ["m"], root=self.root))


if __name__ == "__main__":
    unittest.main()
