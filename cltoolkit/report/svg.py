"""Charts written as SVG text: the report's own figures (gate intervals, performance profiles, per-task matrices,
learning curves) without a plotting library. Importing matplotlib and drawing with it was 0.45 of a fresh clone's
3.3 CPU-seconds of `clt report` over 10,000 records; these charts cost milliseconds, are vector (sharp at any zoom),
keep their text searchable and are the same bytes on every machine (coordinates rounded to 0.1 px). Suites' own
figures still come from matplotlib (`figures.draw_figure_blocks` inlines both).

Text widths are estimated from the character count (the browser sets the text), so margins are generous.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

__all__ = ["Axes", "Chart", "color", "nice_ticks", "padded", "text_width", "tick_labels", "viridis"]

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Matplotlib's default cycle, so that "C<i>" means the same colour here as in the suites' figures."""

NAMED = {"k": "#000000", "grey": "#808080", "gray": "#808080", "w": "#ffffff"}

VIRIDIS = (
    "#440154",
    "#48186a",
    "#472d7b",
    "#424086",
    "#3b528b",
    "#33638d",
    "#2c728e",
    "#26828e",
    "#21918c",
    "#1fa088",
    "#28ae80",
    "#3fbc73",
    "#5ec962",
    "#84d44b",
    "#addc30",
    "#d8e219",
    "#fde725",
)
"""Matplotlib's viridis at 17 evenly spaced points; between them, linear in RGB."""

DASHES = {"-": None, "--": "6 3", ":": "1.5 2.5", "-.": "6 2.5 1.5 2.5"}


def color(name: str | None, default: str = "#000000") -> str:
    """A colour as SVG writes it: "C0".."C9" (matplotlib's cycle), a few single-letter names, or as given."""
    if not name:
        return default
    if name[0] == "C" and name[1:].isdigit():
        return PALETTE[int(name[1:]) % len(PALETTE)]
    return NAMED.get(name, name)


def viridis(fraction: float) -> str:
    """The viridis colour at `fraction` of the scale (clipped to [0, 1])."""
    f = min(max(fraction, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(f), len(VIRIDIS) - 2)
    t = f - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    rgb = (round(int(a[k : k + 2], 16) * (1 - t) + int(b[k : k + 2], 16) * t) for k in (1, 3, 5))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def text_width(text: str, size: float) -> float:
    """An estimate of a sans-serif text's width in px (the browser sets it)."""
    return 0.56 * size * len(text)


def _n(v: float) -> str:
    """A coordinate as written: 0.1 px."""
    s = f"{v:.1f}"
    s = s[:-2] if s.endswith(".0") else s
    return "0" if s == "-0" else s


def nice_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """At most `most` (at least two where lo < hi) round values in [lo, hi]: steps of 1, 2, 2.5 or 5 times a
    power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    span = hi - lo
    magnitude = 10.0 ** math.floor(math.log10(span / most))
    step = magnitude
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = m * magnitude
        if span / step <= most:
            break
    first = math.ceil(lo / step - 1e-9)
    return [k * step for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Tick labels with as many decimals as the step needs (no "-0")."""
    ticks = [t if t != 0 else 0.0 for t in ticks]
    if len(ticks) < 2:
        return [f"{t:g}" for t in ticks]
    step = abs(ticks[1] - ticks[0])
    big = max(abs(t) for t in ticks)
    if big >= 1e7 or big < 1e-3:
        return [f"{t:.2e}" if t else "0" for t in ticks]
    exponent = math.floor(math.log10(step) + 1e-9)
    quarter = abs(step / 10.0**exponent - 2.5) < 1e-6  # 0.25, 2.5, 25: one more decimal than the power
    decimals = max(0, -exponent + quarter)
    return [f"{t:.{decimals}f}" for t in ticks]


class Chart:
    """One SVG drawing, `width` x `height` px; drawn on by its methods and by `Axes`, then `svg()`."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self._parts: list[str] = []

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        stroke: str = "#000000",
        width: float = 1.0,
        dash: str = "-",
        opacity: float = 1.0,
    ) -> None:
        self.polyline([(x1, y1), (x2, y2)], stroke, width, dash, opacity)

    def polyline(
        self,
        points: Sequence[tuple[float, float]],
        stroke: str = "#000000",
        width: float = 1.0,
        dash: str = "-",
        opacity: float = 1.0,
    ) -> None:
        """A line through `points` (px); a point with a non-finite coordinate breaks the line there."""
        runs: list[list[tuple[float, float]]] = [[]]
        for x, y in points:
            if math.isfinite(x) and math.isfinite(y):
                runs[-1].append((x, y))
            elif runs[-1]:
                runs.append([])
        style = f' stroke="{color(stroke)}" stroke-width="{width:g}"'
        if DASHES.get(dash):
            style += f' stroke-dasharray="{DASHES[dash]}"'
        if opacity < 1:
            style += f' stroke-opacity="{opacity:g}"'
        for run in runs:
            if len(run) == 1:
                run = [run[0], run[0]]
            if run:
                path = " ".join(f"{_n(x)},{_n(y)}" for x, y in run)
                self._parts.append(f'<polyline points="{path}" fill="none"{style}/>')

    def outline(self, x: float, y: float, w: float, h: float) -> None:
        """A box's edge: the frame of a plot or of a colour bar."""
        self.polyline([(x, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y)], "#000000", 0.8)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str | None = None) -> None:
        edge = f' stroke="{color(stroke)}" stroke-width="0.8"' if stroke else ""
        self._parts.append(
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{color(fill)}"{edge}/>'
        )

    def marker(self, x: float, y: float, shape: str, size: float, fill: str, opacity: float = 1.0) -> None:
        """A filled marker: "o" (circle of radius `size`) or "D" (diamond of half-diagonal `size`)."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        alpha = f' fill-opacity="{opacity:g}"' if opacity < 1 else ""
        if shape == "D":
            pts = f"{_n(x)},{_n(y - size)} {_n(x + size)},{_n(y)} {_n(x)},{_n(y + size)} {_n(x - size)},{_n(y)}"
            self._parts.append(f'<polygon points="{pts}" fill="{color(fill)}"{alpha}/>')
        else:
            self._parts.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{size:g}" fill="{color(fill)}"{alpha}/>')

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float = 9,
        anchor: str = "start",
        fill: str = "#000000",
        rotate: bool = False,
        bold: bool = False,
    ) -> None:
        """`text` centred vertically on y; `anchor` start / middle / end; `rotate`: reads upwards."""
        turn = f' transform="rotate(-90 {_n(x)} {_n(y)})"' if rotate else ""
        weight = ' font-weight="bold"' if bold else ""
        fill_attr = f' fill="{color(fill)}"' if color(fill) != "#000000" else ""
        self._parts.append(
            f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size:g}" text-anchor="{anchor}" '
            f'dominant-baseline="central"{fill_attr}{weight}{turn}>{html.escape(text, quote=False)}</text>'
        )

    def legend(self, x: float, y: float, entries: Sequence[tuple[str, str, str, float]], size: float = 8) -> None:
        """Entries (label, colour, dash, line width) listed downwards from (x, y), each with its line sample."""
        for i, (label, stroke, dash, width) in enumerate(entries):
            row = y + i * (size + 6)
            self.line(x, row, x + 22, row, stroke, width, dash)
            self.text(x + 27, row, label, size)

    def svg(self, label: str) -> str:
        """The drawing as one `<svg>` element (scaled to the page's width, never wider than drawn)."""
        w, h = _n(self.width), _n(self.height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
            f'font-family="DejaVu Sans,Helvetica,Arial,sans-serif" style="max-width:100%;height:auto">'
            f"<title>{html.escape(label, quote=False)}</title>"
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>' + "".join(self._parts) + "</svg>"
        )


class Axes:
    """A plotting box in a `Chart`: the box at (left, top) of `width` x `height` px showing the data ranges
    `xlim` x `ylim` (y grows upwards unless `ydown`, as for rows of a table)."""

    def __init__(
        self,
        chart: Chart,
        box: tuple[float, float, float, float],
        xlim: tuple[float, float],
        ylim: tuple[float, float],
        ydown: bool = False,
    ) -> None:
        self.chart = chart
        self.left, self.top, self.width, self.height = box
        self.xlim = _widened(*xlim)
        self.ylim = _widened(*ylim)
        self.ydown = ydown

    def px(self, x: float) -> float:
        lo, hi = self.xlim
        return self.left + (x - lo) / (hi - lo) * self.width

    def py(self, y: float) -> float:
        lo, hi = self.ylim
        f = (y - lo) / (hi - lo)
        return self.top + (f if self.ydown else 1 - f) * self.height

    def plot(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        stroke: str,
        width: float = 1.5,
        dash: str = "-",
        opacity: float = 1.0,
    ) -> None:
        self.chart.polyline(
            [(self.px(float(x)), self.py(float(y))) for x, y in zip(xs, ys, strict=True)], stroke, width, dash, opacity
        )

    def step(self, xs: Sequence[float], ys: Sequence[float], stroke: str, width: float = 1.5) -> None:
        """A step line holding each y until the next x (matplotlib's `where="post"`)."""
        points: list[tuple[float, float]] = []
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if i:
                points.append((self.px(float(x)), points[-1][1]))
            points.append((self.px(float(x)), self.py(float(y))))
        self.chart.polyline(points, stroke, width)

    def frame(
        self,
        xlabel: str = "",
        ylabel: str = "",
        title: str = "",
        ycategories: Sequence[str] | None = None,
        xcategories: Sequence[str] | None = None,
        yticks: bool = True,
    ) -> None:
        """The box, its ticks and tick labels (numbers, or `ycategories` / `xcategories` at 0, 1, ...), the axis
        labels and the title above the box."""
        c, size = self.chart, 9
        bottom = self.top + self.height
        c.outline(self.left, self.top, self.width, self.height)
        if xcategories is not None:
            xt = [(self.px(float(i)), s) for i, s in enumerate(xcategories)]
        else:
            ticks = nice_ticks(*self.xlim)
            xt = list(zip([self.px(t) for t in ticks], tick_labels(ticks), strict=True))
        for x, s in xt:
            c.line(x, bottom, x, bottom + 4, "#000000", 0.8)
            c.text(x, bottom + 11, s, size, "middle")
        if ycategories is not None:
            yt = [(self.py(float(i)), s) for i, s in enumerate(ycategories)]
        elif yticks:
            ticks = nice_ticks(*self.ylim)
            yt = list(zip([self.py(t) for t in ticks], tick_labels(ticks), strict=True))
        else:
            yt = []
        for y, s in yt:
            c.line(self.left - 4, y, self.left, y, "#000000", 0.8)
            c.text(self.left - 6, y, s, size, "end")
        if xlabel:
            c.text(self.left + self.width / 2, bottom + 27, xlabel, size, "middle")
        if ylabel:
            widest = max((text_width(s, size) for _, s in yt), default=0.0)
            c.text(self.left - widest - 18, self.top + self.height / 2, ylabel, size, "middle", rotate=True)
        if title:
            c.text(self.left + self.width / 2, self.top - 10, title, 10, "middle")


def _widened(lo: float, hi: float) -> tuple[float, float]:
    """A range with room: a point becomes +-0.5 around it (or around 0 where not finite)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (-0.5, 0.5)
    if hi > lo:
        return (lo, hi)
    return (lo - 0.5, hi + 0.5)


def padded(values: Sequence[float], fraction: float = 0.05) -> tuple[float, float]:
    """The finite values' range widened by `fraction` of it at both ends (matplotlib's default margins)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return (-0.5, 0.5)
    lo, hi = min(finite), max(finite)
    pad = fraction * (hi - lo) if hi > lo else 0.5
    return (lo - pad, hi + pad)
