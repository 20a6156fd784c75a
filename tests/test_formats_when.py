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
