"""``gpuportal submit`` says whether the job fits its team's GPU quota (the API's ``quota``
sentence), and ``submit --check`` asks ``POST /profiles/validate`` without submitting."""

from __future__ import annotations

import json
import time

import pytest

from gpuportal.cli import main

from .fake_api import make_job

pytestmark = pytest.mark.usefixtures("clean_env")

YAML = "name: train\nresources:\n  gpus: 4\n  time_limit: '04:00:00'\ncommand: python train.py\n"
SENTENCE = (
    "Team vision: used 80 h, 12 h promised to 3 running jobs, 8 h left; this job needs 16 h: "
    "it will wait for quota (until running jobs end early, the next period or a higher quota)."
)
QUOTA = {
    "team": "vision",
    "cluster": "cluster1",
    "gpu_hours_quota": 100.0,
    "gpu_hours_used": 80.0,
    "gpu_hours_promised": 12.0,
    "promised_jobs": 3,
    "gpu_hours_left": 8.0,
    "gpu_hours_max": 16.0,
    "will_wait": True,
    "frozen": False,
    "fit": "",
    "taken_at": 1795970000.0,
    "error_since": None,
    "sentence": SENTENCE,
}


@pytest.fixture
def profile(tmp_path):
    f = tmp_path / "train.yaml"
    f.write_text(YAML)
    return f


def test_submit_prints_the_quota_sentence(env, profile, capsys, monkeypatch):
    """The sentence comes from the submit's answer; asking again for the Slurm id (GET, no quota) keeps it."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    submitting = {**make_job(id=None, state="SUBMITTING"), "quota": QUOTA}
    env.script("POST", "/jobs", (201, submitting))
    env.script("GET", f"/jobs/{submitting['key']}", (200, make_job(id=4242, state="PENDING")))
    assert main(["submit", str(profile)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ['Submitted job 4242 "train" (PENDING)', SENTENCE]
    env.script("POST", "/jobs", (201, submitting))
    env.script("GET", f"/jobs/{submitting['key']}", (200, make_job(id=4242, state="PENDING")))
    assert main(["--json", "submit", str(profile)]) == 0
    assert json.loads(capsys.readouterr().out)["quota"] == QUOTA


def test_submit_without_a_quota_says_nothing_of_it(env, profile, capsys):
    env.script("POST", "/jobs", (201, {**make_job(), "quota": None}))
    assert main(["submit", str(profile)]) == 0
    assert "quota" not in capsys.readouterr().out


def test_check_asks_validate_and_submits_nothing(env, profile, capsys):
    answer = {"valid": True, "errors": [], "spec": {"name": "train"}, "script": "#!/bin/bash\n", "quota": QUOTA}
    env.script("POST", "/profiles/validate", (200, answer))
    assert main(["submit", str(profile), "--check", "--set", "gpus=4", "--image", "pytorch"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "The profile is valid; nothing was submitted (drop --check to submit it).",
        SENTENCE,
    ]
    [req] = env.calls("POST", "/profiles/validate")
    assert req.body == {"yaml": YAML, "overrides": {"gpus": 4, "image": "pytorch"}}
    assert env.calls("POST", "/jobs") == []
    env.script("POST", "/profiles/validate", (200, answer))
    assert main(["--json", "submit", str(profile), "--check"]) == 0
    assert json.loads(capsys.readouterr().out)["quota"]["sentence"] == SENTENCE


def test_check_of_a_bad_profile_names_each_field_and_fails(env, profile, capsys):
    errors = [{"field": "gpus", "message": "at most 8 GPUs per job", "line": 3}]
    env.script(
        "POST", "/profiles/validate", (200, {"valid": False, "errors": errors, "spec": None, "script": None, "quota": None})
    )
    assert main(["submit", str(profile), "--check"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: The profile is not valid; nothing was submitted.",
        "  gpus (line 3): at most 8 GPUs per job",
    ]


def test_check_says_whether_the_job_fits_a_quota_in_billed_units(env, profile, capsys):
    """A team whose quota is in billed units: the API's sentence and figures (billed unit-hours, the job's
    billing from its partition's TRESBillingWeights) reach the terminal and --json as they are."""
    sentence = (
        "Team vision: used 80 of 200 billed unit-hours, 12 promised to 3 running jobs, 108 left; this job needs 117 "
        "(9 billed units an hour, from partition train's TRESBillingWeights): it will wait for quota (until the next "
        "period or a higher quota). To start now, ask for at most 12 h 00 min, or 1 GPU for 13 h 00 min."
    )
    billed = {**QUOTA, "unit": "billing", "billing": 9, "billed_hours_max": 117.0, "billed_hours_left": 108.0,
              "billed_hours_promised": 12.0, "partition": "train", "sentence": sentence}  # fmt: skip
    answer = {"valid": True, "errors": [], "spec": {"name": "train"}, "script": "#!/bin/bash\n", "quota": billed}
    env.script("POST", "/profiles/validate", (200, answer))
    assert main(["submit", str(profile), "--check"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == sentence
    env.script("POST", "/profiles/validate", (200, answer))
    assert main(["--json", "submit", str(profile), "--check"]) == 0
    assert json.loads(capsys.readouterr().out)["quota"] == billed
