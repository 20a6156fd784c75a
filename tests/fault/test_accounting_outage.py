"""slurmdbd stopped while a GPU job ends, on the real stack: a real
Celery worker, poller and beat, the real cluster, slurmdbd really stopped and started again.

While accounting is down the job takes the queue's own final state (no ticking clock, no "status
unknown"), every page says "accounting unavailable since", and an admin's change of a team's limits
is shown failing with Slurm's words and retried; once slurmdbd is back the job's run time and
GPU-hours are Slurm's own (not the outage's length), and the retried sync is applied."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from django.test import Client

from jobs.models import Job
from slurm.states import JobState
from teams.models import Membership, Role, Team
from teams.sync.runs import sync_run_last
from tests.teams.test_slurm_sync_integration import associations, remove_account
from tests.waiting import log_tail, pause, scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.real_sync, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
DBD_PID = Path("/run/slurmdbd.pid")
JOB = dict(
    name="dbd-outage",
    account="vision",
    partition="small",
    gpu_type="t4",
    gpu_count="1",
    cpus="1",
    memory_gb="0.2",
    time_limit="5",
    workdir="",
    script="sleep 10\n",
)


def sh(*argv, check=True, **kw):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


def reasons(client: Client, url: str) -> dict[str, str]:
    """The freshness notices of the page at ``url``: {data-reason: text}. A page that raises fails the
    test at once, also inside a wait (wait_for would take the exception for "not yet")."""
    try:
        resp = client.get(url)
    except Exception as exc:  # re-raised as the test's failure
        pytest.fail(f"GET {url} raised {exc!r}")
    soup = BeautifulSoup(resp.content.decode(), "html.parser")
    return {t["data-reason"]: " ".join(t.get_text().split()) for t in soup.select("[data-reason]")}


def job_seen(job: Job) -> str:
    """The job's row and what slurmctld says of it, for a wait's failure message."""
    row = Job.objects.filter(pk=job.pk).values("state", "slurm_job_id", "accounting_pending", "submit_error").first()
    return f"row: {row}\n" + (scontrol_show_job(row["slurm_job_id"]) if row and row["slurm_job_id"] else "")


def accounting_seen(job: Job, tmp: Path) -> str:
    """For the wait on accounting's record (kept short and its telling part last, as a long message
    is cut from the front): the first line of ``scontrol show job``, what sacct holds of the job (every
    record of its id, ``-D``), slurmctld's last errors and words about slurmdbd, the poller's last
    lines about sacct, accounting or an error (its sync's own reading of the job), and the job's row."""
    row = Job.objects.filter(pk=job.pk).values("state", "slurm_job_id", "accounting_pending", "end_at").first()
    argv = ("sacct", "-n", "-P", "-D", "-o", "JobID,State,Submit,Start,End,Comment", "-j", str(job.slurm_job_id))
    sacct = sh(*argv, check=False, timeout=30)
    ctld = [line for line in log_tail("/var/log/slurm/slurmctld.log", 400).splitlines() if re.search("dbd|error", line, re.I)]
    pattern = re.compile(r"sacct|accounting|error|traceback|exception", re.I)
    poller = [line for line in log_tail(tmp / "poller.log", 2000).splitlines() if pattern.search(line)]
    return "\n".join(
        [
            "scontrol: " + scontrol_show_job(job.slurm_job_id).split("\n", 1)[0],
            f"sacct -D: rc {sacct.returncode}: {(sacct.stdout + sacct.stderr).strip()}",
            "slurmctld's last errors and words on slurmdbd:",
            *ctld[-6:],
            "the poller's last lines on sacct, accounting or errors:",
            *[line[:300] for line in poller[-12:]],
            f"the portal's reading: {portal_reading(job)}",
            f"row: {row}",
        ]
    )


def portal_reading(job: Job) -> str:
    """What the poller's sync makes of accounting's records of ``job`` now (the same calls as
    ``jobs.worker.sync._finish_from_accounting``): its record, and whether that is final."""
    from jobs.worker.finish import is_final, record_of
    from jobs.worker.identity import records_by_id, records_of_job
    from slurm import get_gateway
    from slurm.adapters import adapter_for

    try:
        argv = ["sacct", "--json", "-D", "-S", "now-3600seconds", "-j", str(job.slurm_job_id)]
        doc = get_gateway("cluster1").run_json(argv)
        records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
        row = Job.objects.get(pk=job.pk)
        found = record_of(row, records_of_job(row, records_by_id(records)))
        final = is_final(row, found) if found is not None else None
        return f"{len(records)} record(s) of the id; the job's: {found}; final: {final}"
    except Exception as exc:  # noqa: BLE001 - a diagnostic: never hides the wait's own failure
        return f"could not be read: {exc!r}"


def slurmdbd_stop() -> None:
    os.kill(int(DBD_PID.read_text().strip()), signal.SIGTERM)
    wait_for(
        "slurmdbd to stop answering (sacct fails)",
        lambda: sh("sacct", "-n", "-X", "-j", "1", check=False).returncode != 0,
        timeout=30,
        every=1.0,
        seen=lambda: log_tail("/var/log/slurm/slurmdbd.log"),
    )


def slurmdbd_start() -> None:
    sh("bash", str(REPO / "cluster" / "up.sh"), timeout=240)


@pytest.fixture
def accounts(django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="dbd-alice", slurm_accounts=["vision"])
    dana = django_user_model.objects.create(username="dana", oidc_issuer="t", oidc_sub="dbd-dana", is_staff=True)
    vision, _ = Team.objects.get_or_create(name="vision")
    Membership.objects.get_or_create(team=vision, user=alice, defaults={"role": Role.MEMBER})
    name = f"it-team-{uuid.uuid4().hex[:8]}"
    lab = Team.objects.create(name=name, description="dbd outage test team")
    yield alice, dana, lab
    remove_account(name, {})


def test_slurmdbd_down_while_a_gpu_job_ends(celery_stack, accounts):
    alice, dana, lab = accounts
    tmp = celery_stack.tmp
    wait_for("the first snapshot", celery_stack.polls, timeout=60, every=1.0, seen=lambda: log_tail(tmp / "poller.log"))
    as_alice, as_dana = Client(), Client()
    as_alice.force_login(alice)
    as_dana.force_login(dana)
    resp = as_alice.post("/jobs/new/", JOB)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    job = Job.objects.get(name="dbd-outage")
    wait_for(
        "the job to run",
        lambda: Job.objects.filter(pk=job.pk, state=JobState.RUNNING).exists(),
        timeout=90,
        every=1.0,
        seen=lambda: job_seen(job),
    )
    job.refresh_from_db()
    slurm_id = job.slurm_job_id

    try:
        slurmdbd_stop()
        stopped = time.time()
        # an admin changes a team's limits: the sync fails at once, says so with Slurm's words, and is retried
        resp = as_dana.post(f"/teams/{lab.name}/settings/limits/", {"gpu_hours_quota": "12", "gpu_limit": "2"})
        assert resp.status_code == 302, resp.content.decode()[:2000]
        run = wait_for(
            "the sync's first try to fail",
            lambda: (r := sync_run_last(lab.name)) and r.retrying and r,
            timeout=60,
            every=1.0,
            seen=lambda: f"last sync run: {sync_run_last(lab.name)}\nworker log:\n" + log_tail(tmp / "worker.log"),
        )
        html = as_dana.get(f"/teams/{lab.name}/settings/sync/{run.run_id}/").content.decode()
        assert 'data-testid="sync-retrying"' in html and "Trying again at" in html, html
        assert re.search(r"database|slurmdbd|Connection refused", run.headline + " ".join(run.lines)), run

        # the job ends while accounting is down: the queue's own final state, at once
        wait_for(
            "the queue's final state (COMPLETED, accounting pending)",
            lambda: Job.objects.filter(pk=job.pk, state=JobState.COMPLETED, accounting_pending=True).exists(),
            timeout=90,
            every=1.0,
            seen=lambda: job_seen(job) + "\npoller log:\n" + log_tail(tmp / "poller.log"),
        )
        job.refresh_from_db()
        assert job.status_unknown_since is None and job.gpu_hours is None and job.end_at is not None
        queue_elapsed = job.elapsed_s
        assert 9 <= queue_elapsed <= 20, queue_elapsed
        for url in (f"/jobs/{job.key}/status/", "/jobs/table/", "/jobs/history/"):
            seen = wait_for(
                f"{url} to say accounting is unavailable",
                lambda u=url: reasons(as_alice, u),
                timeout=60,
                every=1.0,
                seen=lambda: "poller log:\n" + log_tail(tmp / "poller.log"),
            )
            assert list(seen) == ["accounting-unavailable"], (url, seen)
        assert 'data-testid="accounting-pending"' in as_alice.get(f"/jobs/{job.key}/status/").content.decode()
        history = as_alice.get("/jobs/history/").content.decode()
        assert str(job.key) in history  # listed, as the queue reported it
        api = as_alice.get(f"/api/v1/jobs/{job.key}").json()
        assert api["accounting_pending"] and "accounting-unavailable" in api["freshness"]["reasons"]
        pause(max(0.0, 40 - (time.time() - stopped)), "accounting stays down well past the job's end")
    finally:
        slurmdbd_start()

    # accounting is back: Slurm's own figures replace the queue's
    wait_for(
        "accounting's record of the job",
        lambda: Job.objects.filter(pk=job.pk, accounting_pending=False).exists(),
        timeout=180,
        every=2,
        seen=lambda: accounting_seen(job, tmp),
    )
    job.refresh_from_db()
    out = sh(
        "sacct", "-n", "-X", "-P", "-o", "ElapsedRaw,End", "-j", str(slurm_id), env={**os.environ, "SLURM_TIME_FORMAT": "%s"}
    )
    elapsed_raw, end = (int(v) for v in out.stdout.strip().split("|"))
    assert job.state == JobState.COMPLETED and job.elapsed_s == elapsed_raw < 20  # not the outage's length
    assert job.gpu_hours == pytest.approx(elapsed_raw / 3600, rel=0.01)  # 1 GPU x Slurm's elapsed
    assert int(job.end_at.timestamp()) == end
    wait_for(
        "the accounting notice to go from /jobs/history/",
        lambda: not reasons(as_alice, "/jobs/history/"),
        timeout=90,
        every=1.0,
        seen=lambda: reasons(as_alice, "/jobs/history/"),
    )

    # the retried sync went through once slurmdbd answered
    done = wait_for(
        "the retried sync to end",
        lambda: (r := sync_run_last(lab.name)) and r.done and r,
        timeout=120,
        every=2,
        seen=lambda: f"last sync run: {sync_run_last(lab.name)}\nworker log:\n" + log_tail(tmp / "worker.log"),
    )
    assert done.ok, (done.headline, done.lines)
    assert done.attempt > 1 and "tries" in done.headline
    assert any("gres/gpu=2" in line for line in associations(lab.name)), associations(lab.name)
