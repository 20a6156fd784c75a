"""The SVG chart: round, distinct axis labels; escaped text; an empty period says so."""

import re

import pytest

from teams.charts import nice_step, stacked_bars_svg


@pytest.mark.parametrize("days", [1, 29])
@pytest.mark.parametrize("peak", [0.004, 0.13, 0.2, 1, 7.5, 12, 250])
def test_axis_labels_are_round_distinct_and_just_cover_the_peak(peak, days):
    daily = {f"2026-11-{d:02d}": {} for d in range(1, days)}
    daily[f"2026-11-{days:02d}"] = {"alice": peak * 0.6, "bob": peak * 0.4}
    svg = str(stacked_bars_svg(daily, title="t"))
    labels = [float(v) for v in re.findall(r'text-anchor="end" fill="#6b7280">([^<]+)</text>', svg)]
    assert len(labels) == len(set(labels)) >= 2 and labels[0] == 0
    assert peak <= labels[-1] <= peak * 2.5  # the top of the axis is near the data
    steps = {round(b - a, 9) for a, b in zip(labels, labels[1:], strict=False)}
    assert len(steps) == 1  # evenly spaced
    ys = [float(y) for y in re.findall(r'<line x1="48" x2="\d+" y1="(-?[\d.]+)"', svg)]
    assert all(0 <= y <= 260 for y in ys)  # every grid line inside the picture


def test_nice_steps():
    assert nice_step(0.2) == (0.05, 2) and nice_step(7.5) == (2, 0) and nice_step(1) == (0.25, 2)


def test_text_is_escaped_and_empty_input_says_so():
    svg = str(stacked_bars_svg({"2026-11-01": {"<b>x</b>": 1.0}}, title="a & b"))
    assert "&lt;b&gt;x&lt;/b&gt;" in svg and "<b>x</b>" not in svg and "a &amp; b" in svg
    assert "No usage in this period yet." in str(stacked_bars_svg({}, title="t"))
