"""cmharness.charts: the layout check every chart writer saves through (texts outside the figure,
texts over each other, labels over data markers), and every committed chart drawn again from the
committed data, into a scratch folder, without a layout problem. No server is started here."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import glob  # noqa: E402
import importlib  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import unittest  # noqa: E402

from cmharness import ROOT, charts, profile_charts, results  # noqa: E402

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the python3 first on PATH may have no matplotlib; Debian's has
    raise unittest.SkipTest("no matplotlib here: run with /usr/bin/python3")

RESULTS = os.path.join(ROOT, "results")


def tool(name):
    """A harness tool as a module: harness/NAME runs cmharness/tools/NAME.py."""
    return importlib.import_module("cmharness.tools." + name.replace("-", "_"))


def figure():
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([1, 2, 3], [1, 4, 9], "o-", label="measured")
    ax.set_title("a title")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return fig, ax


class Geometry(unittest.TestCase):
    def test_overlap_of_two_boxes(self):
        a = charts.rectangle(0, 0, 10, 10)
        self.assertAlmostEqual(charts.overlap(a, charts.rectangle(5, 5, 20, 20)), 25)
        self.assertEqual(charts.overlap(a, charts.rectangle(10, 0, 20, 10)), 0)

    def test_a_turned_text_fills_less_than_its_upright_box(self):
        # a 100 x 10 text at 30 degrees: its upright box is 91.6 x 58.7, the text 1,000 px2
        poly = charts.turned((0, 0, 91.6, 58.7), 100, 10, 30)
        self.assertAlmostEqual(charts.area(poly), 1000, places=3)
        # the upright box's far corner is not in the text
        self.assertEqual(charts.overlap(poly, charts.rectangle(80, 0, 91.6, 8)), 0)


class LayoutProblems(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def test_a_clean_figure_passes(self):
        fig, ax = figure()
        ax.annotate("the top", (3, 9), xytext=(-12, 0), textcoords="offset points", ha="right")
        ax.legend(loc="lower right")
        fig.tight_layout()
        self.assertEqual(charts.layout_problems(fig), [])

    def test_two_overlapping_labels_fail_naming_both(self):
        fig, ax = figure()
        ax.text(1.5, 6, "first label", fontsize=10)
        ax.text(1.55, 6.1, "second label", fontsize=10)
        fig.tight_layout()
        problems = charts.layout_problems(fig)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('"first label"', problems[0])
        self.assertIn('"second label"', problems[0])
        self.assertIn("overlaps", problems[0])

    def test_a_title_pushed_outside_the_figure_fails(self):
        fig, ax = figure()
        fig.tight_layout()
        fig.suptitle("a suptitle far too long for a figure five inches wide, so it is clipped at "
                     "both sides of the figure", fontsize=12)
        problems = charts.layout_problems(fig)
        self.assertTrue(any("runs outside the figure" in p and "a suptitle far too long" in p
                            for p in problems), problems)

    def test_a_title_above_the_figure_fails(self):
        fig, ax = figure()
        fig.tight_layout()
        ax.set_title("a title pushed up", y=1.3)
        problems = charts.layout_problems(fig)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('"a title pushed up" runs outside the figure (top by', problems[0])

    def test_a_text_over_a_marker_fails(self):
        fig, ax = figure()
        ax.text(2, 4, "on the point", ha="center", va="center")
        fig.tight_layout()
        problems = charts.layout_problems(fig)
        self.assertEqual(problems, ['"on the point" covers 1 data marker(s) (measured)'])

    def test_a_text_over_a_line_without_markers_passes(self):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot([1, 2, 3], [1, 4, 9], "-")
        ax.text(2, 4, "on the line", ha="center", va="center")
        fig.tight_layout()
        self.assertEqual(charts.layout_problems(fig), [])

    def test_the_labels_of_a_hidden_axes_do_not_count(self):
        fig, axes = plt.subplots(1, 2, figsize=(6, 3))
        axes[1].set_title("hidden and overlapping " * 5)
        axes[1].set_visible(False)
        fig.tight_layout()
        self.assertEqual(charts.layout_problems(fig), [])

    def test_save_refuses_a_bad_chart_and_writes_nothing(self):
        fig, ax = figure()
        ax.text(1.5, 6, "first label")
        ax.text(1.55, 6.1, "second label")
        fig.tight_layout()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.png")
            with self.assertRaises(charts.LayoutError) as caught:
                charts.save(fig, path)
            self.assertFalse(os.path.exists(path))
        self.assertIn('"first label" overlaps "second label"', str(caught.exception))
        self.assertIn("bad.png: not written", str(caught.exception))

    def test_save_writes_a_clean_chart(self):
        fig, _ = figure()
        fig.tight_layout()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "good.png")
            charts.save(fig, path)
            self.assertTrue(os.path.getsize(path) > 0)


class NoRankingMeasured(unittest.TestCase):
    """The note on a ratio panel (profile_charts): which servers' 95% intervals overlap."""

    plot = profile_charts

    def test_the_sets_whose_intervals_share_a_point(self):
        # arena /plaintext: libuv_callbacks is measured above nginx, but not above asio_coro
        items = [("blocking", 0.62, 0.67), ("asio_coro", 0.99, 1.02),
                 ("asio_coro_uring", 0.45, 0.68), ("libuv_callbacks", 1.01, 1.04),
                 ("uring_coro", 0.98, 1.45), ("nginx", 1.0, 1.0), ("node", 0.35, 0.42)]
        sets = self.plot.overlapping_sets(items)
        self.assertEqual(sorted(map(sorted, sets)), [
            ["asio_coro", "libuv_callbacks", "uring_coro"],
            ["asio_coro", "nginx", "uring_coro"],
            ["asio_coro_uring", "blocking"]])

    def test_disjoint_intervals_make_no_set(self):
        self.assertEqual(self.plot.overlapping_sets([("a", 1, 2), ("b", 3, 4)]), [])

    def test_an_estimate_without_an_interval_overlaps_every_one(self):
        inf = float("inf")
        sets = self.plot.overlapping_sets([("a", 1, 2), ("b", 3, 4), ("c", -inf, inf)])
        self.assertEqual(sorted(map(sorted, sets)), [["a", "c"], ["b", "c"]])


class GroupedBars(unittest.TestCase):
    """Where profile_charts puts the bars of a grouped panel (a server's variants side by side)."""

    plot = profile_charts

    def test_a_server_has_a_slot_for_each_variant_it_was_measured_with_only(self):
        rows = [{"server": s, "variant": v} for s, v in
                (("asio_coro", "pool"), ("asio_coro", "thread"), ("asio_coro", "inline"),
                 ("go", "-"), ("uring_coro", "pool"))]
        self.assertEqual(self.plot.slots(rows), {"asio_coro": ["pool", "thread", "inline"],
                                                 "go": ["-"], "uring_coro": ["pool"]})
        self.assertAlmostEqual(self.plot.span(rows), 5 + 2 * self.plot.GAP)

    def test_bars_stand_in_their_servers_groups_a_gap_apart(self):
        rows = [{"server": s, "variant": v} for s, v in
                (("asio_coro", "pool"), ("go", "-"), ("asio_coro", "thread"))]
        fig, ax = plt.subplots()
        xs = self.plot.positions(ax, rows, grouped=True)
        plt.close(fig)
        self.assertEqual(xs, [0, 2 + self.plot.GAP, 1])


class BarPanelScale(unittest.TestCase):
    """A bar panel is scaled to its bars: a ceiling far above every bar is written at the top, not
    drawn, so a row at a tenth of its ceiling is still a bar (results/db's /db/row/42)."""

    @staticmethod
    def row(rps, cpu):
        return {"rps": rps, "interval": None, "efficiency": rps / cpu, "lowest": cpu,
                "ceilings": {"CPU": cpu},
                "bound": "cpu", "summary": {}, "cpu_ceiling_row": False, "starved": 0}

    def drawn(self, rows):
        fig, ax = plt.subplots()
        profile_charts.rps_panel(ax, rows, list(range(len(rows))), ["tab:blue"] * len(rows))
        top = ax.get_ylim()[1]
        texts = [t.get_text() for t in ax.texts]
        plt.close(fig)
        return top, texts

    def test_a_ceiling_ten_times_the_bars_is_written_at_the_top(self):
        top, texts = self.drawn([self.row(10000, 100000), self.row(8000, 90000)])
        self.assertLessEqual(top, 2 * profile_charts.REACH * 10000)
        self.assertIn("\u2191 CPU 100k", texts)
        self.assertIn("\u2191 CPU 90k", texts)

    def test_a_ceiling_near_the_bars_is_drawn_across_them(self):
        top, texts = self.drawn([self.row(10000, 12000), self.row(8000, 90000)])
        self.assertGreater(top, 12000)
        self.assertNotIn("\u2191 CPU 12k", texts)
        self.assertIn("\u2191 CPU 90k", texts)


def committed_pngs():
    return {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(RESULTS, "**", "*.png"),
                                                          recursive=True)}


class CommittedChartsRedraw(unittest.TestCase):
    """Every chart committed under results/ drawn again from the committed data, into a scratch
    folder: save() raises on a layout problem, so drawing is the test. Nothing under results/
    and not the README is written."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-charts-")
        with open(os.path.join(ROOT, "README.md")) as f:
            cls.readme = f.read()
        cls.pngs = committed_pngs()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def tearDown(self):
        plt.close("all")
        with open(os.path.join(ROOT, "README.md")) as f:
            self.assertEqual(f.read(), self.readme, "the README was rewritten")
        self.assertEqual(committed_pngs(), self.pngs, "a committed chart was rewritten")

    def out(self, *parts):
        path = os.path.join(self.tmp.name, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def drawn(self, draw, path):
        try:
            draw()
        except charts.LayoutError as e:
            self.fail(str(e))
        self.assertTrue(os.path.getsize(path) > 0, path)

    def test_plot(self):
        plot = tool("plot")
        for profile, png in (("quick", "rps-vs-ceiling.png"), ("arena", "rps-vs-ceiling.png"),
                             ("wheel", "rps-vs-ceiling.png"), ("offload", "offload.png"),
                             ("db", "rps-vs-ceiling.png"), ("seed-echo", "rps-vs-ceiling.png"),
                             ("delay-sweep", "rps-vs-connections.png")):
            with self.subTest(profile=profile):
                out = self.out(profile)
                self.drawn(lambda: plot.main([os.path.join(RESULTS, profile, "results.json"),
                                              "--out", out]), os.path.join(out, png))
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "delay-sweep", "headline.md")))

    def test_cm_price_draws_them_itself(self):
        """results.chart(), as cm-price calls it after a run: drawn in its own process, beside the
        results.json, with no note for the page."""
        out = self.out("in-process")
        shutil.copy(os.path.join(RESULTS, "quick", "results.json"), out)
        self.assertEqual(results.chart(os.path.join(out, "results.json")), "")
        self.assertEqual(results.charts_in(out), ["rps-vs-ceiling.png"])

    def test_plot_staircase(self):
        out = self.out("staircase")
        self.drawn(lambda: tool("plot-staircase").main(
            [os.path.join(RESULTS, "staircase", "runs.json"), "--out", out]),
            os.path.join(out, "staircase.png"))

    def test_soak(self):
        soak = tool("soak")
        folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(RESULTS, "soak", "*",
                                                                            "samples.csv")))
        self.assertTrue(folders)
        for folder in folders:
            with self.subTest(model=os.path.basename(folder)):
                out = self.out("soak", os.path.basename(folder))
                self.drawn(lambda: soak.redraw(folder, out), os.path.join(out, "soak.png"))

    def test_abuse(self):
        out = self.out("abuse")
        self.drawn(lambda: tool("abuse").redraw(os.path.join(RESULTS, "abuse"), out),
                   os.path.join(out, "available.png"))


if __name__ == "__main__":
    unittest.main()
