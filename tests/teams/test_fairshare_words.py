"""The fair-share sentence's figures (teams/usage/fairshare.py): "more" or "less than its share" never sits
beside two equal percentages, a share above 0 never reads 0, and ``PriorityUsageResetPeriod=NOW`` is
worded as slurm.conf(5) has it (cleared when slurmctld starts or is reconfigured, not on a calendar)."""

from __future__ import annotations

import math
import re

import pytest

from teams.usage.fairshare import FairShare


def figures(standing: str) -> tuple[str, str]:
    found = re.search(r"holds (.+?) of the shares at its level and has used (.+?) of its level's usage", standing)
    assert found, standing
    return found.group(1), found.group(2)


@pytest.mark.parametrize(
    "shares, used, level_fs, words",
    [
        (0.25, 0.2525, 0.99, "more than its share"),
        (0.25, 0.2475, 1.0101, "less than its share"),
        (0.004, 0.00404, 0.99, "more than its share"),
        (0.0004, 0.000403, 0.9925, "more than its share"),
        (0.5, 0.5049, 0.9903, "more than its share"),
    ],
)
def test_more_or_less_than_its_share_never_sits_beside_equal_figures(shares, used, level_fs, words):
    standing = FairShare("cluster1", shares, used, level_fs).standing
    held, spent = figures(standing)
    assert words in standing and held != spent, standing
    more = float(held.rstrip("%")) < float(spent.rstrip("%"))
    assert more is words.startswith("more"), standing


def test_the_testers_case_reads_right():
    standing = FairShare("cluster1", 0.25, 0.2525, 0.99).standing
    assert standing.startswith("On cluster1 the team holds 25.0% of the shares at its level and has used 25.2% of")
    assert "more than its share (LevelFS 0.99, below 1)" in standing


def test_whole_percentages_from_ten_up_one_decimal_below_and_never_zero_for_a_share_above_zero():
    assert figures(FairShare("cluster1", 0.25, 0.97, 0.26).standing) == ("25%", "97%")
    assert figures(FairShare("cluster1", 0.004, 0.5, 0.008).standing) == ("0.4%", "50.0%")
    assert figures(FairShare("cluster1", 0.0004, 0.0, math.inf).standing) == ("less than 0.1%", "0%")
    just = FairShare("cluster1", 1.0, 1.0, 1.0).standing
    assert figures(just) == ("100%", "100%") and "just its share" in just  # equal figures, and said so


def test_a_reset_at_now_is_worded_as_slurm_means_it():
    fading = FairShare("cluster1", 0.25, 0.5, 0.5, decay_half_life_s=0, reset_period="NOW").fading
    assert fading == (
        "Past usage does not fade (PriorityDecayHalfLife is 0), and all of it is cleared whenever the cluster's "
        "scheduler restarts or reloads its settings (PriorityUsageResetPeriod NOW)."
    )
    assert "cleared now" not in fading
    weekly = FairShare("cluster1", 0.25, 0.5, 0.5, reset_period="WEEKLY").fading
    assert weekly.endswith("and all of it is cleared weekly (PriorityUsageResetPeriod).")
