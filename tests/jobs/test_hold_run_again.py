"""Hold, release and run again from the job page: owner only (another user's job
is a 404, an admin's click a 403), refusals that say what to do, scontrol as the owner through the
gateway, a held job with no place in line; Run again submits the same settings, Run again with
changes opens the New job form filled in (an outside job's script read as the owner)."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from jobs.models import Job, JobOrigin
from jobs.reads.queue import job_row
from jobs.submit.holds import job_hold
from jobs.submit.rerun import without_directives
from jobs.worker.send import job_hold_send
from slurm import SlurmError, SlurmGateway
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.queue_index import queue_positions
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import EveryCluster, FakeTransport
from tests.jobs.test_job_pages import alice, cluster, make, no_slurm  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

SUDO = ["sudo", "-n", "-u", "alice", "--"]


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.content.decode(), "html.parser")


def textarea(page, name: str) -> str:
    """A textarea's value as a browser reads it (the newline after the tag is not part of it)."""
    return page.select_one(f"textarea[name={name}]").get_text().removeprefix("\n")


def pending(alice, **kw):
    return make(alice, account="vision", slurm_job_id=7, state=JobState.PENDING, reason="Priority", **kw)


# --- hold and release -------------------------------------------------------------------------------
def test_hold_runs_scontrol_as_the_owner_and_the_page_shows_it_held(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    job = pending(alice)
    client.force_login(alice)
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert page.select_one("[data-testid=hold-job]") and not page.select_one("[data-testid=release-job]")
    no_slurm.expect([*SUDO, "scontrol", "hold", "7"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/jobs/{job.key}/hold/")
    assert resp.status_code == HTTPStatus.FOUND and resp["Location"] == f"/jobs/{job.key}/"
    assert [c[0] for c in no_slurm.calls] == [[*SUDO, "scontrol", "hold", "7"]]
    job.refresh_from_db()
    assert job.reason == "JobHeldUser"
    assert list(AuditEvent.objects.filter(job=job).values_list("action", flat=True).order_by("id")) == [
        "job.hold_requested",
        "job.held",
    ]
    page = soup(client.get(f"/jobs/{job.key}/"))
    line = page.select_one("[data-testid=queue-line]").get_text(" ", strip=True)
    assert "held in train" in line and "You put this job on hold." in line and "Release it to let it start." in line
    assert "in line" not in line  # no place in line for a held job
    assert page.select_one("[data-testid=release-job]") and not page.select_one("[data-testid=hold-job]")
    assert "Holding" in page.get_text()


def test_release_runs_scontrol_release_and_offers_hold_again(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    job = pending(alice)
    Job.objects.filter(pk=job.pk).update(reason="JobHeldUser")
    client.force_login(alice)
    no_slurm.expect([*SUDO, "scontrol", "release", "7"])
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/jobs/{job.key}/release/").status_code == HTTPStatus.FOUND
    assert [c[0] for c in no_slurm.calls] == [[*SUDO, "scontrol", "release", "7"]]
    job.refresh_from_db()
    assert job.reason == ""
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert page.select_one("[data-testid=hold-job]") and not page.select_one("[data-testid=release-job]")


@pytest.mark.parametrize(
    "state, reason, url, words",
    [
        (JobState.RUNNING, "", "hold", "Only a pending job can be held: it is running, not waiting to start; cancel it"),
        (JobState.COMPLETED, "", "hold", "Only a pending job can be held: it has ended (completed); use Run again"),
        (JobState.SUBMITTING, "", "hold", "it is still being submitted; wait until Slurm lists it as pending"),
        (JobState.PENDING, "JobHeldUser", "hold", "It is already on hold. Release it to let it start."),
        (JobState.PENDING, "Priority", "release", "It is not on hold (Slurm's reason: Priority), so there is nothing to release"),
        (JobState.PENDING, "JobHeldAdmin", "release", "An administrator put this job on hold; ask the cluster administrators"),
        (JobState.RUNNING, "", "release", "Only a pending job can be released: it is running"),
    ],
)
def test_refusals_say_why_and_what_to_do(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks, state, reason, url, words
):
    job = make(alice, slurm_job_id=7 if state != JobState.SUBMITTING else None, state=state, reason=reason)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        resp = client.post(f"/jobs/{job.key}/{url}/", follow=True)
    assert resp.status_code == HTTPStatus.OK and words in " ".join(soup(resp).get_text().split())
    assert callbacks == [] and no_slurm.calls == [] and not AuditEvent.objects.filter(job=job).exists()


def test_another_users_job_is_not_found_and_an_admin_may_not_hold(client, alice, django_user_model, cluster, no_slurm):
    job = pending(alice)
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["vision"])
    client.force_login(bob)
    for url in ("hold", "release", "run-again"):
        assert client.post(f"/jobs/{job.key}/{url}/").status_code == HTTPStatus.NOT_FOUND, url
    assert client.get(f"/jobs/{job.key}/run-again/").status_code == HTTPStatus.NOT_FOUND
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    client.force_login(dana)
    assert not soup(client.get(f"/jobs/{job.key}/status/")).select_one("[data-testid=hold-job]")
    for url in ("hold", "release", "run-again"):
        assert client.post(f"/jobs/{job.key}/{url}/").status_code == HTTPStatus.FORBIDDEN, url
    assert no_slurm.calls == []


def test_hold_and_release_are_post_only(client, alice, cluster, no_slurm):
    job = pending(alice)
    client.force_login(alice)
    assert client.get(f"/jobs/{job.key}/hold/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert client.get(f"/jobs/{job.key}/release/").status_code == HTTPStatus.METHOD_NOT_ALLOWED


def test_the_worker_retries_an_unreachable_controller_and_leaves_a_started_job(alice, monkeypatch):
    job = pending(alice)
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    fake.expect(
        [*SUDO, "scontrol", "hold", "7"], returncode=1, stderr="slurm_load_jobs error: Unable to contact slurm controller"
    )
    with pytest.raises(SlurmError):
        job_hold_send(job_id=job.pk, command="hold")
    fake.expect([*SUDO, "scontrol", "hold", "7"], returncode=1, stderr="Job is no longer pending execution for job 7")
    assert job_hold_send(job_id=job.pk, command="hold").reason == "Priority"  # left alone; the poll says running
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    calls = len(fake.calls)
    assert job_hold_send(job_id=job.pk, command="hold").state == JobState.RUNNING and len(fake.calls) == calls


def test_hold_of_an_outside_array_holds_the_whole_array(alice, monkeypatch, django_capture_on_commit_callbacks):
    job = make(alice, slurm_job_id=900, state=JobState.PENDING, reason="Priority", origin=JobOrigin.OUTSIDE, kind="array")
    fake = FakeTransport().expect([*SUDO, "scontrol", "hold", "900"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    with django_capture_on_commit_callbacks(execute=True):
        job_hold(job=job, by=alice)
    assert [c[0] for c in fake.calls] == [[*SUDO, "scontrol", "hold", "900"]]


# --- no place in line for a held job -------------------------------------------------------------------
def test_a_held_job_is_in_no_line():
    def q(job_id, priority, reason="Priority"):
        return {"job_id": job_id, "priority": priority, "submit_time": 1, "partition": "train", "job_state": "PENDING",
                "state_reason": reason}  # fmt: skip

    snap = ClusterSnapshot(jobs=parse_jobs({"jobs": [q(1, 900, "JobHeldUser"), q(2, 500), q(3, 0, "JobHeldAdmin"), q(4, 100)]}))
    assert queue_positions(snap.jobs) == {2: (1, 2), 4: (2, 2)}
    # The row says held as soon as the worker wrote the reason, before a new snapshot's positions.
    held = Job(state=JobState.PENDING, slurm_job_id=7, partition="train", reason="JobHeldUser", time_limit_min=60)
    row = job_row(held, {7: (1, 3)}, now=1000)
    assert (row.position, row.in_line) == (None, None) and "in line" not in row.line.text


# --- run again ---------------------------------------------------------------------------------------
def finished(alice, **kw):
    fields = dict(
        account="vision",
        slurm_job_id=8,
        state=JobState.COMPLETED,
        cpus=3,
        memory_mb=2048,
        time_limit_min=45,
        gpu_count=1,
        requeue=False,
        script="#!/bin/bash\npython3 train.py --epochs 3\n",
    )
    return make(alice, **(fields | kw))


def test_run_again_submits_the_same_settings(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks):
    old = finished(alice, workdir="/home/alice/portal-jobs/k", output_path="/home/alice/portal-jobs/k/slurm-%j.out")
    client.force_login(alice)
    page = soup(client.get(f"/jobs/{old.key}/"))
    assert page.select_one("[data-testid=run-again-same]") and page.select_one("[data-testid=run-again-changes]")
    with django_capture_on_commit_callbacks() as callbacks:
        resp = client.post(f"/jobs/{old.key}/run-again/")
    new = Job.objects.exclude(pk=old.pk).get()
    assert resp.status_code == HTTPStatus.FOUND and resp["Location"] == f"/jobs/{new.key}/" and len(callbacks) == 1
    fields = ("name", "account", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb", "time_limit_min", "script", "requeue")
    assert [getattr(new, f) for f in fields] == [getattr(old, f) for f in fields]
    assert (new.state, new.workdir, new.cluster) == (JobState.SUBMITTING, "", old.cluster)  # a new per-job directory
    assert AuditEvent.objects.filter(job=new, action="job.create").exists() and no_slurm.calls == []


def test_run_again_keeps_a_chosen_working_directory(client, alice, cluster, no_slurm):
    old = finished(alice, workdir="/home/alice/data", output_path="/home/alice/portal-jobs/k/slurm-%j.out")
    client.force_login(alice)
    client.post(f"/jobs/{old.key}/run-again/")
    assert Job.objects.exclude(pk=old.pk).get().workdir == "/home/alice/data"


def test_run_again_refused_by_policy_shows_the_filled_form(client, alice, cluster, no_slurm, settings):
    settings.PORTAL_PRIORITY_CLASSES = True
    old = finished(alice, partition="retired", priority_class="scavenger", requeue=True)
    client.force_login(alice)
    resp = client.post(f"/jobs/{old.key}/run-again/")
    assert resp.status_code == HTTPStatus.BAD_REQUEST and Job.objects.count() == 1
    page = soup(resp)
    assert page.select_one("[data-testid=form-errors]") and "retired" in page.get_text()
    assert textarea(page, "script") == old.script.replace("\r\n", "\n")
    assert page.select_one("input[name=name]")["value"] == "resnet"
    # the priority class too (it once fell back to the default: a fixed resubmit would bill the quota)
    assert page.select_one("select[name=priority] option[selected]")["value"] == "scavenger"


def test_run_again_with_changes_opens_the_form_filled_in(client, alice, cluster, no_slurm):
    old = finished(alice)
    client.force_login(alice)
    resp = client.get(f"/jobs/{old.key}/run-again/")
    assert resp.status_code == HTTPStatus.OK
    page = soup(resp)
    assert page.select_one("[data-testid=run-again-of]")
    form = page.select_one("form.job-form")
    assert form["action"] == "/jobs/new/"
    assert form.select_one("input[name=name]")["value"] == "resnet"
    assert form.select_one("input[name=memory_gb]")["value"] == "2G"  # as the form takes it (memory_text)
    assert form.select_one("input[name=time_limit]")["value"] == "45"
    assert form.select_one("input[name=cpus]")["value"] == "3"
    assert form.select_one("select[name=partition] option[selected]")["value"] == "train"
    assert form.select_one("select[name=gpu_count] option[selected]")["value"] == "1"
    assert textarea(form, "script").strip() == old.script.strip()
    assert not form.select_one("input[name=requeue]").has_attr("checked")


def test_run_again_is_for_finished_jobs(client, alice, cluster, no_slurm):
    job = pending(alice)
    client.force_login(alice)
    assert not soup(client.get(f"/jobs/{job.key}/status/")).select_one("[data-testid=run-again-actions]")
    resp = client.post(f"/jobs/{job.key}/run-again/")
    assert resp.status_code == HTTPStatus.BAD_REQUEST and "It has not ended yet" in resp.content.decode()
    assert Job.objects.count() == 1


def test_outside_job_run_again_reads_its_script_as_the_owner(client, alice, cluster, no_slurm):
    job = finished(alice, origin=JobOrigin.OUTSIDE, script="", workdir="/home/alice/exp")
    script = "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --array=1-4\n# a note\nsrun python3 x.py\n#SBATCH --late\n"
    no_slurm.expect([*SUDO, "scontrol", "write", "batch_script", "8", "-"], stdout=script)
    client.force_login(alice)
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert page.select_one("[data-testid=run-again-form]") and not page.select_one("[data-testid=run-again-same]")
    assert client.post(f"/jobs/{job.key}/run-again/")["Location"] == f"/jobs/{job.key}/run-again/"
    assert no_slurm.calls == []  # nothing read until the form is asked for
    page = soup(client.get(f"/jobs/{job.key}/run-again/"))
    assert textarea(page, "script") == "#!/bin/bash\n# a note\nsrun python3 x.py\n#SBATCH --late\n"
    note = page.select_one("[data-testid=run-again-note]").get_text()
    assert "#SBATCH --gres=gpu:1; #SBATCH --array=1-4" in note
    assert page.select_one("input[name=workdir]")["value"] == "/home/alice/exp"
    assert [c[0] for c in no_slurm.calls] == [[*SUDO, "scontrol", "write", "batch_script", "8", "-"]]


def test_without_directives_keeps_what_follows_the_first_command():
    assert without_directives("#!/bin/bash\n#SBATCH -p x\necho\n#SBATCH -p y") == (
        "#!/bin/bash\necho\n#SBATCH -p y",
        ["#SBATCH -p x"],
    )
    assert without_directives("") == ("", [])
