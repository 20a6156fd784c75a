"""What a person sees of a preempted job: the runs on its page, the count on History, where its latest run
resumed (from its log), and the same pages refused to another user."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from jobs.reads import logs
from jobs.reads.logs import resumed_from
from slurm import SlurmGateway
from slurm.states import JobState
from tests.fakes import FakeTransport
from tests.jobs.test_job_pages import alice, cluster, make  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.django_db

PREEMPTED = {
    "state": "PREEMPTED",
    "why": "preempted at 14:02 UTC by a higher class, requeued",
    "start": "2026-12-04T13:58:00+00:00",
    "end": "2026-12-04T14:02:00+00:00",
    "elapsed_s": 240,
    "nodes": "node3",
}


@pytest.mark.parametrize(
    "text, where",
    [
        ("training MLP\nresuming from epoch 4\nepoch 5/60\n", "epoch 4"),
        ("resumed from step 1200\n... later\nResuming from checkpoint latest\n", "checkpoint latest"),
        ("epoch 1/60\n", ""),
        ("", ""),
    ],
)
def test_where_a_run_resumed_is_read_from_its_log(text, where):
    assert resumed_from(text) == where


def test_the_job_page_history_and_log_say_preempted_and_resumed(client, alice, cluster, monkeypatch, django_user_model):
    job = make(
        alice,
        slurm_job_id=42,
        state=JobState.RUNNING,
        restart_count=1,
        runs=[PREEMPTED],
        priority_class="scavenger",
        output_path="/home/alice/portal-jobs/k/slurm-%j.out",
        error_path="/home/alice/portal-jobs/k/slurm-%j.err",
    )
    fake = FakeTransport().expect(
        ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", "/home/alice/portal-jobs/k/slurm-42.out"],
        stdout=b"resuming from epoch 4\nepoch 5/60 loss=0.1\n",
    )
    monkeypatch.setattr(logs, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    client.force_login(alice)
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert "restarted (run 2): preempted at 14:02 UTC by a higher class, requeued" in page
    assert 'data-testid="job-priority-class">scavenger' in page
    assert 'data-testid="job-priority"' not in page  # that one is sprio's sentence, for a pending job only
    log = client.get(f"/jobs/{job.key}/log/out/").content.decode()
    assert "Run 2 resumed from epoch 4 (its log says so)." in log
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
    client.force_login(bob)
    for url in (f"/jobs/{job.key}/", f"/jobs/{job.key}/log/out/"):
        assert client.get(url).status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND)


def test_history_counts_the_preempted_runs_of_an_ended_job(client, alice, cluster):
    make(alice, slurm_job_id=43, state=JobState.COMPLETED, exit_code=0, restart_count=2, runs=[PREEMPTED, PREEMPTED])
    client.force_login(alice)
    history = client.get("/jobs/history/").content.decode()
    assert "3 runs (2 preempted)" in history
