"""The SVG chart: round, distinct axis labels; escaped text; an empty period says so."""
import re

import pytest

from teams.charts import nice_step, stacked_bars_svg


@pytest.mark.parametrize("peak", [0.004, 0.13, 0.2, 1, 7.5, 12, 250])
def test_axis_labels_are_distinct_and_cover_the_peak(peak):
    svg = str(stacked_bars_svg({"2026-11-01": {"alice": peak * 0.6, "bob": peak * 0.4}}, title="t"))
    labels = re.findall(r'text-anchor="end" fill="#6b7280">([^<]+)</text>', svg)
    assert len(labels) == len(set(labels)) >= 2
    assert float(labels[-1]) >= peak


def test_nice_steps():
    assert nice_step(0.2) == (0.05, 2) and nice_step(7.5) == (2, 0) and nice_step(1) == (0.25, 2)


def test_text_is_escaped_and_empty_input_says_so():
    svg = str(stacked_bars_svg({"2026-11-01": {"<b>x</b>": 1.0}}, title="a & b"))
    assert "&lt;b&gt;x&lt;/b&gt;" in svg and "<b>x</b>" not in svg and "a &amp; b" in svg
    assert "No usage in this period yet." in str(stacked_bars_svg({}, title="t"))
