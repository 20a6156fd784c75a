"""Pending reasons of the per-person caps and the small-job pool in the site's figures,
from recorded squeue output (``tests/fixtures/slurm/22.05/policy/``: alice's second 1-GPU job
pending ``QOSMaxGRESPerUser`` behind her first, cap 1) and recorded sbatch refusals."""

import json

import pytest
from msgspec.structs import replace

from jobs.models import Job
from jobs.reads.cap_reasons import cap_reason
from jobs.reads.queue import job_row
from jobs.reads.reasons import explain_reason
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.states import JobState
from tests.conftest import FIXTURES

pytestmark = pytest.mark.django_db
POLICY = FIXTURES / "slurm" / "22.05" / "policy"


@pytest.fixture
def alice(django_user_model, clean_cache):
    """Alice, with no snapshot stored (GPUs in use then come from the Job rows)."""
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def test_gpus_in_use_are_slurms_running_jobs_of_the_stored_snapshot(recorded_pair, settings):
    """With a snapshot, every running job of alice's counts (a session's or one from a shell too, which
    have no Job row), not only the Job rows; worked out once per snapshot."""
    from jobs.reads.cap_reasons import gpus_in_use, running_gpus
    from slurm.snapshot import ClusterSnapshot, snapshot_store

    queue = parse_jobs(json.loads((POLICY / "squeue_qos_max_gres_per_user.json").read_text()))
    session_job = replace(next(q for q in queue if q.state == "RUNNING"), job_id=999, gpus={"t4": 1}, comment="portal:x")
    snapshot_store(ClusterSnapshot(taken_at=2000.0, jobs=[*queue, session_job], cluster="cluster1"))
    assert running_gpus("cluster1") == {"alice": 2}
    assert gpus_in_use(recorded_pair["pending"]) == 2  # the Job rows alone say 1
    settings.PORTAL_USER_MAX_GPUS = "2"
    assert "You already use 2 of your 2 GPUs at once" in job_row(recorded_pair["pending"], {}).reason.sentence


@pytest.fixture
def recorded_pair(alice):
    """Alice's two jobs of the recording as the poller stores them: "running" (the first, running) and
    "pending" (the second, pending behind it)."""
    queue = parse_jobs(json.loads((POLICY / "squeue_qos_max_gres_per_user.json").read_text()))
    mine = sorted((j for j in queue if j.user == "alice" and j.state in ("RUNNING", "PENDING")), key=lambda j: j.job_id)
    rows = {}
    for role, q in zip(("running", "pending"), mine[:2], strict=True):
        rows[role] = Job.objects.create(
            user=alice, name="wrap", partition=q.partition, gpu_type="t4", gpu_count=sum(q.gpus.values()),
            memory_mb=100, time_limit_min=q.time_limit or 5, script="sleep 120", slurm_job_id=q.job_id,
            state=JobState.RUNNING if q.state == "RUNNING" else JobState.PENDING, reason=q.reason if q.state == "PENDING" else "",
        )  # fmt: skip
    assert rows["running"].state == JobState.RUNNING and rows["pending"].state == JobState.PENDING
    return rows


def test_gpu_cap_names_the_cap_and_the_figure(recorded_pair, settings):
    settings.PORTAL_USER_MAX_GPUS = "1"
    pending = recorded_pair["pending"]
    assert pending.reason == "QOSMaxGRESPerUser"  # what Slurm 22.05 wrote
    reason = job_row(pending, {}).reason
    assert reason.heading == "Held by a per-person cap:" and reason.holds
    assert reason.sentence == (
        "You already use 1 of your 1 GPU at once on cluster1 (the site allows at most 1 GPU at once per person) "
        "and this job asks for 1; it starts when one of your jobs ends."
    )
    assert reason.fix == "Wait for one of your jobs to end, or cancel one."
    # queued, not "held in small · Held by a per-person cap", held twice
    assert job_row(pending, {}).line.text.startswith(f"queued in {pending.partition} · Held by a per-person cap: ")


def test_gpu_cap_with_room_left_says_how_many_fit(recorded_pair, settings):
    settings.PORTAL_USER_MAX_GPUS = "4"
    pending = recorded_pair["pending"]
    pending.gpu_count = 4
    reason = cap_reason(explain_reason(pending.reason), pending)
    assert "You already use 1 of your 4 GPUs at once" in reason.sentence and "asks for 4" in reason.sentence
    assert reason.fix.endswith("ask for at most 3 GPUs to start now.")


def test_without_a_managed_cap_slurms_sentence_stays(recorded_pair):
    reason = job_row(recorded_pair["pending"], {}).reason
    assert reason == explain_reason("QOSMaxGRESPerUser")


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("h5-pool-2gpu", "QOSMaxGRESPerJob", "takes jobs of at most 1 GPU; this one asks for 2."),
        ("h5-pool-90min", "PartitionTimeLimit", "takes jobs of at most 1 h; this one asks for 90 min."),
    ],
)
def test_jobs_too_big_for_the_pool_pend_and_say_the_pools_figures(alice, settings, name, code, words):
    """Recorded: a 2-GPU and a 90-min job sent to small pend with these codes (never started there)."""
    settings.PORTAL_SMALL_POOL_PARTITION = "small"
    [q] = [j for j in parse_jobs(json.loads((POLICY / "squeue_pool_limits.json").read_text())) if j.name == name]
    assert (q.state, q.reason, q.partition) == ("PENDING", code, "small")
    job = Job.objects.create(
        user=alice, name=name, partition=q.partition, gpu_type="t4", gpu_count=sum(q.gpus.values()), memory_mb=100,
        time_limit_min=q.time_limit, script="x", slurm_job_id=q.job_id, state=JobState.PENDING, reason=q.reason,
    )  # fmt: skip
    reason = job_row(job, {}).reason
    assert reason.sentence.startswith("The small-job pool (partition small) ") and words in reason.sentence
    assert reason.holds and reason.fix.startswith("Ask for at most")


def test_submit_cap(recorded_pair, settings):
    settings.PORTAL_USER_MAX_SUBMIT_JOBS = "20"
    code = (POLICY / "sbatch_qos_max_submit_stderr.txt").read_text().splitlines()[0].removeprefix("sbatch: error: ")
    reason = cap_reason(explain_reason(code), recorded_pair["pending"])
    assert (
        reason.sentence
        == "You have as many jobs pending or running on cluster1 as the site allows one person (20; each array task counts)."
    )


def test_a_session_held_by_the_gpu_cap_says_it_on_its_card(recorded_pair, settings, alice):
    """A session's Slurm job pending QOSMaxGRESPerUser: its card's line has the cap in the site's figures
    (interactive.services: "Slurm reason: QOSMaxGRESPerUser (You already use 1 of your 1 GPU ...)")."""
    from interactive.models import Session
    from interactive.services import _cap_note

    settings.PORTAL_USER_MAX_GPUS = "1"
    session = Session.objects.create(
        user=alice, server_name="s1", ide="lab", partition="interactive", gpu_count=1, memory_mb=1000, time_limit_min=60
    )
    note = _cap_note(session, "QOSMaxGRESPerUser")
    assert note.startswith(" (You already use 1 of your 1 GPU at once on cluster1") and note.endswith("one of your jobs ends.)")
    assert _cap_note(session, "Resources") == ""
    settings.PORTAL_USER_MAX_GPUS = ""
    assert _cap_note(session, "QOSMaxGRESPerUser") == ""  # no figures known: Slurm's code alone


def test_the_pending_notification_names_the_cap(recorded_pair, settings, alice):
    """Pending longer than alice's chosen time because of her GPU cap: the notification says which cap."""
    from datetime import timedelta

    from django.utils import timezone as djtz

    from jobs.worker.notify import jobs_pending_notify
    from notifications.models import Notification
    from notifications.services import preferences_set

    settings.PORTAL_USER_MAX_GPUS = "1"
    Job.objects.filter(pk=recorded_pair["pending"].pk).update(slurm_submit_at=djtz.now() - timedelta(minutes=45))
    preferences_set(user=alice, email={}, pending_minutes=30)
    assert jobs_pending_notify() == 1
    (n,) = Notification.objects.filter(user=alice)
    assert "Why it waits: You already use 1 of your 1 GPU at once on cluster1" in n.body
    assert "Wait for one of your jobs to end, or cancel one." in n.body
