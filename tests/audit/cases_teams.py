"""Audit cases of teams, memberships, and the Slurm sync and import (:mod:`teams`); the Slurm sync's
before-values are what the recorded ``sacctmgr`` output says."""

from __future__ import annotations

from tests.audit.world import World, read
from tests.conftest import FIXTURES


# --- teams and memberships -------------------------------------------------------------------------
def make_team(name: str = "vision", members=(), *, role="MEMBER", source="CLAIM", **kw):
    from teams.models import Membership, Team

    team = Team.objects.create(name=name, description=f"{name} team", **kw)
    for user in members:
        Membership.objects.create(team=team, user=user, role=role, source=source)
    return team


def membership(team, user) -> dict:
    """The membership's role and source as stored now; ``{}`` when there is none."""
    from teams.models import Membership

    row = Membership.objects.filter(team=team, user=user).values("role", "source").first()
    return row or {}


def membership_slurm_import(w: World):
    from teams.services import memberships_from_slurm

    team = make_team()
    before = membership(team, w.alice)
    memberships_from_slurm(user=w.alice, accounts=["vision"])
    return before, membership(team, w.alice)


def membership_claims_add(w: World):
    from teams.services import memberships_from_claims

    team = make_team()
    assert membership(team, w.alice) == {}
    memberships_from_claims(user=w.alice, groups=["vision"])
    return {"role": None}, membership(team, w.alice)


def membership_claims_change(w: World):
    from teams.services import memberships_from_claims

    team = make_team(members=[w.alice])
    before = membership(team, w.alice)
    memberships_from_claims(user=w.alice, groups=["vision-leads"])
    return before, membership(team, w.alice)


def membership_claims_remove(w: World):
    from teams.services import memberships_from_claims

    team = make_team(members=[w.alice])
    before = membership(team, w.alice)
    memberships_from_claims(user=w.alice, groups=[])
    assert membership(team, w.alice) == {}
    return before, {"role": None}


def team_limits(w: World):
    from teams.services import team_set_limits

    team = make_team(gpu_minutes_quota=600, gpu_limit=4)
    before = read(team, "gpu_minutes_quota", "gpu_limit")
    team_set_limits(team=team, gpu_hours_quota=20, gpu_limit=8, by=w.dana)
    return before, read(team, "gpu_minutes_quota", "gpu_limit")


def membership_set_change(w: World):
    from teams.services import membership_set

    team = make_team(members=[w.alice])
    before = membership(team, w.alice)
    membership_set(team=team, user=w.alice, role="LEAD", by=w.dana)
    return before, membership(team, w.alice)


def membership_set_new(w: World):
    from teams.services import membership_set

    team = make_team()
    before = membership(team, w.alice)
    membership_set(team=team, user=w.alice, role="MEMBER", by=w.dana)
    return before, membership(team, w.alice)


def membership_remove(w: World):
    from teams.services import membership_remove

    team = make_team(members=[w.alice], role="LEAD", source="ADMIN")
    before = membership(team, w.alice)
    membership_remove(team=team, user=w.alice, by=w.dana)
    return before, membership(team, w.alice)


def user_admin_override(w: World):
    from teams.services import user_set_admin_override

    before = read(w.alice, "admin_override", "is_staff")
    user_set_admin_override(user=w.alice, is_admin=True, by=w.dana)
    return before, read(w.alice, "admin_override", "is_staff")


# --- the Slurm sync and import (before: what the recorded sacctmgr output says) --------------------
def _recorded(name: str) -> str:
    return (FIXTURES / "slurm" / "22.05" / f"sacctmgr_{name}.txt").read_text()


def _sync(w: World, *commands: list[str]) -> None:
    """``teams.sync.associations.teams_sync`` as the worker runs it, against the recorded demo cluster
    (vision: alice, carol, GrpTRES gres/gpu=6, GrpTRESMins gres/gpu=6000; nlp: bob, dana; every
    user's default account is their only one), answering ``commands`` with success. The site has one
    cluster (``cluster1``), which each sync row names in ``new``."""
    from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_USERS
    from teams.sync.associations import teams_sync

    w.settings.PORTAL_CLUSTERS_FILE = ""
    w.slurm.expect(SHOW_ASSOCIATIONS, stdout=_recorded("show_association"))
    w.slurm.expect(SHOW_USERS, stdout=_recorded("show_user"))
    for argv in commands:
        w.slurm.expect(argv)
    report = teams_sync(actor=w.dana)
    assert report.ok and not w.slurm.script, report.lines


def _people(w: World, *names: str) -> dict:
    from accounts.models import User

    return {"alice": w.alice, "dana": w.dana} | {n: User.objects.create(username=n) for n in names}


SACCTMGR = ["sacctmgr", "-i"]
#: What each ``slurm.sync.*`` row's ``new`` adds: the cluster whose slurmdbd was changed.
ON = {"cluster": "cluster1"}


def sync_add_account(w: World):
    make_team("robots")  # the recorded cluster has no account robots
    _sync(w, [*SACCTMGR, "add", "account", "name=robots", "description=robots team"])
    return {}, {"account": "robots", "description": "robots team", **ON}


def sync_add_user(w: World):
    p = _people(w, "carol", "erin")
    make_team("vision", [p["alice"], p["carol"], p["erin"]], gpu_limit=6, gpu_minutes_quota=6000)  # erin: no Slurm user yet
    _sync(w, [*SACCTMGR, "add", "user", "name=erin", "account=vision", "defaultaccount=vision"])
    return {}, {"association": "vision/erin", "default_account": "vision", **ON}


def sync_set_limits(w: World):
    p = _people(w, "carol")
    team = make_team("vision", [p["alice"], p["carol"]], gpu_limit=8, gpu_minutes_quota=6000)
    _sync(w, [*SACCTMGR, "modify", "account", "where", "name=vision", "set", "GrpTRES=gres/gpu=8"])
    return {"gpu_limit": 6, "gpu_minutes_quota": 6000}, read(team, "gpu_limit", "gpu_minutes_quota") | ON


def _bob_moves_from_nlp_to_vision(w: World) -> None:
    """bob (default account nlp) leaves nlp and joins vision: add, change the default, remove."""
    p = _people(w, "bob", "carol")
    make_team("vision", [p["alice"], p["carol"], p["bob"]], gpu_limit=6, gpu_minutes_quota=6000)
    make_team("nlp", [p["dana"]])
    _sync(
        w,
        [*SACCTMGR, "add", "user", "name=bob", "account=vision"],
        [*SACCTMGR, "modify", "user", "where", "name=bob", "set", "defaultaccount=vision"],
        [*SACCTMGR, "delete", "user", "name=bob", "account=nlp"],
    )


def sync_set_default_account(w: World):
    _bob_moves_from_nlp_to_vision(w)
    return {"default_account": "nlp"}, {"default_account": "vision", **ON}


def sync_remove_user(w: World):
    _bob_moves_from_nlp_to_vision(w)
    return {"association": "nlp/bob"}, ON


def sync_delete_user(w: World):
    p = _people(w, "bob", "carol")
    make_team("vision", [p["alice"], p["carol"]], gpu_limit=6, gpu_minutes_quota=6000)
    make_team("nlp", [p["dana"]])  # bob leaves his only account: his Slurm user record goes
    _sync(w, [*SACCTMGR, "delete", "user", "name=bob"])
    return {"associations": ["nlp/bob"], "slurm_user": "bob"}, ON


def _import(w: World):
    from slurm.accounting import SHOW_ACCOUNTS, SHOW_ASSOCIATIONS, SHOW_USERS
    from teams.models import Team
    from teams.sync.associations import teams_import

    w.settings.PORTAL_CLUSTERS_FILE = ""  # one cluster, scripted below
    make_team("vision")  # known: only nlp is new (members bob, dana; dana is a portal user)
    w.slurm.expect(SHOW_ASSOCIATIONS, stdout=_recorded("show_association"))
    w.slurm.expect(SHOW_USERS, stdout=_recorded("show_user"))
    w.slurm.expect(SHOW_ACCOUNTS, stdout=_recorded("show_account"))
    assert not Team.objects.filter(name="nlp").exists()
    assert teams_import(actor=w.dana) == 1
    return Team.objects.get(name="nlp")


def slurm_import_team(w: World):
    team = _import(w)
    return {}, read(team, "description", "gpu_limit", "gpu_minutes_quota")


def slurm_import_membership(w: World):
    team = _import(w)
    return {}, membership(team, w.dana)


# --- the site policy's QOS limits (teams/sync/policy.py; before: the recorded sacctmgr show qos) ---
def _sync_policy_first(w: World, qos_text: str, *commands: list[str]) -> None:
    """:func:`_sync` with the site policy managed: ``sacctmgr show qos`` answers ``qos_text`` and no team
    is managed, so ``commands`` are the QOS changes only."""
    from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_QOS, SHOW_USERS
    from teams.sync.associations import teams_sync

    w.settings.PORTAL_CLUSTERS_FILE = ""
    w.slurm.expect(SHOW_ASSOCIATIONS, stdout=_recorded("show_association"))
    w.slurm.expect(SHOW_USERS, stdout=_recorded("show_user"))
    w.slurm.expect(SHOW_QOS, stdout=qos_text)
    for argv in commands:
        w.slurm.expect(argv)
    report = teams_sync(actor=w.dana)
    assert report.ok and not w.slurm.script, report.lines


def sync_add_qos(w: World):
    w.settings.PORTAL_SMALL_POOL_PARTITION = "small"  # the pool's partition QOS is missing: created
    argv = [*SACCTMGR, "add", "qos", "name=small", "MaxTRESPerJob=gres/gpu=1", "MaxWall=60"]
    _sync_policy_first(w, "normal|||||\n", argv)
    return {}, {"max_gpus_per_job": 1, "max_wall_min": 60, **ON}


def sync_set_qos(w: World):
    w.settings.PORTAL_USER_MAX_GPUS, w.settings.PORTAL_USER_MAX_SUBMIT_JOBS = "4", "20"
    argv = [*SACCTMGR, "modify", "qos", "where", "name=normal", "set", "MaxTRESPerUser=gres/gpu=4", "MaxSubmitJobsPerUser=20"]
    _sync_policy_first(w, (FIXTURES / "slurm" / "22.05" / "policy" / "sacctmgr_show_qos.txt").read_text(), argv)
    return {"max_gpus_per_user": None, "max_submit_per_user": None}, {"max_gpus_per_user": 4, "max_submit_per_user": 20, **ON}


def _class_qos_recorded(name: str) -> str:
    """A recorded class QOS output; the scavenger QOS with the GrpTRESMins the sync keeps (appended, see the README)."""
    text = (FIXTURES / "slurm" / "22.05" / "policy" / name).read_text()
    kept = "scavenger|0||requeue|0.000000|00:01:00||billing=1000000000,gres/gpu=1000000000"
    return text.replace("scavenger|0||requeue|0.000000|00:01:00||", kept)


def sync_keep_class_qos(w: World):
    """Priority classes on: the sync reads the classes' QOS (recorded after a sync, scavenger's GraceTime
    changed to 30 s since) and sets GraceTime back to the setting's 60 s."""
    from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_USERS
    from teams.sync.associations import teams_sync
    from teams.sync.classes import SHOW_ASSOCIATION_QOS, SHOW_CLASS_QOS

    w.settings.PORTAL_CLUSTERS_FILE, w.settings.PORTAL_PRIORITY_CLASSES = "", True
    w.slurm.expect(SHOW_ASSOCIATIONS, stdout="")
    w.slurm.expect(SHOW_USERS, stdout="")
    w.slurm.expect(
        SHOW_CLASS_QOS, stdout=_class_qos_recorded("sacctmgr_show_class_qos_after.txt").replace("00:01:00", "00:00:30")
    )
    w.slurm.expect(SHOW_ASSOCIATION_QOS, stdout=_class_qos_recorded("sacctmgr_show_association_qos_after.txt"))
    w.slurm.expect([*SACCTMGR, "modify", "qos", "where", "name=scavenger", "set", "GraceTime=60"])
    report = teams_sync(actor=w.dana)
    assert report.ok and not w.slurm.script, report.lines
    return {"GraceTime": "30"}, {"GraceTime": "60", **ON}


def sync_grant_class_qos(w: World):
    """The classes' plan on the recorded associations of a cluster without classes (each has QOS
    normal only), applied as the sync applies it: vision is given high and scavenger."""
    from slurm import get_gateway
    from teams.priority_classes import priority_classes
    from teams.sync.associations import apply_actions
    from teams.sync.classes import GrantClassQos, parse_association_qos, parse_class_qos, plan_classes

    qos = parse_class_qos(_class_qos_recorded("sacctmgr_show_class_qos_after.txt"))
    lists = parse_association_qos(_class_qos_recorded("sacctmgr_show_association_qos_before.txt"))
    [grant] = [a for a in plan_classes(priority_classes(), qos, lists, accounts=("vision",)) if isinstance(a, GrantClassQos)]
    w.slurm.expect(grant.argv)
    apply_actions([grant], get_gateway("cluster1"), actor=w.dana, cluster="cluster1")
    assert not w.slurm.script
    return {"qos": ["normal"]}, {"qos": ["high", "normal", "scavenger"], **ON}
