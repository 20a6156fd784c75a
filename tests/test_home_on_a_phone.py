"""The home page at a phone's width and in plain words: a team's per-cluster quota table scrolls in its
own box (the project's ``.table-scroll``), an ended session's message (red monospace for a failed one)
wraps, on the home page's list as on the Sessions page's cards, and the last session's Start button
reads "Start your last session: …"."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from bs4 import BeautifulSoup
from django.template.loader import render_to_string

from interactive.presets import SessionPreset

CSS = (Path(__file__).resolve().parent.parent / "static" / "css" / "portal.css").read_text()


def rules(selector: str) -> list[str]:
    """The declarations of every top-level rule of the stylesheet whose selector is exactly ``selector``."""
    return [m.group(1) for m in re.finditer(r"(?m)^" + re.escape(selector) + r"\s*\{([^}]*)\}", CSS)]


def test_the_table_scroll_box_scrolls_sideways():
    assert any("overflow-x:auto" in body.replace(" ", "") for body in rules(".table-scroll"))


def test_a_session_message_wraps_wherever_it_is_shown():
    """Not only inside ``.session-card``: the home page lists sessions as ``.now-item``."""
    (body,) = rules("pre.session-message")
    assert "white-space:pre-wrap" in body.replace(" ", "") and "overflow-wrap:anywhere" in body.replace(" ", "")


def test_the_per_cluster_quota_table_is_in_a_scrolling_box():
    usage = SimpleNamespace(several_clusters=True, clusters=[], missing={"b": "not answering"}, tracked=False)
    html = render_to_string("teams/_usage_summary.html", {"usage": usage, "team": SimpleNamespace(name="vision")})
    table = BeautifulSoup(html, "html.parser").select_one("[data-testid=usage-clusters]")
    assert "table-scroll" in table.parent.get("class", [])


def start_label(key: str, label: str) -> str:
    preset = SessionPreset(key, label, "lab", "interactive", "a100", 1, 2, 4096, 4)
    choice = SimpleNamespace(preset=preset, availability=SimpleNamespace(), offered=True, why_not=[])
    html = render_to_string("interactive/_home_starts.html", {"choices": [choice]})
    return BeautifulSoup(html, "html.parser").select_one("[data-testid=start-button]").get_text()


def test_the_last_sessions_button_reads_as_one_sentence():
    assert start_label("last-k1", "Your last session: JupyterLab, 1 A100, 4 h") == (
        "Start your last session: JupyterLab, 1 A100, 4 h"
    )
    assert start_label("preset-lab", "JupyterLab, 1 A100, 4 h") == "Start JupyterLab, 1 A100, 4 h"  # a preset as named
