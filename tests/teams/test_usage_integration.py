"""Team usage through the real gateway (SSH as the service user) against the local cluster."""

from __future__ import annotations

import time

import pytest

from teams.usage import team_usage, usage_refresh, usage_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_refresh_reads_the_real_cluster(clean_cache):
    before = time.time()
    teams = usage_refresh()
    assert teams is not None, "another refresh held the lock"
    assert usage_status().error == "" and usage_status().taken_at >= before
    for account, members in (("vision", {"alice", "carol"}), ("nlp", {"bob", "dana"})):
        usage = team_usage(account)
        assert usage == teams[account] and usage.tracked is True and usage.error == ""
        assert members <= {m.username for m in usage.members}
        assert usage.gpu_hours_used >= 0 and usage.gpus_running >= 0 and usage.burn_gpu_hours_per_day >= 0
        assert all(m.gpu_hours >= 0 and m.jobs >= m.failed_jobs >= 0 for m in usage.members)
        assert all(m.median_wait_s is None or m.median_wait_s >= 0 for m in usage.members)
        assert usage.period_start.day == 1 and usage.period_start.timestamp() <= before
        assert all(h >= 0 for day in usage.daily.values() for h in day.values())
        assert time.strftime("%Y-%m-%d", time.gmtime()) in usage.daily
