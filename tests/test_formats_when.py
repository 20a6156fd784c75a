"""Every time on the pages carries its zone."""

from datetime import UTC, datetime

from portal.formats import when


def test_when_writes_utc_with_its_zone_and_a_machine_readable_moment():
    html = str(when(datetime(2026, 12, 1, 6, 22, 5, tzinfo=UTC)))
    assert (
        html
        == '<time datetime="2026-12-01T06:22:05Z" data-local="datetime" title="2026-12-01 06:22:05 UTC">2026-12-01 06:22 UTC</time>'
    )
    assert str(when(1796106125, "H:i")).endswith('data-local="time" title="2026-12-01 06:22:05 UTC">06:22 UTC</time>')
    assert when(None) == "" and when(0) == ""


def test_a_ticking_moment_reads_as_an_absolute_time_until_the_browser_words_it():
    """With scripts off a ticking moment is its absolute time, zone written; ``data-tick`` tells
    portal.js how to word it, and ``aria-live="off"`` keeps its ticks from being read out."""
    from portal.formats import ticking

    moment = datetime(2026, 12, 1, 6, 22, 5, tzinfo=UTC)
    assert str(ticking(moment, "since")) == (
        '<time datetime="2026-12-01T06:22:05Z" data-tick="since" aria-live="off" title="2026-12-01 06:22:05 UTC">'
        "since 2026-12-01 06:22 UTC</time>"
    )
    assert str(ticking(1796106125, "left")).endswith(">until 2026-12-01 06:22 UTC</time>")
    assert str(ticking(moment, "ago")).endswith(">06:22 UTC</time>")
    assert str(ticking(moment, "in")).endswith('title="2026-12-01 06:22:05 UTC"></time>')  # after the moment's when()
    assert ticking(None) == "" and ticking(0, "left") == ""
