"""The usage figures' note on how Slurm resets usage (teams/usage/compute.py): ``NONE`` never resets,
``NOW`` resets when slurmctld starts or reloads its settings (slurm.conf(5)), not "never"."""

from __future__ import annotations

import pytest

from slurm.accounting import ClusterConfig
from teams.usage.compute import _lag_note


@pytest.mark.parametrize(
    "period, said",
    [
        ("NONE", "Slurm never resets usage (PriorityUsageResetPeriod=NONE): history covers this month only."),
        (
            "NOW",
            "Slurm resets usage only when the cluster's scheduler restarts or reloads its settings "
            "(PriorityUsageResetPeriod=NOW): history covers this month only.",
        ),
        ("MONTHLY", ""),
    ],
)
def test_the_reset_period_is_said_as_slurm_means_it(period, said):
    assert _lag_note(ClusterConfig(tracked=True, reset_period=period), None, 0.0, 0, 0) == said
