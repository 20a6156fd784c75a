"""The REST API through real requests: tokens (hashed, scoped, expiring, revocable), JSON errors
with the field (and line), the same permissions as the pages, and every endpoint x role."""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone

from accounts.models import User
from api.models import PersonalAccessToken
from api.tokens import digest, token_create
from jobs.models import Job
from profiles.models import Profile
from slurm.states import JobState
from tests.api.conftest import ALL  # noqa: F401  (other API test modules import it from here)
from tests.fakes import EveryCluster
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def call(client, method, path, raw=None, body=None):
    kwargs = bearer(raw) if raw else {}
    if body is not None:
        kwargs.update(data=json.dumps(body), content_type="application/json")
    return getattr(client, method)(f"/api/v1{path}", **kwargs)


# --- tokens ------------------------------------------------------------------------------------
def test_token_is_stored_hashed_and_works_until_revoked(client, people):
    row, raw = token_create(user=people["alice"], name="laptop", scopes=["read"], days=7)
    assert (
        raw.startswith("gpp_")
        and len(raw) > 40
        and raw not in json.dumps(list(PersonalAccessToken.objects.values()), default=str)
    )
    assert row.digest == digest(raw) and row.prefix == raw[:12]
    me = call(client, "get", "/me", raw).json()
    assert me["username"] == "alice" and me["scopes"] == ["read"] and me["teams"] == ["vision"]
    row.revoked_at = timezone.now()
    row.save()
    r = call(client, "get", "/me", raw)
    assert r.status_code == HTTPStatus.UNAUTHORIZED and "was revoked on" in r.json()["detail"]


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("raw", ["", "gpp_nope", "Basic abc", "x" * 500])
def test_bad_or_missing_token_is_401_json(client, people, raw, method):
    from django.test import Client

    csrf_checking = Client(enforce_csrf_checks=True)  # as the CLI: no cookie, no CSRF token
    r = getattr(csrf_checking, method)("/api/v1/jobs", **({"HTTP_AUTHORIZATION": f"Bearer {raw}"} if raw else {}))
    assert r.status_code == HTTPStatus.UNAUTHORIZED and "/account/tokens/" in r.json()["detail"], r.content


def test_expired_token_is_refused(client, people):
    row, raw = token_create(user=people["alice"], name="old", scopes=ALL, days=1)
    PersonalAccessToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert call(client, "get", "/me", raw).status_code == HTTPStatus.UNAUTHORIZED


def test_bad_token_is_not_rescued_by_a_session_cookie(client, people):
    client.force_login(people["alice"])
    assert call(client, "get", "/me").status_code == HTTPStatus.OK  # the session alone works (browser)
    assert call(client, "get", "/me", "gpp_wrong").status_code == HTTPStatus.UNAUTHORIZED


def test_scopes_are_enforced(client, people, cluster, no_slurm):
    _, raw = token_create(user=people["alice"], name="ro", scopes=["read"], days=7)
    r = call(client, "post", "/jobs", raw, {"profile_yaml": EXAMPLE_TEXT})
    assert r.status_code == HTTPStatus.FORBIDDEN and "'jobs' scope" in r.json()["detail"]
    r = call(client, "post", "/profiles", raw, {"yaml": EXAMPLE_TEXT})
    assert r.status_code == HTTPStatus.FORBIDDEN and Profile.objects.count() == 0 and Job.objects.count() == 0
    assert call(client, "post", "/sessions", raw, {"ide": "lab"}).status_code == HTTPStatus.FORBIDDEN


@pytest.mark.parametrize(
    "data, field",
    [
        ({"name": "", "scopes": ["read"], "days": "30"}, "name"),
        ({"name": "x", "scopes": [], "days": "30"}, "scopes"),
        ({"name": "x", "scopes": ["admin"], "days": "30"}, "scopes"),
        ({"name": "x", "scopes": ["read"], "days": "9999"}, "days"),
    ],
)
def test_token_page_refuses_bad_input(client, people, data, field):
    client.force_login(people["alice"])
    r = client.post("/account/tokens/", data)
    assert r.status_code == HTTPStatus.BAD_REQUEST and f'data-testid="error-{field}"' in r.content.decode()
    assert PersonalAccessToken.objects.count() == 0


def test_token_page_creates_shows_once_and_revokes(client, people):
    client.force_login(people["alice"])
    r = client.post("/account/tokens/", {"name": "laptop", "scopes": ["read", "jobs"], "days": "30"})
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == "/account/tokens/"  # a reload cannot create a second one
    html = client.get("/account/tokens/").content.decode()
    row = PersonalAccessToken.objects.get()
    raw = html.split('data-testid="token-value">')[1].split("<")[0]
    assert digest(raw) == row.digest and row.scopes == ["jobs", "read"]
    assert raw not in client.get("/account/tokens/").content.decode()  # shown once
    assert call(client, "get", "/me", raw).status_code == HTTPStatus.OK
    client.force_login(people["bob"])
    assert client.post(f"/account/tokens/{row.pk}/revoke/").status_code == HTTPStatus.NOT_FOUND  # not bob's
    client.force_login(people["alice"])
    assert client.post(f"/account/tokens/{row.pk}/revoke/").status_code == HTTPStatus.FOUND
    assert call(client, "get", "/me", raw).status_code == HTTPStatus.UNAUTHORIZED


def test_session_cookie_needs_csrf_for_writes(people, cluster, no_slurm):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(people["alice"])
    r = call(csrf_client, "post", "/profiles", body={"yaml": EXAMPLE_TEXT})
    assert r.status_code == HTTPStatus.FORBIDDEN and Profile.objects.count() == 0


# --- submitting ----------------------------------------------------------------------------------
def test_submit_a_profile_file(client, people, tokens, cluster, no_slurm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        r = call(
            client,
            "post",
            "/jobs",
            tokens["alice"],
            {"profile_yaml": EXAMPLE_TEXT, "overrides": {"cpus": 4}, "filename": "train.yaml"},
        )
    assert r.status_code == HTTPStatus.CREATED, r.content
    body = r.json()
    job = Job.objects.get()
    assert body["key"] == str(job.key) and body["state"] == "SUBMITTING" and body["cpus"] == 4 and body["memory_mb"] == 2048
    assert body["url"].endswith(f"/jobs/{job.key}/") and job.profile_spec["name"] == "train-digits"
    assert "portal_env" in job.script and "scikit-learn==1.7.2" in job.script and job.workdir == "gpuportal-examples/digits"
    assert len(callbacks) == 1 and no_slurm.calls == []
    client.force_login(people["alice"])
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert 'data-testid="job-profile"' in page and "train-digits" in page and "2 pip packages" in page


def test_submit_refusals_name_field_and_line(client, people, tokens, cluster, no_slurm):
    text = EXAMPLE_TEXT.replace("partition: small", "partition: gpu-huge").replace('python: "3.11"', 'python: "2.7"')
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": text, "filename": "train.yaml"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    body = r.json()
    assert "train.yaml" in body["detail"]
    errors = {e["field"]: e for e in body["errors"]}
    assert errors["resources.partition"]["line"] == 4 and "not offered on cluster1" in errors["resources.partition"]["message"]
    assert errors["environment.python"]["line"] == 14 and "Offered: 3.11" in errors["environment.python"]["message"]
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"gpus": 4}})
    gpus = [e for e in r.json()["errors"] if e["field"] == "resources.gpus_per_node"]
    assert (
        r.status_code == HTTPStatus.BAD_REQUEST and gpus and gpus[0]["line"] is None and "Allowed: 0, 1, 2" in gpus[0]["message"]
    )
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "profile_yaml"),
        ({"profile_yaml": "x", "profile_id": 1}, "profile_yaml"),
        ({"profile_yaml": EXAMPLE_TEXT, "gpus": 4}, "gpus"),
        ({"profile_yaml": 7}, "profile_yaml"),
        ({"profile_yaml": EXAMPLE_TEXT, "overrides": {"env": "x"}}, "overrides.env"),
    ],
)
def test_malformed_requests_are_400_with_the_field(client, people, tokens, cluster, no_slurm, body, field):
    r = call(client, "post", "/jobs", tokens["alice"], body)
    assert r.status_code == HTTPStatus.BAD_REQUEST and field in [e["field"] for e in r.json()["errors"]], r.content


@pytest.mark.parametrize(
    "body, errors",
    [
        ([], [("body", "Must be a JSON object ({...}).")]),
        ({"profile_yaml": 5}, [("profile_yaml", "Must be text (a JSON string).")]),
        ({"profile_id": "abc"}, [("profile_id", "Must be a whole number.")]),
        ({"profile_yaml": EXAMPLE_TEXT, "overrides": "x"}, [("overrides", "Must be a JSON object ({...}).")]),
        ({"profile_yaml": EXAMPLE_TEXT, "profile_id": 1}, [("profile_yaml", "Give profile_yaml or profile_id, not both.")]),
    ],
)
def test_a_body_of_the_wrong_shape_is_refused_in_the_apis_words(client, people, tokens, cluster, no_slurm, body, errors):
    r = call(client, "post", "/jobs", tokens["alice"], body)
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    assert [(e["field"], e["message"]) for e in r.json()["errors"]] == errors, r.json()
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "body, content_type, detail, message, line",
    [
        (
            "gpus=1&hours=2",
            "application/x-www-form-urlencoded",
            "The request body is not JSON: it was sent as application/x-www-form-urlencoded (Expecting value at line 1, "
            "column 1). ",
            "Not JSON: Expecting value at line 1, column 1.",
            1,
        ),
        (
            '{"hours": 2,\n "gpus": }',
            "application/json",
            "The request body is not valid JSON: Expecting value at line 2, column 10. ",
            "Not JSON: Expecting value at line 2, column 10.",
            2,
        ),
        (
            b"\x80\x81",
            "application/json",
            "The request body is not valid JSON: it is not UTF-8 text. ",
            "Not JSON: it is not UTF-8 text.",
            None,
        ),
    ],
)
def test_a_body_that_is_not_json_is_told_what_was_wrong_and_how_to_send_it(
    client, people, tokens, body, content_type, detail, message, line
):
    r = client.post("/api/v1/sessions", data=body, content_type=content_type, **bearer(tokens["alice"]))
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json() == {
        "detail": detail + 'Send the body as a JSON object (such as {"hours": 2}) with the header '
        "'Content-Type: application/json'.",
        "errors": [{"field": "body", "message": message, "line": line}],
    }


def test_not_in_a_team_cannot_submit(client, people, tokens, cluster, no_slurm):
    r = call(client, "post", "/jobs", tokens["dana"], {"profile_yaml": EXAMPLE_TEXT})
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["errors"][0]["field"] == "account"


@pytest.mark.parametrize(
    "path, body",
    [
        (
            "/jobs?scope=everything",
            {
                "detail": "scope must be active, history or all.",
                "errors": [{"field": "scope", "message": "Use active, history or all.", "line": None}],
            },
        ),
        (
            "/jobs/77/log?stream=both",
            {"detail": "stream must be out or err.", "errors": [{"field": "stream", "message": "Use out or err.", "line": None}]},
        ),
    ],
)
def test_a_refusal_a_router_raises_is_the_apis_json(client, people, tokens, path, body):
    _job(people["alice"])
    r = call(client, "get", path, tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json() == body


def test_a_session_refusal_names_the_fields_of_the_request_body(client, people, tokens, cluster, settings):
    settings.PORTAL_SESSION_PARTITIONS, settings.PORTAL_SESSION_MAX_GPUS, settings.PORTAL_SESSION_MAX_HOURS = (
        ["interactive"],
        2,
        24,
    )
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "gpus": 4, "memory_gb": 4, "hours": 2})
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["detail"] == "The session cannot be started; see errors."
    assert [(e["field"], e["line"]) for e in r.json()["errors"]] == [("gpus", None)] and "at most 2 GPUs" in r.json()["errors"][
        0
    ]["message"]
    # The body's own limits are said in the portal's words, not pydantic's ("Input should be ...").
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "cpus": 0, "hours": 2})
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["errors"] == [
        {"field": "cpus", "message": "Must be at least 1.", "line": None}
    ], r.content
    # Site policy's own check (interactive's MaxTime is 8 hours) lands on the body's hours too.
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "hours": 9})
    assert r.status_code == HTTPStatus.BAD_REQUEST and [e["field"] for e in r.json()["errors"]] == ["hours"], r.content
    assert "longer than interactive's maximum of 8 h" in r.json()["errors"][0]["message"]


# --- profiles: share, clone, run the same ---------------------------------------------------------
def test_shared_profile_runs_the_same_for_a_colleague(client, people, tokens, cluster, no_slurm):
    r = call(client, "post", "/profiles", tokens["alice"], {"yaml": EXAMPLE_TEXT, "team": "vision"})
    assert r.status_code == HTTPStatus.CREATED and r.json()["team"] == "vision"
    pk = r.json()["id"]
    assert [p["id"] for p in call(client, "get", "/profiles", tokens["carol"]).json()["items"]] == [pk]
    assert call(client, "get", "/profiles", tokens["bob"]).json()["count"] == 0
    mine = call(client, "post", f"/profiles/{pk}/submit", tokens["alice"], {}).json()
    hers = call(client, "post", f"/profiles/{pk}/submit", tokens["carol"], {}).json()
    a, c = Job.objects.get(key=mine["key"]), Job.objects.get(key=hers["key"])
    assert (
        a.script == c.script and a.user != c.user and a.profile_id == c.profile_id == pk
    )  # same script, so same environment hash
    assert call(client, "post", f"/profiles/{pk}/submit", tokens["bob"], {}).status_code == HTTPStatus.NOT_FOUND


def test_clone_with_four_gpus_and_owner_only_changes(client, people, tokens, cluster, no_slurm):
    pk = call(client, "post", "/profiles", tokens["alice"], {"yaml": EXAMPLE_TEXT, "team": "vision"}).json()["id"]
    r = call(
        client,
        "post",
        f"/profiles/{pk}/clone",
        tokens["carol"],
        {"name": "digits-4gpu", "overrides": {"gpus": 4, "partition": "train"}},
    )
    assert r.status_code == HTTPStatus.CREATED, r.content
    copy = r.json()
    assert copy["owner"] == "carol" and copy["cloned_from"] == pk and copy["spec"]["resources"]["gpus_per_node"] == 4
    assert "gpus_per_node: 4" in copy["yaml"] and copy["team"] is None
    assert call(client, "put", f"/profiles/{pk}", tokens["carol"], {"yaml": EXAMPLE_TEXT}).status_code == HTTPStatus.FORBIDDEN
    assert call(client, "delete", f"/profiles/{pk}", tokens["carol"]).status_code == HTTPStatus.FORBIDDEN
    assert call(client, "post", f"/profiles/{pk}/share", tokens["carol"], {"team": None}).status_code == HTTPStatus.FORBIDDEN
    r = call(client, "post", f"/profiles/{pk}/share", tokens["alice"], {"team": "nlp"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and "only with a team you are in" in r.json()["errors"][0]["message"]
    assert call(client, "delete", f"/profiles/{pk}", tokens["alice"]).status_code == HTTPStatus.NO_CONTENT
    assert Profile.objects.filter(pk=pk).count() == 0


def test_duplicate_name_and_invalid_profile_are_400(client, people, tokens, cluster, no_slurm):
    assert call(client, "post", "/profiles", tokens["alice"], {"yaml": EXAMPLE_TEXT}).status_code == HTTPStatus.CREATED
    r = call(client, "post", "/profiles", tokens["alice"], {"yaml": EXAMPLE_TEXT})
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["errors"][0] == {
        "field": "name",
        "line": 2,
        "message": r.json()["errors"][0]["message"],
    }
    v = call(client, "post", "/profiles/validate", tokens["alice"], {"yaml": "version: 1\nname: x\n"}).json()
    assert v["valid"] is False and {e["field"] for e in v["errors"]} == {"resources", "run"}
    v = call(client, "post", "/profiles/validate", tokens["alice"], {"yaml": EXAMPLE_TEXT}).json()
    assert v["valid"] is True and "train_digits.py" in v["script"]


def _vision_usage(clean_cache):
    """vision on the default cluster: quota 10 h, used 7.5 h, 1.5 h promised to 1 running job (1 h left)."""
    from datetime import datetime

    from teams.usage.cache import TeamUsage, UsageStatus, _store

    usage = TeamUsage(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=1795970000.0,
        gpu_hours_used=7.5,
        gpu_hours_quota=10.0,
        gpu_hours_left=2.5,
        gpu_hours_promised=1.5,
        promised_jobs=1,
    )
    _store({"vision": usage}, UsageStatus(taken_at=1795970000.0))


def test_submit_and_validate_say_whether_the_job_fits_the_quota(client, people, tokens, cluster, no_slurm, clean_cache):
    """The answer's quota object has the form's figures and sentence; a job of 4 GPUs for 2 h
    needs 8 h of the 1 h left beside the running job's promise."""
    _vision_usage(clean_cache)
    big = {"gpus": 4, "partition": "train", "time_limit": "02:00:00"}
    checked = call(client, "post", "/profiles/validate", tokens["alice"], {"yaml": EXAMPLE_TEXT, "overrides": big}).json()
    assert checked["valid"] is True and Job.objects.count() == 0
    quota = checked["quota"]
    assert (quota["team"], quota["gpu_hours_left"], quota["gpu_hours_promised"], quota["will_wait"]) == ("vision", 1.0, 1.5, True)
    assert quota["sentence"].startswith(
        "Team vision: used 7.5 h, 1.5 h promised to 1 running job, 1 h left; this job needs 8 h: it will wait for quota"
    )
    small = {"gpus": 1, "partition": "train", "time_limit": "00:30:00"}
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": small})
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert r.json()["quota"]["sentence"].endswith("this job needs 30 min: it fits.")
    no_gpus = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT}).json()
    assert no_gpus["quota"] is None  # a job without GPUs uses no GPU quota


def test_a_billed_unit_quota_says_whether_the_job_fits_from_its_partitions_weights(
    client, people, tokens, cluster, no_slurm, clean_cache
):
    """vision's quota is 200 billed unit-hours, 80 used, 12 promised to 3 running jobs: 108 left. The
    profile's 2 CPUs and 2G with 2 GPUs of any type in train (A100s, weighed as on the lab's
    clusters) are billed 9 units an hour (8 + 1 + 0.5, rounded down): 13 h need 117 and wait; 12 h
    would fit, or 1 GPU (5 an hour) for the 13 h."""
    from dataclasses import replace
    from datetime import datetime

    from slurm.snapshot import snapshot_load, snapshot_store
    from teams.usage.cache import TeamUsage, UsageStatus, _store

    weights = "CPU=0.5,Mem=0.25G,GRES/gpu:a100=4.0,GRES/gpu:t4=1.0"
    polled = snapshot_load()  # the cluster fixture's, its partitions given the lab's weights
    snapshot_store(replace(polled, partitions=[replace(p, billing_weights=weights) for p in polled.partitions]))
    usage = TeamUsage(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=1795970000.0,
        quota_unit="billing",
        billed_hours_used=80.0,
        billed_hours_quota=200.0,
        billed_hours_left=120.0,
        billed_hours_promised=12.0,
        billed_promised_jobs=3,
    )
    _store({"vision": usage}, UsageStatus(taken_at=1795970000.0))
    long = {"gpus": 2, "partition": "train", "time_limit": "13:00:00"}
    quota = call(client, "post", "/profiles/validate", tokens["alice"], {"yaml": EXAMPLE_TEXT, "overrides": long}).json()["quota"]
    assert (quota["unit"], quota["billing"], quota["billed_hours_max"], quota["billed_hours_left"]) == (
        "billing",
        9,
        117.0,
        108.0,
    )
    assert (quota["billed_hours_promised"], quota["promised_jobs"], quota["will_wait"]) == (12.0, 3, True)
    assert (quota["partition"], quota["billing_weights"], quota["fit"]) == (
        "train",
        weights,
        "ask for at most 12 h 00 min, or 1 GPU for 13 h 00 min",
    )
    assert quota["sentence"].startswith(
        "Team vision: used 80 of 200 billed unit-hours, 12 promised to 3 running jobs, 108 left; this job needs 117 "
        "(9 billed units an hour, from partition train's TRESBillingWeights): it will wait for quota"
    )
    short = {"gpus": 2, "partition": "train", "time_limit": "12:00:00"}
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": short})
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert r.json()["quota"]["sentence"].endswith(
        "this job needs 108 (9 billed units an hour, from partition train's TRESBillingWeights): it fits."
    )


def test_another_teams_quota_is_not_told(client, people, tokens, cluster, no_slurm, clean_cache):
    """bob (nlp) checks a job billed to vision: refused as a submission would be, and no quota figures."""
    _vision_usage(clean_cache)
    body = {"yaml": EXAMPLE_TEXT, "overrides": {"gpus": 1, "partition": "train", "account": "vision"}}
    checked = call(client, "post", "/profiles/validate", tokens["bob"], body).json()
    assert checked["valid"] is False and checked["quota"] is None
    assert any(e["field"] == "account" for e in checked["errors"]), checked["errors"]


# --- jobs: list, show, cancel, log ---------------------------------------------------------------
def _job(user, **kw):
    fields = dict(
        user=user,
        account="vision",
        name="j",
        partition="small",
        memory_mb=1,
        time_limit_min=10,
        script="true",
        state=JobState.RUNNING,
        slurm_job_id=77,
        output_path="/o/%j.out",
        error_path="/o/%j.err",
    )
    fields.update(kw)
    return Job.objects.create(**fields)


def test_a_job_is_found_by_the_id_ls_prints_and_one_task_only_where_it_can_be(client, people, tokens):
    """`gpuportal ls` prints an array as 123_[1-500%20] and a het job as 124+0-1: each names the job
    itself. Slurm's one-task name 123_7 is that task for cancel, and refused elsewhere with what to
    write; a part of a job (a subset of the tasks, one het component) is refused, never widened."""
    from urllib.parse import quote

    from audit.models import AuditEvent
    from jobs.models import JobKind

    alice, raw = people["alice"], tokens["alice"]
    array = _job(alice, name="sweep", state=JobState.PENDING, slurm_job_id=123, kind=JobKind.ARRAY, array_spec="1-500%20",
                 array_tasks={"PENDING": "1-500"})  # fmt: skip
    het = _job(
        alice,
        name="pair",
        slurm_job_id=124,
        kind=JobKind.HET,
        het_parts=[{"offset": 0, "job_id": 124}, {"offset": 1, "job_id": 125}],
    )

    def get(ref):
        return call(client, "get", f"/jobs/{quote(ref, safe='')}", raw)

    for ref, job in (("123", array), ("123_[1-500%20]", array), ("124+0-1", het), ("124", het)):
        r = get(ref)
        assert r.status_code == HTTPStatus.OK and r.json()["key"] == str(job.key), (ref, r.content)
    one_task = get("123_7")
    assert one_task.status_code == HTTPStatus.BAD_REQUEST
    assert one_task.json()["detail"] == (
        "'123_7' is task 7 of array job 123, and the API shows the whole array: use 123 (its `tasks` lists every task's "
        "id by state)."
    )
    for part in ("123_[1-5]", "124+1"):
        r = get(part)
        assert r.status_code == HTTPStatus.BAD_REQUEST and "the portal acts on whole jobs: use 12" in r.json()["detail"]
    plain = _job(alice, name="one", slurm_job_id=600)
    r = get("600_3")
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["detail"] == (
        "'600_3' names task 3 of an array, but job 600 is not an array job: use 600."
    )
    assert call(client, "post", "/jobs/600_3/cancel", raw).status_code == HTTPStatus.BAD_REQUEST
    assert get("600").json()["key"] == str(plain.key)
    spec = ",".join(str(n) for n in range(0, 150, 2))  # as stored for --array=0-148:2, 244 characters
    long = _job(alice, name="steps", state=JobState.PENDING, slurm_job_id=556, kind=JobKind.ARRAY, array_spec=spec)
    assert 200 < len(spec) <= 255 and long.slurm_ref == f"556_[{spec}]"
    assert get(long.slurm_ref).json()["key"] == str(long.key)
    unknown = get("123-7")
    assert unknown.status_code == HTTPStatus.NOT_FOUND and "123_[1-50], 123+0-1, 123_7" in unknown.json()["detail"]

    cancel = call(client, "post", "/jobs/123_7/cancel", raw)
    assert cancel.status_code == HTTPStatus.ACCEPTED, cancel.content
    assert AuditEvent.objects.get(action="job.task_cancel_requested").new["task"] == 7
    other = call(client, "post", "/jobs/123_7/cancel?task=8", raw)
    assert other.status_code == HTTPStatus.BAD_REQUEST and "names task 7 but task=8 was asked" in other.json()["detail"]
    whole = call(client, "post", f"/jobs/{quote('123_[1-500%20]', safe='')}/cancel", raw)
    assert whole.status_code == HTTPStatus.ACCEPTED and AuditEvent.objects.filter(action="job.cancel_requested").count() == 1


def test_log_reads_from_an_offset_as_the_owner(client, people, tokens, monkeypatch, clean_cache):
    from slurm import SlurmGateway
    from tests.fakes import FakeTransport

    job = _job(people["alice"])
    fake = FakeTransport()
    fake.expect(
        [
            "sudo",
            "-n",
            "-u",
            "alice",
            "--",
            "dd",
            "if=/o/77.out",
            "iflag=skip_bytes,count_bytes",
            "skip=5",
            "count=65536",
            "status=none",
        ],
        stdout="époch 1\n",
    )
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    body = call(client, "get", "/jobs/77/log?offset=5", tokens["alice"]).json()
    assert body == {
        "stream": "out",
        "offset": 5,
        "next_offset": 5 + len("époch 1\n".encode()),
        "data": "époch 1\n",
        "missing": False,
        "final": False,
        "state": "RUNNING",
        "error": "",
        "where_unknown": False,
        "message": "",
        "tail": None,  # a read from an offset, not a tail read
    }
    assert call(client, "get", f"/jobs/{job.key}/log?stream=bad", tokens["alice"]).status_code == HTTPStatus.BAD_REQUEST


def test_a_log_whose_place_is_not_known_says_so_not_no_output_yet(client, people, tokens, clean_cache):
    """An outside job imported from 22.05's accounting has no paths: the page says where it wrote is
    not known, not that no output was written yet; no Slurm call is made."""
    from jobs.models import JobOrigin

    job = _job(people["alice"], state=JobState.FAILED, origin=JobOrigin.OUTSIDE, output_path="", error_path="")
    body = call(client, "get", f"/jobs/{job.key}/log?stream=err", tokens["alice"]).json()
    assert (body["data"], body["missing"], body["final"], body["where_unknown"]) == ("", True, True, True)
    assert body["message"] == (
        "Where this job wrote its output is not known: it ended before the portal saw it running, and this "
        "cluster's accounting does not keep the paths."
    )
    waiting = _job(people["alice"], state=JobState.PENDING, origin=JobOrigin.OUTSIDE, output_path="", error_path="")
    body = call(client, "get", f"/jobs/{waiting.key}/log", tokens["alice"]).json()
    assert (body["missing"], body["where_unknown"], body["message"]) == (True, False, "")  # its path may yet come
    portal = _job(people["alice"], slurm_job_id=None, state=JobState.SUBMITTING, output_path="")
    body = call(client, "get", f"/jobs/{portal.key}/log", tokens["alice"]).json()
    assert (body["missing"], body["where_unknown"], body["message"]) == (True, False, "")  # not submitted yet


@pytest.mark.parametrize(
    "state, data, text, used",
    [
        (JobState.RUNNING, "ab é".encode()[:-1], "ab ", 3),  # é cut after its first byte: left for the next read
        (JobState.RUNNING, "ab é".encode(), "ab é", 5),
        (JobState.RUNNING, b"a\xffb\xc3", "a\ufffdb", 3),  # an invalid byte in the middle is replaced, not waited on
        (JobState.COMPLETED, "ab é".encode()[:-1], "ab \ufffd", 4),  # ended, and less than asked for: nothing more will come
    ],
)
def test_log_chunks_never_split_a_character(client, people, tokens, monkeypatch, clean_cache, state, data, text, used):
    from jobs.reads.logs import job_log_read
    from slurm import SlurmGateway
    from tests.fakes import FakeTransport

    job = _job(people["alice"], state=state)
    fake = FakeTransport()
    fake.expect(
        [
            "sudo",
            "-n",
            "-u",
            "alice",
            "--",
            "dd",
            "if=/o/77.out",
            "iflag=skip_bytes,count_bytes",
            "skip=5",
            "count=64",
            "status=none",
        ],
        stdout=data,
    )
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    chunk = job_log_read(job, "out", offset=5, limit=64)
    assert (chunk.text, chunk.next_offset) == (text, 5 + used)


# Every endpoint x role: alice owns the job and the (vision-shared) profile; carol leads vision;
# bob is in nlp; dana is an admin in no team; "unlinked" is an identity no admin has linked yet, with a
# token of its own (made before an admin's refusal, say): every endpoint says so, and changes nothing.
# fmt: off
MATRIX = {
    #                                         alice  carol  bob   dana  unlinked
    ("get", "/jobs"):                         (200,  200,   200,  200, 403),
    ("get", "/jobs/{job}"):                   (200,  404,   404,  200, 403),
    ("get", "/jobs/77"):                      (200,  404,   404,  200, 403),
    ("get", "/jobs/{job}/log"):               (200,  404,   404,  200, 403),
    ("get", "/jobs/{job}/log?tail=8"):        (200,  404,   404,  200, 403),
    ("post", "/jobs/{job}/cancel"):           (202,  404,   404,  403, 403),
    ("get", "/profiles"):                     (200,  200,   200,  200, 403),
    ("get", "/profiles/{profile}"):           (200,  200,   404,  200, 403),
    ("put", "/profiles/{profile}"):           (200,  403,   404,  403, 403),
    ("post", "/profiles/{profile}/share"):    (200,  403,   404,  403, 403),
    ("post", "/profiles/{profile}/clone"):    (201,  201,   404,  400, 403),
    ("post", "/profiles/{profile}/submit"):   (201,  201,   404,  400, 403),
    ("delete", "/profiles/{profile}"):        (204,  403,   404,  403, 403),
    ("get", "/sessions"):                     (200,  200,   200,  200, 403),
    ("get", "/sessions/lab-0000"):            (200,  404,   404,  404, 403),
    ("get", "/sessions/kinds"):               (200,  200,   200,  200, 403),
    ("get", "/teams"):                        (200,  200,   200,  200, 403),
    ("get", "/teams/vision/usage"):           (404,  200,   404,  200, 403),
    ("get", "/teams/vision/figures"):         (404,  200,   404,  200, 403),
    ("get", "/me"):                           (200,  200,   200,  200, 403),
    ("get", "/clusters"):                     (200,  200,   200,  200, 403),
    ("get", "/announcements"):                (200,  200,   200,  200, 403),
    ("get", "/images"):                       (200,  200,   200,  200, 403),
    ("get", "/jobs?cluster=cluster2"):        (200,  200,   200,  200, 403),
    ("get", "/adoption"):                     (403,  403,   403,  200, 403),
    ("get", "/cluster/cluster1/nodes"):       (403,  403,   403,  200, 403),
    ("get", "/cluster/cluster2/reservations"): (403, 403,   403,  200, 403),
}
# fmt: on
WHO = ["alice", "carol", "bob", "dana", "unlinked"]
BODIES = {"put": {"yaml": EXAMPLE_TEXT}, "share": {"team": "vision"}, "clone": {"name": "mine"}, "submit": {}}


@pytest.mark.parametrize("endpoint", list(MATRIX), ids=[f"{m} {p}" for m, p in MATRIX])
@pytest.mark.parametrize("who", WHO)
def test_role_matrix(client, people, tokens, cluster, who, endpoint, monkeypatch, django_capture_on_commit_callbacks):
    from datetime import datetime

    from interactive.models import Session
    from jobs.reads.logs import LogChunk
    from teams.usage.cache import TeamUsage, UsageStatus, _store

    monkeypatch.setattr("api.jobs.job_log_read", lambda job, stream, offset, limit, tail: LogChunk(offset, offset + 2, "ok"))
    monkeypatch.setattr("interactive.services.hub.servers", lambda username: {})
    _store(
        {
            "vision": TeamUsage(
                account="vision", tracked=True, period_start=datetime(2026, 11, 1, tzinfo=UTC), period_end=None, taken_at=1.0
            )
        },
        UsageStatus(taken_at=1.0),
    )
    job = _job(people["alice"])
    Session.objects.create(
        user=people["alice"],
        server_name="lab-0000",
        ide="lab",
        partition="interactive",
        memory_mb=1,
        time_limit_min=60,
        state="STOPPED",
    )
    profile = Profile.objects.create(
        owner=people["alice"],
        name="digits",
        yaml=EXAMPLE_TEXT,
        spec={"version": 1},
        team_id=people["alice"].memberships.get().team_id,
    )
    method, path = endpoint
    url = path.format(job=job.key, profile=profile.pk)
    body = BODIES.get(path.rsplit("/", 1)[-1], BODIES["put"] if method == "put" else None)
    if who == "unlinked":
        waiting = User.objects.create(username="unlinked.0123456789abcdef", link_state="pending", requested_username="alice")
        tokens = {**tokens, who: token_create(user=waiting, name="t", scopes=ALL, days=30)[1]}
    with django_capture_on_commit_callbacks():
        r = call(client, method, url, tokens[who], body if method in ("post", "put") else None)
    expected = MATRIX[endpoint][WHO.index(who)]
    assert r.status_code == expected, f"{who} {method} {url}: {r.status_code} {r.content[:300]}"
    if expected >= 400:
        assert r.json()["detail"]  # always a sentence
    if expected in (403, 404) and method != "get":
        profile.refresh_from_db()
        job.refresh_from_db()
        assert profile.yaml == EXAMPLE_TEXT and profile.team_id and job.cancel_requested_at is None  # nothing changed


def test_openapi_schema_is_served_and_the_committed_copy_is_current(client, people):
    from pathlib import Path

    client.force_login(people["alice"])
    docs = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in docs and "cdn." not in docs  # works without internet access
    served = client.get("/api/v1/openapi.json").json()
    committed = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    assert served == committed, "docs/openapi.json is stale: run `python manage.py export_openapi`"
    assert {
        "/api/v1/jobs",
        "/api/v1/jobs/{ref}/log",
        "/api/v1/sessions",
        "/api/v1/profiles/{pk}/submit",
        "/api/v1/teams/{name}/usage",
    } <= set(served["paths"])


def test_submit_with_a_priority_class_override_and_its_refusal(
    client, people, tokens, cluster, no_slurm, settings, django_capture_on_commit_callbacks
):
    """The API (and the CLI's --set, which sends the same overrides) takes the class as ``priority``
    (run.priority); a refusal names the field and what to change."""
    settings.PORTAL_PRIORITY_CLASSES = True
    r = call(
        client,
        "post",
        "/jobs",
        tokens["alice"],
        {"profile_yaml": EXAMPLE_TEXT, "overrides": {"priority": "scavenger", "requeue": False}},
    )
    assert r.status_code == HTTPStatus.BAD_REQUEST and Job.objects.count() == 0
    [error] = r.json()["errors"]
    assert error["field"] == "run.requeue" and "turn requeue on" in error["message"]
    with django_capture_on_commit_callbacks():
        r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"priority": "scavenger"}})
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert Job.objects.get().priority_class == "scavenger"


def test_a_jobs_runs_and_preemptions_are_in_its_api_object_for_its_owner_only(client, people, tokens, cluster, no_slurm):
    preempted = {"state": "PREEMPTED", "why": "preempted at 14:02 UTC by a higher class, requeued", "elapsed_s": 240}
    job = _job(people["alice"], priority_class="scavenger", restart_count=1, runs=[preempted])
    body = call(client, "get", f"/jobs/{job.key}", tokens["alice"]).json()
    assert (body["priority_class"], body["restart_count"], body["preempted_runs"]) == ("scavenger", 1, 1)
    assert body["runs"] == [preempted]
    assert call(client, "get", f"/jobs/{job.key}", tokens["bob"]).status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND)
