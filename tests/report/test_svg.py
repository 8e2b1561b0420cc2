"""`report.svg`: the report's own charts as SVG text: round ticks, labels escaped, gaps for missing values, the same
bytes every time, and matplotlib's colours (the suites' figures use them)."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import pytest

from cltoolkit.report.svg import Axes, Chart, color, nice_ticks, tick_labels, viridis


@pytest.mark.parametrize("lo, hi", [(0, 1), (-0.3, 0.7), (12.3, 31.4), (8000, 100000), (-2, -1), (1e-5, 3e-5)])
def test_ticks_are_round_steps_inside_the_range(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert 2 <= len(ticks) <= 7
    assert all(lo - 1e-12 <= t <= hi + 1e-12 for t in ticks)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5))
    assert all(abs((b - a) - step) < 1e-9 * max(1.0, abs(step)) for a, b in itertools.pairwise(ticks))


def test_tick_labels_carry_the_step_s_decimals_and_no_negative_zero() -> None:
    assert tick_labels(nice_ticks(-0.3, 0.7)) == ["-0.2", "0.0", "0.2", "0.4", "0.6"]
    assert tick_labels([-0.25, 0.0, 0.25]) == ["-0.25", "0.00", "0.25"]
    assert tick_labels([-0.0, 1.0, 2.0]) == ["0", "1", "2"]
    assert tick_labels(nice_ticks(8000, 100000)) == ["20000", "40000", "60000", "80000", "100000"]


def test_text_from_a_protocol_is_escaped() -> None:
    chart = Chart(100, 50)
    chart.text(10, 10, '<script>alert("x")</script> & more')
    out = chart.svg("a <b> title")
    assert "<script>" not in out and "&lt;script&gt;" in out and "&amp; more" in out
    assert "<title>a &lt;b&gt; title</title>" in out


def test_a_missing_value_breaks_the_line_and_a_missing_marker_is_not_drawn() -> None:
    chart = Chart(200, 100)
    ax = Axes(chart, (10, 10, 180, 80), (0, 4), (0, 1))
    ax.plot([0, 1, 2, 3, 4], [0.1, 0.2, math.nan, 0.8, 0.9], "C1")
    chart.marker(math.inf, 5, "o", 2, "k")
    out = chart.svg("t")
    lines = re.findall(r'<polyline points="([^"]*)"', out)
    assert [len(p.split()) for p in lines] == [2, 2]
    assert 'stroke="#ff7f0e"' in out  # "C1": matplotlib's second colour
    assert "<circle" not in out and "nan" not in out and "inf" not in out


def test_the_same_drawing_is_the_same_bytes() -> None:
    def draw() -> str:
        chart = Chart(300, 200)
        ax = Axes(chart, (40, 20, 240, 150), (0.0, 1.0 / 3.0), (-1.0, 1.0))
        ax.step([0.0, 0.1, 0.2, 1.0 / 3.0], [1.0, 0.5, 0.25, 0.0], "C0")
        ax.frame(xlabel="x", ylabel="y", title="t")
        return chart.svg("t")

    assert draw() == draw()
    assert re.search(r"\d\.\d\d", re.sub(r"<text[^>]*>[^<]*</text>", "", draw())) is None  # coordinates at 0.1 px


def test_colours_are_matplotlib_s() -> None:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex, to_rgb

    assert [color(f"C{i}") for i in range(10)] == [to_hex(c) for c in _cycle()]
    cmap = colormaps["viridis"]
    for k in range(101):  # 17 samples, linear between: within 5/255 per channel everywhere (not visible)
        ours, theirs = to_rgb(viridis(k / 100)), cmap(k / 100)[:3]
        assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) <= 5 / 255, k


def _cycle() -> list[str]:
    import matplotlib

    return list(matplotlib.rcParamsDefault["axes.prop_cycle"].by_key()["color"])


def _record(comparison: str, metrics: dict[str, Any]) -> object:
    """What the standard figures read of a record: its state, comparison / order / cell and metrics."""
    from types import SimpleNamespace

    spec = SimpleNamespace(comparison=comparison, order=None, cell=None)
    return SimpleNamespace(status=SimpleNamespace(state="completed"), spec=spec, metrics=metrics)


def test_a_matrix_cell_never_evaluated_stays_empty_and_values_are_written_in_their_cells() -> None:
    from cltoolkit.report.standard import matrix_figures

    layout = {"tasks": ["t1", "t2"], "phases": ["t1", "t2"]}
    records = [
        _record("a", {"successMatrix": {**layout, "values": [[0.9, None], [0.5, 1.0]]}}),
        _record("a", {"successMatrix": {**layout, "values": [[0.7, None], [0.3, 1.0]]}}),
    ]
    ((title, chart),) = matrix_figures(records)  # type: ignore[arg-type]
    assert title == "Per-task matrix: a"
    cells = re.findall(r">(\d\.\d\d)</text>", chart)
    assert cells == ["0.80", "0.40", "1.00"]  # the mean of each evaluated cell; the null cell has no text
    assert 'fill="#ffffff"/>' in chart.split("<title>")[1]  # ... and no colour
    assert f'fill="{viridis(1.0)}"' in chart  # 1.0 at the top of the [0, 1] scale


def test_curves_with_a_missing_point_and_runs_of_different_lengths_are_all_drawn() -> None:
    from cltoolkit.report.standard import curve_figures

    records = [
        _record("a", {"curves": {"loss": {"x": [0, 1, 2], "y": [1.0, None, 0.5], "xLabel": "step"}}}),
        _record("a", {"curves": {"loss": {"x": [0, 1, 2], "y": [0.9, 0.7, 0.4], "xLabel": "step"}}}),
        _record("b", {"curves": {"loss": {"x": [0, 1], "y": [1.0, 0.8]}}}),
        _record("b", {"curves": {"loss": {"x": [0, 2], "y": [1.0, 0.6]}}}),
    ]
    ((title, chart),) = curve_figures(records, {"a": "C3", "b": "C4"})  # type: ignore[arg-type]
    assert title == "Curves: loss"
    assert "a (n=2)" in chart and "b (n=2), runs differ in x or length: no mean" in chart
    # a: run 1 in two pieces, run 2, the mean in two pieces (missing where a run is), the legend
    assert chart.count('stroke="#d62728"') == 2 + 1 + 2 + 1
    assert chart.count('stroke="#9467bd"') == 2 + 1  # b: two runs and the legend, no mean


def test_a_malformed_curve_is_drawn_as_far_as_it_goes_and_never_stops_the_report() -> None:
    from cltoolkit.report.standard import curve_figures

    records = [
        _record("a", {"curves": {"loss": {"x": [0, 1, 2], "y": [1.0, "high", 0.5, 0.2]}}}),  # a text, one y too many
        _record("a", {"curves": {"loss": {"x": [0, 1, 2], "y": [0.9, 0.7, 0.4]}}}),
        _record("a", {"curves": {"loss": {"x": 3, "y": [0.9]}, "acc": {"x": [0, 1], "y": [0.1, 0.2]}}}),  # x not a list
    ]
    figs = dict(curve_figures(records, {"a": "C0"}))  # type: ignore[arg-type]
    assert set(figs) == {"Curves: loss", "Curves: acc"}
    assert "a (n=2), runs differ in x or length: no mean" in figs["Curves: loss"]  # the malformed run: no mean
    assert figs["Curves: loss"].count('stroke="#1f77b4"') == 2 + 1 + 1  # run 1 in two pieces, run 2, the legend
