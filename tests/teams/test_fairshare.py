"""A team's fair share on the team page (teams/usage/fairshare.py), from the usage refresh's sshare
with its fair-share columns, recorded on both clusters (tests/fixtures/slurm/<release>/fairshare/,
cluster/record_fairshare.py): vision used nearly all of its level's usage (LevelFS 0.26), nlp very
little (LevelFS about 10)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slurm.accounting import SHOW_SHARES, parse_config, parse_sshare
from teams.usage.cache import UsageStatus, _store, team_usage
from teams.usage.fairshare import FairShare, fair_share_of
from tests.conftest import FIXTURES
from tests.teams.test_pages import world  # noqa: F401  (fixture)

RELEASES = ["22.05", "24.11"]


def recorded(release: str, name: str) -> str:
    return (FIXTURES / "slurm" / release / "fairshare" / name).read_text()


def fair_shares(release: str) -> dict[str, FairShare]:
    rows, config = parse_sshare(recorded(release, "sshare.txt")), parse_config(recorded(release, "config.txt"))
    return {team: fair_share_of(rows, team, config, cluster="cluster1") for team in ("vision", "nlp")}


@pytest.mark.parametrize("release", RELEASES)
def test_the_recorded_columns_are_the_ones_asked_for_and_read_by_name(release):
    assert recorded(release, "sshare.txt").splitlines()[0] == SHOW_SHARES[-1].replace(",", "|")
    rows = {(r.account, r.user): r for r in parse_sshare(recorded(release, "sshare.txt"))}
    vision, alice, carol = rows[("vision", "")], rows[("vision", "alice")], rows[("vision", "carol")]
    assert (vision.norm_shares, vision.fairshare) == (0.25, None)  # Fair Tree: no factor on an account's row
    assert 0.9 < vision.effective_usage < 1 and 0.2 < vision.level_fs < 0.3
    assert (alice.fairshare, carol.fairshare) == (pytest.approx(0.166667), pytest.approx(0.333333))
    assert math.isinf(carol.level_fs)  # sshare prints inf for an association that used nothing


def test_an_output_of_the_quota_columns_alone_has_no_fair_share():
    """The outputs recorded before the fair-share columns were asked for still read, without them."""
    [row] = parse_sshare("Account|User|GrpTRESMins|GrpTRESRaw\n vision||gres/gpu=600|gres/gpu=5\n")
    assert (row.gpu_minutes_limit, row.norm_shares, row.level_fs) == (600, None, None)
    assert fair_share_of([row], "vision", parse_config(""), cluster="cluster1") is None


def test_a_fair_share_figure_that_is_not_a_number_is_refused_with_its_column():
    text = SHOW_SHARES[-1].replace(",", "|") + "\n vision||||lots|0.5||\n"
    with pytest.raises(ValueError, match="sshare NormShares 'lots' is not a number"):
        parse_sshare(text)


@pytest.mark.parametrize("release", RELEASES)
def test_what_each_teams_standing_means_for_its_next_jobs(release):
    teams = fair_shares(release)
    vision, nlp = teams["vision"], teams["nlp"]
    assert vision.standing.startswith("On cluster1 the team holds 25% of the shares at its level and has used 9")
    assert "more than its share (LevelFS 0.26, below 1): its jobs get less from fair share" in vision.standing
    assert "less than its share (LevelFS " in nlp.standing and "its jobs get more from fair share" in nlp.standing
    assert vision.members == {"alice": pytest.approx(0.166667), "carol": pytest.approx(0.333333)}
    # the lab's slurm.conf: PriorityDecayHalfLife=0, PriorityUsageResetPeriod=MONTHLY
    assert (
        vision.fading
        == "Past usage does not fade (PriorityDecayHalfLife is 0), and all of it is cleared monthly (PriorityUsageResetPeriod)."
    )


def test_a_team_that_used_nothing_and_usage_that_fades():
    fresh = FairShare("cluster2", 0.25, 0.0, math.inf, decay_half_life_s=7 * 86400, reset_period="NONE")
    assert fresh.standing.endswith("usage: nothing yet, so its jobs get the most from fair share.")
    assert (
        fresh.fading
        == "Past usage counts half after 7 days (PriorityDecayHalfLife), and it is never cleared (PriorityUsageResetPeriod NONE)."
    )
    assert replace(fresh, decay_half_life_s=36 * 3600).fading.startswith("Past usage counts half after 36 hours")


def test_the_team_page_shows_each_clusters_fair_share(client, world):  # noqa: F811
    users, *_ = world
    vision = team_usage("vision").clusters[0]  # the world's figures, on the default cluster
    _store({"vision": replace(vision, fair_share=fair_shares("22.05")["vision"])}, UsageStatus(taken_at=1795970000.0))
    client.force_login(users["carol"])  # vision's lead
    page = client.get("/teams/vision/").content.decode()
    assert 'data-testid="fair-share"' in page
    assert "more than its share (LevelFS 0.26, below 1)" in page and "Past usage does not fade" in page
    assert '<tr data-member="alice"><td><code>alice</code></td><td class="num">0.17</td></tr>' in page


def test_without_fair_share_figures_the_page_has_no_card(client, world):  # noqa: F811
    users, *_ = world
    client.force_login(users["carol"])
    page = client.get("/teams/vision/").content.decode()
    assert 'data-testid="usage-summary"' in page and 'data-testid="fair-share"' not in page


def test_the_api_gives_each_clusters_fair_share_with_the_pages_sentence(client, world):  # noqa: F811
    users, *_ = world
    vision = team_usage("vision").clusters[0]
    standing = fair_shares("22.05")["vision"]
    _store({"vision": replace(vision, fair_share=standing)}, UsageStatus(taken_at=1795970000.0))
    client.force_login(users["carol"])  # vision's lead, as the team page
    body = client.get("/api/v1/teams/vision/usage").json()
    [part] = [p for p in body["clusters"] if p["measured"]]
    share = part["fair_share"]
    assert share["level_fs"] == pytest.approx(standing.level_fs) and share["members"]["alice"] == pytest.approx(0.17, abs=0.005)
    assert share["sentence"] == f"{standing.standing} {standing.fading}" and "LevelFS 0.26, below 1" in share["sentence"]
    assert "fair_share" not in body  # the sum over clusters has none of its own: each cluster's is in its part
    # A team that used nothing has an infinite LevelFS: null in JSON, and the sentence says what it means.
    fresh = replace(standing, effective_usage=0.0, level_fs=math.inf)
    _store({"vision": replace(vision, fair_share=fresh)}, UsageStatus(taken_at=1795970000.0))
    share = client.get("/api/v1/teams/vision/usage").json()["clusters"][0]["fair_share"]
    assert share["level_fs"] is None and "nothing yet, so its jobs get the most from fair share" in share["sentence"]
    client.force_login(users["alice"])  # a member, not a lead: the team's usage is not hers to read
    assert client.get("/api/v1/teams/vision/usage").status_code == 404


@pytest.mark.parametrize("level_fs", [1.0, 0.999, 1.004])
def test_a_team_that_used_exactly_its_share_is_told_so(level_fs):
    """LevelFS 1 (a lone account at its level: all the shares, all the usage) is neither above nor
    below 1, and neither "less" nor "more" than its share; nor is a figure that shows as 1.00."""
    even = FairShare("cluster1", 1.0, 1.0, level_fs)
    assert "its share (LevelFS 1.00): its jobs get as much from fair share as its shares give" in even.standing
    assert "less than" not in even.standing and "more than" not in even.standing
    assert "above 1" not in even.standing and "below 1" not in even.standing
    assert "LevelFS 1.01, above 1" in replace(even, level_fs=1.006).standing
    assert "LevelFS 0.99, below 1" in replace(even, level_fs=0.994).standing
