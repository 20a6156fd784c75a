"""Session presets (interactive/presets.py): reading PORTAL_SESSION_PRESETS, the start-up check
portal.E011, which Start buttons are offered (interactive/starts.py) and what each says is free and
how long it will likely wait (interactive/waits.py), on the recorded 22.05 cluster."""

from __future__ import annotations

import time
from dataclasses import replace

import msgspec
import pytest
from django.core.checks import run_checks

from interactive.checks import check_session_presets
from interactive.kinds import KINDS, Program, SessionKind
from interactive.models import Session
from interactive.presets import PresetError, parse_presets, presets_for, site_presets
from interactive.starts import start_choices
from interactive.waits import availability, summarize_waiting, waiting_ahead
from slurm import SlurmGateway
from slurm.records import Node, QueueJob, Reservation
from slurm.snapshot import ClusterSnapshot, snapshot_key, snapshot_store, snapshot_take
from tests.fakes import EveryCluster, FakeTransport, cluster_transport


# --- reading ------------------------------------------------------------------------------------
def test_the_compact_form_and_json_read_the_same(settings):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    text = 'lab gpus=1 type=a100 hours=4; lab hours=2\nvscode gpus=2 cpus=4 memory=8G hours=8 "label=Big VS Code"'
    compact = parse_presets(text)
    assert [p.label for p in compact] == ["JupyterLab, 1 A100, 4 h", "JupyterLab, no GPU, 2 h", "Big VS Code"]
    first = compact[0]
    assert first.key == "preset-jupyterlab-1-a100-4-h"
    assert first.options == {
        "ide": "lab",
        "partition": "interactive",
        "gpu_type": "a100",
        "gpu_count": 1,
        "cpus": 2,
        "memory_mb": 4096,
        "hours": 4,
    }
    assert compact[2].options["memory_mb"] == 8192 and compact[2].options["cpus"] == 4
    assert first.details == "2 CPUs · 4G memory · partition interactive"
    as_json = parse_presets(
        '[{"kind": "lab", "gpus": 1, "type": "a100", "hours": 4}, {"kind": "lab", "hours": 2},'
        ' {"kind": "vscode", "gpus": 2, "cpus": 4, "memory": "8G", "hours": 8, "label": "Big VS Code"}]'
    )
    assert as_json == compact
    assert parse_presets("") == [] and parse_presets(" ; ;\n") == []
    assert parse_presets("lab gpus=2 hours=1")[0].label == "JupyterLab, 2 GPUs, 1 h"  # any type


@pytest.mark.parametrize(
    "text, words",
    [
        ("lab gpus=4 type=a100 hours=4", ["Preset 1 (JupyterLab, 4 A100, 4 h)", "at most 2 GPUs"]),
        ("lab hours=2; lab hours=9", ["Preset 2 (JupyterLab, no GPU, 9 h)", "1 to 8 hours"]),
        ("lab partition=train", ["Preset 1", "interactive partition(s) only"]),
        ("lab hours=2; jupyter gpus=1", ["Preset 2 (jupyter gpus=1)", "not a session kind", "lab, vscode"]),
        ("lab gpu=1", ["Preset 1 (lab gpu=1)", "unknown key(s) gpu"]),
        ("lab gpus=one", ["gpus must be a whole number, not 'one'"]),
        ("lab gpus=-1", ["gpus must be a whole number"]),
        ("lab memory=4000", ["Preset 1 (lab memory=4000)", "write 4000M for MiB"]),
        ("lab memory=lots", ["'lots' is not an amount of memory"]),
        ("lab hours=2 hours=3", ["names 'hours' twice"]),
        ("gpus=1 lab", ["must start with a session kind"]),
        ("lab hours", ["'hours' is not key=value"]),
        ('lab "label=x', ["cannot be read", "close the quote"]),
        ("lab hours=2; lab hours=2", ["Preset 2 (JupyterLab, no GPU, 2 h) has the same label as an earlier one"]),
        ("lab label=---", ["needs a letter or digit"]),
        ('[{"kind": "lab", "gpus": true}]', ["gpus must be a whole number"]),
        ('[{"kind": "lab"}, 3]', ["must be a list of objects"]),
        ('[{"kind": "lab"', ["not valid JSON"]),
    ],
)
def test_a_bad_preset_is_named_and_said_why(settings, text, words):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    settings.PORTAL_SESSION_MAX_GPUS, settings.PORTAL_SESSION_MAX_HOURS = 2, 8
    with pytest.raises(PresetError) as refused:
        parse_presets(text)
    for word in words:
        assert word in str(refused.value), (text, str(refused.value))


def test_the_start_up_check_names_every_bad_preset(settings):
    settings.PORTAL_SESSION_PRESETS = "lab gpus=1 type=a100 hours=4; lab gpus=4 hours=2; lab hours=2; vs"
    errors = check_session_presets()
    assert [e.id for e in errors] == ["portal.E011", "portal.E011"]
    assert errors[0].msg.startswith("Preset 2 (JupyterLab, 4 GPUs, 2 h): Sessions may have at most 2 GPUs")
    assert errors[1].msg.startswith("Preset 4 (vs): 'vs' is not a session kind")
    assert "PORTAL_SESSION_PRESETS" in errors[0].hint
    assert {e.id for e in run_checks(tags=["portal"])} >= {"portal.E011"}  # registered with Django's checks
    settings.PORTAL_SESSION_PRESETS = "lab gpus=1 type=a100 hours=4; lab hours=2"
    assert check_session_presets() == []
    settings.PORTAL_SESSION_PRESETS = ""  # no presets at all: fine
    assert check_session_presets() == [] and site_presets() == []


def test_unset_the_default_presets_are_used_and_pass_the_check(settings):
    settings.PORTAL_SESSION_PRESETS = None
    settings.PORTAL_SESSION_PRESETS_DEFAULT = "lab gpus=1 type=a100 hours=4; lab hours=2"
    assert check_session_presets() == []
    assert [p.label for p in site_presets()] == ["JupyterLab, 1 A100, 4 h", "JupyterLab, no GPU, 2 h"]


def test_the_shipped_defaults_pass_the_check():
    """The site default (portal/settings/base.py) and the local cluster's (dev.py) read cleanly
    under the default session rules."""
    from portal.settings import base, dev

    for text in (base.PORTAL_SESSION_PRESETS_DEFAULT, dev.PORTAL_SESSION_PRESETS_DEFAULT):
        assert parse_presets(text), text


def test_a_kind_that_is_not_installed_passes_the_check_but_is_not_offered(settings, monkeypatch, db, clean_cache, slurm_json):
    """Installing code-server later must not need a config change: the check accepts the kind; the
    button says why it is not offered."""
    missing = SessionKind("ghost", "Ghost IDE", default_url="/ghost/", program=Program("ghost", lambda: "/nonexistent"))
    monkeypatch.setitem(KINDS, "ghost", missing)
    settings.PORTAL_SESSION_PRESETS = "ghost hours=2"
    assert check_session_presets() == []
    choices = _choices(settings, monkeypatch, slurm_json, "ghost hours=2")
    assert not choices[0].offered and "Ghost IDE is not installed" in " ".join(choices[0].why_not)


# --- which are offered -------------------------------------------------------------------------
def _choices(settings, monkeypatch, slurm_json, text, *, user=None, now=None):
    from accounts.models import User

    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_SESSION_PRESETS = text
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=now or time.time()))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))  # no Slurm call
    if user is None:
        user = User.objects.get_or_create(username="alice", defaults={"oidc_sub": "a", "slurm_accounts": ["vision"]})[0]
    return start_choices(user=user)[0]


@pytest.mark.django_db
def test_a_preset_the_policy_refuses_is_offered_disabled_with_the_form_s_words(settings, monkeypatch, clean_cache, slurm_json):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    text = "lab gpus=1 type=a100 hours=4; lab gpus=1 type=t4 hours=2; lab cpus=64 hours=1; lab gpus=2 hours=2"
    settings.PORTAL_SESSION_MAX_GPUS = 1  # lowered since start-up: the 2-GPU preset is refused, not hidden
    a100, t4, cpus, two = _choices(settings, monkeypatch, slurm_json, text)
    assert a100.offered and a100.why_not == ()
    assert not t4.offered and "t4" in " ".join(t4.why_not) and "a100" in " ".join(t4.why_not)  # the policy's sentence
    assert not cpus.offered and "CPU" in " ".join(cpus.why_not)
    assert not two.offered and "Sessions may have at most 1 GPUs" in " ".join(two.why_not)


@pytest.mark.django_db
def test_a_user_in_no_team_gets_every_button_disabled_with_why(settings, monkeypatch, clean_cache, slurm_json, django_user_model):
    nobody = django_user_model.objects.create(username="dana", oidc_sub="d", slurm_accounts=[])
    choices = _choices(settings, monkeypatch, slurm_json, "lab hours=2; lab gpus=1 type=a100 hours=4", user=nobody)
    assert choices and all(not c.offered for c in choices)
    assert all("You are not in any team (Slurm account)" in c.why_not[0] for c in choices)


@pytest.mark.django_db
def test_the_last_session_s_settings_come_first(settings, monkeypatch, clean_cache, slurm_json, django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_sub="a", slurm_accounts=["vision"])
    settings.PORTAL_SESSION_PRESETS = "lab hours=2"
    assert [p.label for p in presets_for(user=alice)] == ["JupyterLab, no GPU, 2 h"]  # no session yet
    for cpus, created in ((4, "old"), (3, "new")):
        Session.objects.create(
            user=alice,
            server_name=f"lab-{created}",
            ide="lab",
            partition="interactive",
            gpu_type="a100",
            gpu_count=1,
            cpus=cpus,
            memory_mb=3072,
            time_limit_min=180,
            state="STOPPED",
        )
    choices = _choices(settings, monkeypatch, slurm_json, "lab hours=2", user=alice)
    last = choices[0].preset
    newest = Session.objects.filter(user=alice).order_by("-created_at").first()
    assert last.key == f"last-{newest.key}" and last.label == "Your last session: JupyterLab, 1 A100, 3 h"
    assert last.options == {
        "ide": "lab",
        "partition": "interactive",
        "gpu_type": "a100",
        "gpu_count": 1,
        "cpus": 3,
        "memory_mb": 3072,
        "hours": 3,
        "cluster": "cluster1",  # kept: the local clusters file has two session clusters
    }
    assert [c.preset.label for c in choices[1:]] == ["JupyterLab, no GPU, 2 h"]


# --- what is free and the wait -----------------------------------------------------------------
def _node(name="node1", *, free_gpus=4, cpus_free=8, gpus=None, partitions=("interactive",), state="idle"):
    gpus = gpus or {"a100": 4}
    used = {t: n - free_gpus for t, n in gpus.items()}
    return Node(name, state, (), partitions, 8, 8 - cpus_free, 16000, 0, gpus, used)


def _pending(job_id, *, gpus=None, start=0, reason="Resources", partition="interactive", array=""):
    return QueueJob(
        job_id, 0, None, array, "x", "bob", "nlp", partition, "PENDING", reason, 100, 1, start, 0, 60, gpus or {}, "", ""
    )


def _wait(preset_text, nodes, jobs, *, now=None, current=True, reservations=()):
    now = now or time.time()
    snapshot = ClusterSnapshot(
        taken_at=now, attempted_at=now, cluster="cluster1", nodes=nodes, jobs=jobs, reservations=list(reservations)
    )
    preset = parse_presets(preset_text)[0]
    return availability(
        preset, snapshot=replace(snapshot, jobs=[]), current=current, summary=summarize_waiting(snapshot, {"interactive"})
    )


def test_free_now_starts_at_once_only_when_it_fits_and_nothing_waits(settings):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=2)], [])
    assert (a.free, a.wait, a.starts_now) == ("2 of 4 A100 free now", "free now: starts at once", True)
    # GPUs free but every CPU taken: it does not fit, and Slurm has no estimate for a job not queued
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=2, cpus_free=0)], [])
    assert a.wait == "no estimate: not enough free now, and Slurm estimates a start only for a job that waits"
    assert not a.starts_now
    # a node that is drained takes nothing; its GPUs are not free
    drained = msgspec.structs.replace(_node(free_gpus=4), state="drained")
    a = _wait("lab gpus=1 type=a100 hours=4", [drained], [])
    assert a.free == "0 of 4 A100 free now" and a.wait.startswith("no estimate")
    assert _wait("lab hours=2", [_node(free_gpus=0)], []).wait == "free now: starts at once"  # no GPU asked
    assert _wait("lab hours=2", [_node(free_gpus=0)], []).free == ""
    assert _wait("lab gpus=1 type=h100 hours=2", [_node()], []).free == "no H100 in interactive"


def test_the_wait_is_slurm_s_estimate_for_the_jobs_waiting_ahead(settings):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    now = time.time()
    soon, later = int(now + 1200), int(now + 2400)
    ahead = [_pending(10, gpus={"a100": 4}, start=soon), _pending(11, gpus={"a100": 2}, start=later)]
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=2)], ahead, now=now)
    assert a.wait.startswith("likely wait: until about ") and not a.starts_now
    assert a.wait.endswith("Slurm's estimate for the 2 jobs waiting ahead for A100s")
    assert "in about 40 min" in a.wait and a.estimate is not None and int(a.estimate.timestamp()) == later
    # only some estimated: said so
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=0)], [*ahead, _pending(12, gpus={"a100": 1})], now=now)
    assert a.wait.endswith("the 3 jobs waiting ahead for A100s (2 of them estimated)")
    # none estimated: no guess
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=0)], [_pending(12, gpus={"a100": 1})], now=now)
    assert a.wait == "no estimate: 1 job waits ahead for A100s, and Slurm has not estimated their start"
    assert a.estimate is None


def test_a_preset_that_runs_into_maintenance_says_when_it_can_start(settings):
    """Free now, but the preset's 4 h cross a maintenance window on every node of its partition:
    Slurm holds the session until the window is over, so the button says the Sessions form's
    sentence, never "starts at once"; a preset short enough to end before it still starts at once;
    Slurm's own estimate for the jobs ahead, when later than the window's end, stays the wait."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    now = int(time.time())
    window = Reservation("maint_tonight", now + 3600, now + 6 * 3600, ("node1",), flags=("MAINT",))
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=2)], [], now=now, reservations=[window])
    assert a.free == "2 of 4 A100 free now" and not a.starts_now
    assert a.wait.startswith("This session cannot start before ") and "would run into maintenance" in a.wait
    assert "(reservation maint_tonight on partition interactive)" in a.wait
    assert a.estimate is not None and int(a.estimate.timestamp()) == now + 6 * 3600
    short = _wait("lab gpus=1 type=a100 hours=1", [_node(free_gpus=2)], [], now=now, reservations=[window])
    assert short.wait == "free now: starts at once" and short.starts_now
    later = now + 8 * 3600
    ahead = [_pending(10, gpus={"a100": 1}, start=later)]
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=0)], ahead, now=now, reservations=[window])
    assert a.wait.startswith("likely wait: until about ") and int(a.estimate.timestamp()) == later


def test_what_waits_ahead(settings):
    """Held jobs (quota, holds), dependencies, --begin and array limits do not wait ahead; another
    GPU type does not; an untyped GPU request does; an array counts its pending tasks; another
    partition does not."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    free = [_node(free_gpus=2)]
    not_ahead = [
        _pending(1, gpus={"a100": 1}, reason="AssocGrpGRESMinutes"),
        _pending(2, gpus={"a100": 1}, reason="JobHeldUser"),
        _pending(3, gpus={"a100": 1}, reason="Dependency"),
        _pending(4, gpus={"a100": 1}, reason="BeginTime"),
        _pending(5, gpus={"t4": 1}),
        _pending(6, gpus={"a100": 1}, partition="train"),
    ]
    assert _wait("lab gpus=1 type=a100 hours=4", free, not_ahead).wait == "free now: starts at once"
    untyped = _wait("lab gpus=1 type=a100 hours=4", free, [_pending(7, gpus={"": 1})])
    assert untyped.wait.startswith("no estimate: 1 job waits ahead for A100s")
    array = _wait("lab gpus=1 hours=4", free, [_pending(8, gpus={"a100": 1}, array="1-5%2")])
    assert array.wait.startswith("no estimate: 5 jobs wait ahead for GPUs")
    cpu_only = _wait("lab hours=2", free, [_pending(9)])
    assert cpu_only.wait.startswith("no estimate: 1 job waits ahead,")


def test_no_estimate_without_current_figures(settings):
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    a = _wait("lab gpus=1 type=a100 hours=4", [_node(free_gpus=2)], [], current=False)
    assert a.wait == "no estimate: the cluster's figures are not current" and a.free == "2 of 4 A100 free now"
    preset = parse_presets("lab hours=2")[0]
    assert availability(preset, snapshot=None, current=False, summary=None).wait == "no estimate: no figures from the cluster yet"


@pytest.mark.django_db
def test_the_recorded_queue_gives_slurm_s_estimate(settings, monkeypatch, clean_cache, slurm_json):
    """On the recorded 22.05 queue: job 4 waits in train for 4 A100 with Slurm's backfill start_time
    16:42 UTC; node1 (interactive) has no A100 free and 6 CPUs free."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive", "train"]
    text = "lab gpus=1 type=a100 hours=4; lab hours=2; lab gpus=1 type=a100 hours=4 partition=train"
    interactive_a100, cpu_only, train_a100 = _choices(settings, monkeypatch, slurm_json, text, now=1795969870.0)
    # that snapshot is old by the clock, so the figures are not current: no estimate, the numbers still shown
    assert interactive_a100.availability.free == "0 of 4 A100 free now"
    assert train_a100.availability.wait == "no estimate: the cluster's figures are not current"
    # read as if current
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1795969870.0)
    summary = summarize_waiting(snapshot, {"interactive", "train"})
    lite = replace(snapshot, jobs=[])
    train = availability(train_a100.preset, snapshot=lite, current=True, summary=summary)
    assert train.free == "0 of 8 A100 free now"
    assert train.wait.startswith("likely wait: until about 16:42 UTC")
    assert train.wait.endswith("Slurm's estimate for the job waiting ahead for A100s")
    inter = availability(interactive_a100.preset, snapshot=lite, current=True, summary=summary)
    assert inter.wait == "no estimate: not enough free now, and Slurm estimates a start only for a job that waits"
    # node1 is in train too, where job 4 waits (tests/interactive/test_waits_shared_nodes.py)
    cpu = availability(cpu_only.preset, snapshot=lite, current=True, summary=summary)
    assert cpu.wait == "may wait: 1 job in train is waiting for the same nodes"


@pytest.mark.django_db
def test_the_queue_is_summed_once_per_snapshot(settings, clean_cache, slurm_json):
    """Pages read the whole queue at most once per poll: the summary is kept with the snapshot's
    time; a newer snapshot is summed again; without the stored queue there is no summary."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive", "train"]
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1795969870.0)
    snapshot_store(snapshot)
    first = waiting_ahead("cluster1", snapshot.taken_at)
    assert first["train"]["type:a100"] == [1, 1, 1795970533]
    clean_cache.delete(snapshot_key("cluster1"))  # the whole queue gone: the summary is still there
    assert waiting_ahead("cluster1", snapshot.taken_at) == first
    newer = replace(snapshot, taken_at=snapshot.taken_at + 5, jobs=[])
    snapshot_store(newer)
    assert waiting_ahead("cluster1", newer.taken_at) == {}
    clean_cache.delete(snapshot_key("cluster1"))
    assert waiting_ahead("cluster1", newer.taken_at + 5) is None


@pytest.mark.django_db
def test_the_last_session_s_image_comes_with_it_on_its_own_cluster(settings, clean_cache, django_user_model):
    """The preset of a session that ran in a site image sends that image (a cluster whose nodes lack the
    Jupyter venv, as the lab's cluster2, refuses none) and says so; one whose cluster no longer runs
    sessions starts on the default without it (the image is the old cluster's), and says that too."""
    from interactive.presets import last_session_preset

    alice = django_user_model.objects.create(username="alice", oidc_sub="a", slurm_accounts=["vision"])
    Session.objects.create(
        user=alice, server_name="lab-c2", ide="lab", partition="small", gpu_type="", gpu_count=0, cpus=1,
        memory_mb=2048, time_limit_min=60, state="STOPPED", cluster="cluster2", image_name="debian12-sklearn",
    )  # fmt: skip
    preset = last_session_preset(user=alice)
    assert preset.options["image"] == "debian12-sklearn" and preset.details.endswith(" · image debian12-sklearn")
    Session.objects.filter(user=alice).update(cluster="gone")
    preset = last_session_preset(user=alice)
    assert "image" not in preset.options and preset.details.endswith(
        "so it starts on cluster1 without its image debian12-sklearn"
    )
