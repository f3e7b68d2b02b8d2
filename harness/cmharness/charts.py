"""Writing a chart that cannot be read wrong, mechanically: every chart writer of the harness (plot,
plot-staircase, soak, abuse) writes its PNG with save(), which draws the figure, asks
layout_problems() and refuses to write a chart whose layout could mislead:

  - a text (title, suptitle, axis label, tick label, annotation, ax.text, legend text) that runs
    outside the figure: a clipped title;
  - two texts over each other (overlaps of a few square pixels are left alone);
  - an annotation or ax.text over a data marker of a Line2D drawn with markers (each marker a box
    of its markersize, from points to pixels).

Only the texts the figure actually drew are read (a tick label of a hidden shared axis, or one
past the view, is not drawn), each as the rectangle its glyphs take, turned with the text: two
neighbouring tick labels at 30 degrees do not overlap because their upright boxes do. What no code
can judge (does the chart say what the data says?) is left to whoever draws it: see
cmharness/profile_charts.py.
"""

import contextlib
import functools
import math

#: Overlaps of this many square pixels or fewer are left alone (antialiasing, touching boxes).
TOLERANCE_PX2 = 4.0


class LayoutError(ValueError):
    """A chart that save() would not write: its problems, one a line."""

    def __init__(self, path, problems):
        self.path = path
        self.problems = list(problems)
        super().__init__(f"{path}: not written, its layout could be read wrong:\n  "
                         + "\n  ".join(self.problems))


# -- geometry (pure) -------------------------------------------------------------------------------

def rectangle(x0, y0, x1, y1):
    """The corners of an upright box, counter-clockwise."""
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def area(poly):
    """The area of a polygon (shoelace)."""
    s = 0.0
    for (x1, y1), (x2, y2) in zip(poly, poly[1:] + poly[:1]):
        s += x1 * y2 - x2 * y1
    return abs(s) / 2


def _ccw(poly):
    s = sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(poly, poly[1:] + poly[:1]))
    return poly if s >= 0 else poly[::-1]


def _clip(subject, clip):
    """Sutherland-Hodgman: the part of polygon `subject` inside the convex polygon `clip`."""
    out = list(subject)
    clip = _ccw(clip)
    for (ax, ay), (bx, by) in zip(clip, clip[1:] + clip[:1]):
        if not out:
            break

        def inside(p):
            return (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) >= 0

        def cross(p, q):
            dx, dy = q[0] - p[0], q[1] - p[1]
            den = (bx - ax) * dy - (by - ay) * dx
            t = ((bx - ax) * (ay - p[1]) - (by - ay) * (ax - p[0])) / den if den else 0.0
            return (p[0] + t * dx, p[1] + t * dy)

        src, out = out, []
        for p, q in zip(src, src[1:] + src[:1]):
            if inside(q):
                if not inside(p):
                    out.append(cross(p, q))
                out.append(q)
            elif inside(p):
                out.append(cross(p, q))
    return out


def _bounds(poly):
    xs, ys = [p[0] for p in poly], [p[1] for p in poly]
    return min(xs), min(ys), max(xs), max(ys)


def overlap(a, b):
    """The area two convex polygons share, in square pixels."""
    ax0, ay0, ax1, ay1 = _bounds(a)
    bx0, by0, bx1, by1 = _bounds(b)
    if ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0:
        return 0.0
    inter = _clip(a, b)
    return area(inter) if len(inter) >= 3 else 0.0


def turned(box, width, height, degrees):
    """The rectangle of a text `width` x `height` turned by `degrees`, whose upright bounding box
    is `box` (x0, y0, x1, y1): matplotlib reports the latter, the glyphs fill the former."""
    t = math.radians(degrees)
    c, s = math.cos(t), math.sin(t)
    corners = [(x * c - y * s, x * s + y * c)
               for x, y in ((0, 0), (width, 0), (width, height), (0, height))]
    mx, my = min(p[0] for p in corners), min(p[1] for p in corners)
    return [(box[0] + x - mx, box[1] + y - my) for x, y in corners]


# -- what the figure drew --------------------------------------------------------------------------

@contextlib.contextmanager
def _recording_texts(drawn):
    """While it is open, every Text that draws itself is appended to `drawn`."""
    from matplotlib.text import Text

    original = Text.draw

    @functools.wraps(original)
    def draw(self, renderer):
        result = original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return result

    Text.draw = draw
    try:
        yield
    finally:
        Text.draw = original


def _drawn_texts(fig):
    if not hasattr(fig.canvas, "get_renderer"):  # a bare Figure(): draw it with Agg
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    drawn = []
    with _recording_texts(drawn):
        fig.canvas.draw()
    return list(dict.fromkeys(drawn))  # a text drawn twice is one text


def text_polygon(text, renderer):
    """The rectangle a drawn text takes on the canvas (its box patch included), in pixels."""
    from matplotlib.text import Text

    e = Text.get_window_extent(text, renderer)  # an annotation's arrow is not its text
    box = (e.x0, e.y0, e.x1, e.y1)
    degrees = text.get_rotation() % 360
    patch = text.get_bbox_patch()
    if patch is not None:
        p = patch.get_window_extent(renderer)
        box = (min(box[0], p.x0), min(box[1], p.y0), max(box[2], p.x1), max(box[3], p.y1))
    if patch is not None or degrees % 90 == 0:
        return rectangle(*box)
    text.set_rotation(0)
    try:
        flat = Text.get_window_extent(text, renderer)
    finally:
        text.set_rotation(degrees)
    return turned(box, flat.width, flat.height, degrees)


def _all_axes(fig):
    out, todo = [], list(fig.axes)
    while todo:
        ax = todo.pop(0)
        if ax not in out:
            out.append(ax)
            todo += list(getattr(ax, "child_axes", []))
    return out


def _has_markers(line):
    m = line.get_marker()
    return line.get_visible() and m not in (None, "None", "none", "", " ") and \
        line.get_markersize() > 0


def marker_boxes(fig):
    """(box, what) of every marker of every visible Line2D drawn with markers, in pixels."""
    out = []
    px = fig.dpi / 72
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        frame = ax.get_window_extent()
        for line in ax.get_lines():
            if not _has_markers(line):
                continue
            half = (line.get_markersize() + line.get_markeredgewidth()) * px / 2
            what = line.get_label() if not line.get_label().startswith("_") else "a marker"
            for x, y in line.get_transform().transform(line.get_xydata()):
                if not (math.isfinite(x) and math.isfinite(y)):
                    continue
                if line.get_clip_on() and not (frame.x0 - 1 <= x <= frame.x1 + 1
                                               and frame.y0 - 1 <= y <= frame.y1 + 1):
                    continue
                out.append((rectangle(x - half, y - half, x + half, y + half), what))
    return out


def describe(text):
    """A text as a reader would quote it: its lines joined, cut at 70 characters."""
    s = " ".join(text.get_text().split())
    return f'"{s[:67]}..."' if len(s) > 70 else f'"{s}"'


# -- the check -------------------------------------------------------------------------------------

def _outside(fig, texts, polys):
    problems = []
    w, h = fig.bbox.width, fig.bbox.height
    for t, p in zip(texts, polys):
        x0, y0, x1, y1 = _bounds(p)
        over = {"left": -x0, "right": x1 - w, "bottom": -y0, "top": y1 - h}
        sides = [f"{side} by {d:.0f} px" for side, d in over.items() if d > 1]
        if sides:
            problems.append(f"{describe(t)} runs outside the figure ({', '.join(sides)})")
    return problems


def _overlapping(texts, polys):
    problems = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            shared = overlap(polys[i], polys[j])
            if shared > TOLERANCE_PX2:
                problems.append(f"{describe(texts[i])} overlaps {describe(texts[j])} "
                                f"({shared:.0f} px\u00b2)")
    return problems


def _over_markers(fig, texts, polys):
    labels = {id(t) for ax in _all_axes(fig) for t in ax.texts}
    boxes = marker_boxes(fig)
    problems = []
    for t, p in zip(texts, polys):
        if id(t) not in labels:
            continue
        hits = [what for box, what in boxes if overlap(p, box) > TOLERANCE_PX2]
        if hits:
            problems.append(f"{describe(t)} covers {len(hits)} data marker(s) "
                            f"({', '.join(sorted(set(hits)))})")
    return problems


def layout_problems(fig):
    """What could make `fig` read wrong, one sentence each (empty: nothing found). Draws it first,
    at the figure's own dpi: texts outside the figure, texts over each other, and annotations or
    ax.text over a data marker."""
    texts = _drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    polys = [text_polygon(t, renderer) for t in texts]
    return _outside(fig, texts, polys) + _overlapping(texts, polys) + \
        _over_markers(fig, texts, polys)


def wrapped(text, width_in, fontsize=10):
    """`text` in lines as wide as `width_in` inches (about 13 characters an inch at 10 points): a
    title or a note that stays inside its figure."""
    import textwrap

    return "\n".join(textwrap.wrap(text, int(13 * 10 / fontsize * width_in)))


def save(fig, path, dpi=110):
    """Writes `fig` to `path` at `dpi` when layout_problems() finds nothing; else raises
    LayoutError naming the texts at fault, and writes nothing. The figure is closed either way."""
    import matplotlib.pyplot as plt

    try:
        fig.set_dpi(dpi)
        problems = layout_problems(fig)
        if problems:
            raise LayoutError(path, problems)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
