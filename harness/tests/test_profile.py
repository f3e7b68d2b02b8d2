"""harness/profile (cmharness/tools/profile.py): perf's report read into each function's share,
a server's windows summarized, the page written. No server and no perf are run here."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cmharness.tools import profile  # noqa: E402

# `perf report --no-children --sort symbol --stdio -g none` of asio_coro_uring's slow level
REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 590  of event 'cpu-clock:pppH'
#
# Overhead  Symbol                            IPC   [IPC Coverage]
# ........  ................................  ....................
#
    29.73%  [k] native_queued_spin_lock_slowpath  -      -
    18.07%  [k] pvm_irq_enable                    -      -
     3.04%  [k] tcp_sendmsg_locked                -      -
     0.17%  [.] cm::serialize                     -      -
     0.17%  [.] 0x0000000000002916                -      -
"""


def window(rps, **shares):
    return {"rps": rps, "functions": {name: (share, "kernel" if name.startswith("k_") else "user")
                                      for name, share in shares.items()}}


class ParseReport(unittest.TestCase):
    def test_each_function_its_share_and_where_it_runs(self):
        shares = profile.parse_report(REPORT)
        rounded = {name: (round(share, 6), where) for name, (share, where) in shares.items()}
        self.assertEqual(rounded["native_queued_spin_lock_slowpath"], (0.2973, "kernel"))
        self.assertEqual(rounded["cm::serialize"], (0.0017, "user"))
        self.assertEqual(rounded["0x0000000000002916"], (0.0017, "user"))
        self.assertEqual(len(shares), 5, "the header and the comments are not functions")

    def test_nothing_sampled_is_no_function(self):
        self.assertEqual(profile.parse_report("# Samples: 0\n"), {})


class Summarize(unittest.TestCase):
    def test_medians_over_the_windows_a_missing_function_counting_zero(self):
        s = profile.summarize([window(50_000, k_spin=0.30, k_irq=0.20, user_parse=0.01),
                               window(100_000, k_irq=0.10, user_parse=0.05),
                               window(55_000, k_spin=0.25, k_irq=0.15)])
        self.assertEqual(s["rps"], {"median": 55_000, "least": 50_000, "greatest": 100_000})
        self.assertEqual(s["windows"], 3)
        first = s["functions"][0]
        self.assertEqual((first["name"], first["where"]), ("k_spin", "kernel"))
        self.assertAlmostEqual(first["median"], 0.25)
        self.assertEqual((first["least"], first["greatest"]), (0.0, 0.30))
        self.assertEqual([f["name"] for f in s["functions"]], ["k_spin", "k_irq", "user_parse"])
        self.assertAlmostEqual(s["kernel"], 0.40)  # the windows' kernel shares: 0.5, 0.1, 0.4
        self.assertEqual([(w["rps"], list(w["top"])) for w in s["each"]],
                         [(50_000, ["k_spin", "k_irq", "user_parse"]),
                          (100_000, ["k_irq", "user_parse"]), (55_000, ["k_spin", "k_irq"])])

    def test_the_page_names_each_server_its_rps_and_its_functions(self):
        doc = {"windows": 2, "command": "harness/profile --windows 2",
               "meta": {"started_utc": "a", "finished_utc": "b"},
               "servers": {"uring_coro": profile.summarize(
                   [window(90_000, k_tcp=0.05, user_llhttp=0.02)] * 2)}}
        page = profile.markdown(doc)
        self.assertIn("## uring_coro", page)
        self.assertIn("90,000 rps (90,000-90,000) in 2 windows", page)
        self.assertIn("| `k_tcp` [k] | 5.0% | 5.0%-5.0% |", page)
        self.assertIn("| `user_llhttp` | 2.0% |", page)


if __name__ == "__main__":
    unittest.main()
