"""Profile pages through the Django test client: list, new (prefilled, checked with errors by field
and line, uploads), save, run now, run/clone with overrides, share/edit/delete by owner only, and
every URL x role. Refusals are 4xx with a sentence, never 500, and change nothing."""

from __future__ import annotations

import html
from http import HTTPStatus

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.models import Job
from profiles.models import Profile
from slurm.states import JobState
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def page(response) -> str:
    return html.unescape(response.content.decode())


def errors_of(response) -> list[str]:
    """The texts of the listed profile errors (data-testid=profile-error)."""
    text = response.content.decode()
    return [
        html.unescape(chunk.split("</li>", 1)[0]).replace("<code>", "").replace("</code>", "")
        for chunk in text.split('data-testid="profile-error">')[1:]
    ]


def make(owner, name="digits", team=None, text=EXAMPLE_TEXT) -> Profile:
    from profiles.schema import parse_profile

    spec = parse_profile(text.replace("name: train-digits", f"name: {name}"))
    return Profile.objects.create(
        owner=owner, name=name, yaml=text.replace("name: train-digits", f"name: {name}"), spec=spec.data, team=team
    )


def team(name):
    from teams.models import Team

    return Team.objects.get(name=name)


# --- list and new --------------------------------------------------------------------------------
def test_list_shows_own_and_team_shared_profiles_only(client, people):
    make(people["alice"], "alice-own")
    make(people["carol"], "carol-shared", team=team("vision"))
    make(people["carol"], "carol-private")
    make(people["bob"], "bob-nlp-shared", team=team("nlp"))
    client.force_login(people["alice"])
    r = client.get("/profiles/")
    assert r.status_code == HTTPStatus.OK
    body = page(r)
    assert "alice-own" in body and "carol-shared" in body
    assert "carol-private" not in body and "bob-nlp-shared" not in body
    assert body.count('data-testid="profile-row"') == 2
    client.force_login(people["dana"])  # an admin in no team: no one else's profiles in the list
    r = client.get("/profiles/")
    assert r.status_code == HTTPStatus.OK and 'data-testid="no-profiles"' in r.content.decode()


def test_new_page_is_prefilled_with_the_example(client, people, settings):
    client.force_login(people["alice"])
    r = client.get("/profiles/new/")
    assert r.status_code == HTTPStatus.OK
    example = (settings.BASE_DIR / "examples" / "train_digits.yaml").read_text()
    assert r.context["form"]["yaml"].value() == example
    body = page(r)
    assert "name: train-digits" in body and "scikit-learn==1.7.2" in body
    assert 'data-testid="check-profile"' in body and 'data-testid="save-profile"' in body


def test_check_a_valid_profile_shows_the_script(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "action": "check"})
    assert r.status_code == HTTPStatus.OK
    body = page(r)
    assert 'data-testid="profile-valid"' in body and "train_digits.py" in r.context["script"]
    assert Profile.objects.count() == 0 and Job.objects.count() == 0 and no_slurm.calls == []


def test_check_a_broken_profile_lists_errors_by_field_and_line_and_keeps_the_text(client, people, cluster, no_slurm):
    text = (
        EXAMPLE_TEXT.replace("gpus_per_node: 0", "gpus_per_node: two")
        .replace('python: "3.11"', 'python: "2.7"')
        .replace("name: train-digits", "name: digits <b>&amp; $(id)</b>")
    )
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": text, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    errors = errors_of(r)
    gpus = [e for e in errors if "resources.gpus_per_node" in e]
    assert gpus and gpus[0].startswith("line 5 · resources.gpus_per_node:"), errors
    python = [e for e in errors if "environment.python" in e]
    assert not python or python[0].startswith("line 14 ·"), errors  # reported with the schema errors or after them
    # The text is kept as typed (and escaped in the page).
    assert r.context["form"]["yaml"].value() == text
    raw = r.content.decode()
    assert "<b>&amp;" not in raw.split('data-testid="profile-form"')[1] and "digits &lt;b&gt;&amp;amp; $(id)&lt;/b&gt;" in raw
    assert Profile.objects.count() == 0 and Job.objects.count() == 0


def test_policy_errors_are_listed_with_their_line(client, people, cluster, no_slurm):
    text = EXAMPLE_TEXT.replace("partition: small", "partition: gpu-huge").replace('python: "3.11"', 'python: "2.7"')
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": text, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    errors = errors_of(r)
    assert any(e.startswith("line 4 · resources.partition:") and "not offered on cluster1" in e for e in errors), errors
    assert any(e.startswith("line 14 · environment.python:") and "Offered: 3.11" in e for e in errors), errors


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\nname: [unclosed\n",
        "- just\n- a list\n",
        "just a string",
        "version: 99\nname: x\n",
        "version: 1\nname: x\nresources: {partition: small}\nrun: {script: a.py, command: b}\n",
        "!!python/object/apply:os.system ['id']\n",
        "a: &a [*a]\n",
        "x" * (70 * 1024),
        "version: 1\nname: x\n\x00\n",
    ],
)
def test_odd_input_is_a_400_with_errors_never_a_500(client, people, cluster, no_slurm, text):
    client.force_login(people["alice"])
    for action in ("check", "save", "run"):
        r = client.post("/profiles/new/", {"yaml": text, "action": action})
        assert r.status_code == HTTPStatus.BAD_REQUEST, (action, r.status_code)
        assert errors_of(r) or 'data-testid="form-error"' in r.content.decode() or 'data-testid="error-' in r.content.decode()
    assert Profile.objects.count() == 0 and Job.objects.count() == 0


def test_nul_character_is_refused_with_one_clear_reason(client, people):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": "version: 1\nname: x\x00\n", "action": "check"})
    body = page(r)
    assert r.status_code == HTTPStatus.BAD_REQUEST and 'data-testid="error-yaml">Null characters are not allowed.' in body
    assert "Type a profile or upload a file." not in body
    upload = SimpleUploadedFile("train.yaml", b"version: 1\nname: x\x00\n", content_type="application/x-yaml")
    r = client.post("/profiles/new/", {"yaml": "", "upload": upload, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and any("NUL character" in e for e in errors_of(r)), errors_of(r)


def test_empty_text_asks_for_a_profile(client, people):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": "   \n", "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and "Type a profile or upload a file." in page(r)


# --- upload --------------------------------------------------------------------------------------
def test_upload_a_yaml_file(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    upload = SimpleUploadedFile("train.yaml", ("\ufeff" + EXAMPLE_TEXT).encode("utf-8"), content_type="application/x-yaml")
    r = client.post("/profiles/new/", {"yaml": "ignored: true\n", "upload": upload, "action": "check"})
    assert r.status_code == HTTPStatus.OK and 'data-testid="profile-valid"' in r.content.decode()
    upload = SimpleUploadedFile("train.yaml", EXAMPLE_TEXT.encode("utf-8"), content_type="application/x-yaml")
    r = client.post("/profiles/new/", {"yaml": "", "upload": upload, "action": "save"})
    saved = Profile.objects.get()
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/profiles/{saved.pk}/"
    assert saved.yaml == EXAMPLE_TEXT and saved.owner == people["alice"]


def test_uploaded_broken_file_lists_its_errors_by_line(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    upload = SimpleUploadedFile(
        "train.yaml", EXAMPLE_TEXT.replace("cpus: 2", "cpus: lots").encode(), content_type="application/x-yaml"
    )
    r = client.post("/profiles/new/", {"yaml": "", "upload": upload, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert any(e.startswith("line 6 · resources.cpus:") for e in errors_of(r)), errors_of(r)


def test_non_utf8_upload_is_a_clear_error(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    upload = SimpleUploadedFile(
        "train.yaml",
        EXAMPLE_TEXT.replace("train-digits", "tr\u00e4in").encode("latin-1") + b"\xff\xfe",
        content_type="application/x-yaml",
    )
    r = client.post("/profiles/new/", {"yaml": "", "upload": upload, "action": "save"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert 'data-testid="form-error">The uploaded file is not UTF-8 text.' in r.content.decode()
    assert Profile.objects.count() == 0


def test_too_large_upload_is_refused(client, people):
    client.force_login(people["alice"])
    upload = SimpleUploadedFile("big.yaml", b"# " + b"x" * (65 * 1024), content_type="application/x-yaml")
    r = client.post("/profiles/new/", {"upload": upload, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and "The file is larger than 64 KiB." in page(r)


# --- save, run now -------------------------------------------------------------------------------
def test_save_creates_and_redirects_to_the_detail_page(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "team": "vision", "action": "save"})
    saved = Profile.objects.get()
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/profiles/{saved.pk}/"
    assert (saved.name, saved.owner, saved.team.name, saved.yaml) == ("train-digits", people["alice"], "vision", EXAMPLE_TEXT)
    assert saved.spec["resources"]["partition"] == "small"
    r = client.get(r["Location"])
    assert r.status_code == HTTPStatus.OK
    body = page(r)
    assert "Profile “train-digits” is saved." in body and EXAMPLE_TEXT.strip() in body
    assert "shared with team vision" in body and 'data-testid="edit-profile"' in body
    # The same name again is a clear error on the name's line.
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "action": "save"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and any(
        e.startswith("line 2 · name:") and "already have a profile" in e for e in errors_of(r)
    )
    assert Profile.objects.count() == 1 and no_slurm.calls == []


def test_save_with_a_team_you_are_not_in_is_refused(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "team": "nlp", "action": "save"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and 'data-testid="error-team"' in r.content.decode()
    assert Profile.objects.count() == 0


def test_run_now_without_saving_creates_a_job(client, people, cluster, no_slurm, django_capture_on_commit_callbacks):
    client.force_login(people["alice"])
    with django_capture_on_commit_callbacks() as callbacks:
        r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "action": "run"})
    job = Job.objects.get()
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/jobs/{job.key}/"
    assert (job.user, job.account, job.name, job.partition, job.gpu_count, job.cpus, job.memory_mb, job.time_limit_min) == (
        people["alice"],
        "vision",
        "train-digits",
        "small",
        0,
        2,
        2048,
        10,
    )
    assert job.state == JobState.SUBMITTING and job.profile is None and job.profile_spec["name"] == "train-digits"
    assert job.workdir == "gpuportal-examples/digits" and "scikit-learn==1.7.2" in job.script and "train_digits.py" in job.script
    assert Profile.objects.count() == 0  # not saved
    assert len(callbacks) == 1 and no_slurm.calls == []  # the submission waits for the commit: nothing was sent


def test_run_now_refused_by_policy_is_400_and_no_job(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT.replace("gpus_per_node: 0", "gpus_per_node: 4"), "action": "run"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert any(e.startswith("line 5 · resources.gpus_per_node:") and "Allowed: 0, 1, 2" in e for e in errors_of(r)), errors_of(r)
    assert Job.objects.count() == 0


def test_admin_in_no_team_cannot_run(client, people, cluster, no_slurm):
    client.force_login(people["dana"])
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "action": "run"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and any("account:" in e and "not in any team" in e for e in errors_of(r))
    assert Job.objects.count() == 0


# --- detail: run and clone with overrides ---------------------------------------------------------
def test_detail_run_with_a_gpu_count_the_partition_does_not_allow(client, people, cluster, no_slurm):
    profile = make(people["alice"], team=team("vision"))
    client.force_login(people["alice"])
    r = client.post(f"/profiles/{profile.pk}/run/", {"gpus": "4", "partition": "small"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    errors = errors_of(r)
    gpus = [e for e in errors if e.startswith("resources.gpus_per_node:")]  # an override: no line
    assert gpus and "Allowed: 0, 1, 2" in gpus[0], errors
    assert r.context["form"]["gpus"].value() == "4"  # the overrides are kept
    assert Job.objects.count() == 0 and no_slurm.calls == []


@pytest.mark.parametrize(
    "data, field, sentence",
    [
        ({"gpus": "x"}, "gpus", "GPUs per node must be a whole number, such as 4, or empty to keep the profile's."),
        ({"gpus": "-1"}, "gpus", "GPUs per node cannot be fewer than 0: give 0 for none."),
        ({"time_limit": "x" * 30}, "time_limit", "The time limit is too long to read: write it as 90, 2:00:00 or 1-12:00:00."),
        ({"image": "no-such-image"}, "image", "'no-such-image' is not an image offered on this cluster: choose one of the list."),
    ],
)
def test_detail_run_with_malformed_overrides_is_400(client, people, cluster, no_slurm, data, field, sentence):
    profile = make(people["alice"])
    client.force_login(people["alice"])
    r = client.post(f"/profiles/{profile.pk}/run/", data)
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.context["form"].errors[field] == [sentence]
    assert Job.objects.count() == 0


def test_detail_run_with_overrides_creates_a_job_from_the_profile(
    client, people, cluster, no_slurm, django_capture_on_commit_callbacks
):
    profile = make(people["alice"], team=team("vision"))
    client.force_login(people["carol"])  # a colleague runs the shared profile
    with django_capture_on_commit_callbacks() as callbacks:
        r = client.post(f"/profiles/{profile.pk}/run/", {"gpus": "2", "partition": "train", "time_limit": "00:30:00"})
    job = Job.objects.get()
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/jobs/{job.key}/"
    assert (job.user, job.profile, job.partition, job.gpu_count, job.time_limit_min, job.memory_mb) == (
        people["carol"],
        profile,
        "train",
        2,
        30,
        2048,
    )
    assert job.profile_spec["resources"]["gpus_per_node"] == 2
    assert len(callbacks) == 1 and no_slurm.calls == []
    profile.refresh_from_db()
    assert "gpus_per_node: 0" in profile.yaml  # the profile itself is unchanged
    r = client.get(f"/profiles/{profile.pk}/")
    assert r.status_code == HTTPStatus.OK and list(r.context["jobs"]) == [job]


def test_clone_with_overrides_is_a_copy_owned_by_the_cloner(client, people, cluster, no_slurm):
    profile = make(people["alice"], team=team("vision"))
    client.force_login(people["carol"])
    r = client.post(f"/profiles/{profile.pk}/clone/", {"gpus": "4", "partition": "train", "name": "digits-4gpu"})
    copy = Profile.objects.exclude(pk=profile.pk).get()
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/profiles/{copy.pk}/"
    assert (copy.owner, copy.name, copy.cloned_from, copy.team) == (people["carol"], "digits-4gpu", profile, None)
    assert copy.spec["resources"]["gpus_per_node"] == 4 and copy.spec["resources"]["partition"] == "train"
    assert "gpus_per_node: 4" in copy.yaml
    profile.refresh_from_db()
    assert profile.owner == people["alice"] and "gpus_per_node: 0" in profile.yaml
    body = page(client.get(r["Location"]))
    assert "Copied as “digits-4gpu”." in body and f"copied from profile #{profile.pk}" in body
    # Without a name: "<name> (copy)"; a second such copy clashes by name: 400 with the message.
    r = client.post(f"/profiles/{profile.pk}/clone/", {})
    assert r.status_code == HTTPStatus.FOUND and Profile.objects.filter(owner=people["carol"], name="digits (copy)").exists()
    r = client.post(f"/profiles/{profile.pk}/clone/", {})
    assert r.status_code == HTTPStatus.BAD_REQUEST and any("already have a profile" in e for e in errors_of(r))


def test_clone_refused_by_policy_is_400_and_no_copy(client, people, cluster, no_slurm):
    profile = make(people["alice"])
    client.force_login(people["alice"])
    r = client.post(f"/profiles/{profile.pk}/clone/", {"gpus": "4", "name": "too-many"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and any("Allowed: 0, 1, 2" in e for e in errors_of(r)), errors_of(r)
    assert Profile.objects.count() == 1


# --- owner only: edit, share, delete -------------------------------------------------------------
def test_owner_edits_shares_and_deletes(client, people, cluster, no_slurm):
    profile = make(people["alice"])
    client.force_login(people["alice"])
    r = client.get(f"/profiles/{profile.pk}/edit/")
    assert r.status_code == HTTPStatus.OK and r.context["form"]["yaml"].value() == profile.yaml
    changed = profile.yaml.replace("cpus: 2", "cpus: 3")
    r = client.post(f"/profiles/{profile.pk}/edit/", {"yaml": changed, "team": "", "action": "save"})
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == f"/profiles/{profile.pk}/"
    profile.refresh_from_db()
    assert profile.yaml == changed and profile.spec["resources"]["cpus"] == 3
    r = client.post(f"/profiles/{profile.pk}/share/", {"team": "vision"})
    assert r.status_code == HTTPStatus.FOUND
    profile.refresh_from_db()
    assert profile.team.name == "vision"
    assert "Shared with team vision." in page(client.get(f"/profiles/{profile.pk}/"))
    r = client.post(f"/profiles/{profile.pk}/share/", {"team": ""})
    profile.refresh_from_db()
    assert r.status_code == HTTPStatus.FOUND and profile.team is None
    r = client.post(f"/profiles/{profile.pk}/delete/")
    assert r.status_code == HTTPStatus.FOUND and r["Location"] == "/profiles/"
    assert not Profile.objects.exists()
    assert "Profile “digits” is deleted." in page(client.get("/profiles/"))


def test_share_with_a_team_you_are_not_in_is_refused(client, people, cluster, no_slurm):
    profile = make(people["alice"], team=team("vision"))
    client.force_login(people["alice"])
    r = client.post(f"/profiles/{profile.pk}/share/", {"team": "nlp"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert "You can share only with a team you are in. Your teams: vision." in page(r)
    profile.refresh_from_db()
    assert profile.team.name == "vision"


def test_non_owner_team_member_gets_403_and_other_team_404(client, people, cluster, no_slurm):
    profile = make(people["alice"], team=team("vision"))
    before = (profile.yaml, profile.team_id, profile.name)
    client.force_login(people["carol"])
    body = page(client.get(f"/profiles/{profile.pk}/"))
    assert 'data-testid="edit-profile"' not in body and 'data-testid="delete-profile"' not in body  # no buttons she cannot use
    for method, url, data in [
        ("get", "edit/", None),
        ("post", "edit/", {"yaml": EXAMPLE_TEXT, "action": "save"}),
        ("post", "share/", {"team": ""}),
        ("post", "delete/", {}),
    ]:
        r = getattr(client, method)(f"/profiles/{profile.pk}/{url}", data)
        assert r.status_code == HTTPStatus.FORBIDDEN, (url, r.status_code)
    client.force_login(people["bob"])
    for method, url, data in [
        ("get", "", None),
        ("get", "edit/", None),
        ("post", "edit/", {"yaml": EXAMPLE_TEXT, "action": "save"}),
        ("post", "share/", {"team": ""}),
        ("post", "delete/", {}),
        ("post", "run/", {}),
        ("post", "clone/", {}),
    ]:
        r = getattr(client, method)(f"/profiles/{profile.pk}/{url}", data)
        assert r.status_code == HTTPStatus.NOT_FOUND, (url, r.status_code)
        assert "digits" not in r.content.decode()  # nothing of the profile shows
    profile.refresh_from_db()
    assert (profile.yaml, profile.team_id, profile.name) == before
    assert Profile.objects.count() == 1 and Job.objects.count() == 0


def test_missing_profile_and_wrong_methods(client, people):
    client.force_login(people["alice"])
    for url in ["/profiles/999/", "/profiles/999/edit/"]:
        assert client.get(url).status_code == HTTPStatus.NOT_FOUND
    for url in ["/profiles/999/run/", "/profiles/999/clone/", "/profiles/999/share/", "/profiles/999/delete/"]:
        assert client.post(url).status_code == HTTPStatus.NOT_FOUND
    profile = make(people["alice"])
    for url in ["run/", "clone/", "share/", "delete/"]:
        assert client.get(f"/profiles/{profile.pk}/{url}").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert client.put("/profiles/new/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert Profile.objects.count() == 1


def test_anonymous_is_sent_to_sign_in(client, people):
    profile = make(people["alice"])
    for method, url in [
        ("get", "/profiles/"),
        ("get", "/profiles/new/"),
        ("get", f"/profiles/{profile.pk}/"),
        ("post", f"/profiles/{profile.pk}/delete/"),
        ("post", f"/profiles/{profile.pk}/run/"),
    ]:
        r = getattr(client, method)(url)
        assert r.status_code == HTTPStatus.FOUND and "/accounts/" in r["Location"], (url, r.status_code)
    assert Profile.objects.count() == 1 and Job.objects.count() == 0


# --- every URL x role ----------------------------------------------------------------------------
# alice owns the (vision-shared) profile; carol leads vision; bob is in nlp; dana is an admin in no team.
# fmt: off
MATRIX = {
    #                                          alice  carol  bob   dana
    ("get", "/profiles/"):                     (200,  200,   200,  200),
    ("get", "/profiles/new/"):                 (200,  200,   200,  200),
    ("get", "/profiles/{pk}/"):                (200,  200,   404,  200),
    ("get", "/profiles/{pk}/edit/"):           (200,  403,   404,  403),
    ("post", "/profiles/{pk}/edit/"):          (302,  403,   404,  403),
    ("post", "/profiles/{pk}/run/"):           (302,  302,   404,  400),
    ("post", "/profiles/{pk}/clone/"):         (302,  302,   404,  400),
    ("post", "/profiles/{pk}/share/"):         (302,  403,   404,  403),
    ("post", "/profiles/{pk}/delete/"):        (302,  403,   404,  403),
}
# fmt: on
WHO = ["alice", "carol", "bob", "dana"]
BODIES = {
    "edit": {"yaml": EXAMPLE_TEXT.replace("cpus: 2", "cpus: 3"), "team": "", "action": "save"},
    "run": {"gpus": "1", "partition": "train"},
    "clone": {"name": "mine"},
    "share": {"team": ""},
    "delete": {},
}


@pytest.mark.parametrize("endpoint", list(MATRIX), ids=[f"{m} {p}" for m, p in MATRIX])
@pytest.mark.parametrize("who", WHO)
def test_role_matrix(client, people, cluster, no_slurm, who, endpoint, django_capture_on_commit_callbacks):
    profile = make(people["alice"], team=team("vision"))
    before = (profile.yaml, profile.name, profile.team_id, profile.owner_id)
    method, path = endpoint
    url = path.format(pk=profile.pk)
    body = BODIES.get(path.rstrip("/").rsplit("/", 1)[-1]) if method == "post" else None
    client.force_login(people[who])
    with django_capture_on_commit_callbacks():
        r = getattr(client, method)(url, body) if body is not None else getattr(client, method)(url)
    expected = MATRIX[endpoint][WHO.index(who)]
    assert r.status_code == expected, f"{who} {method} {url}: {r.status_code} {r.content[:300]}"
    assert r.status_code < 500
    if expected >= 400:
        assert r.content.strip()  # a page with a sentence, not an empty body
        profile.refresh_from_db()
        assert (profile.yaml, profile.name, profile.team_id, profile.owner_id) == before  # nothing changed
        assert Profile.objects.count() == 1 and Job.objects.count() == 0
    if expected == 400:
        assert errors_of(r), r.content[:500]
    if expected == 302 and path.endswith("/run/"):
        assert Job.objects.get().user == people[who] and Job.objects.get().profile == profile
    if expected == 302 and path.endswith("/clone/"):
        assert Profile.objects.get(name="mine").owner == people[who]


def test_run_in_another_image_from_the_profile_page(client, people, cluster, no_slurm, django_capture_on_commit_callbacks):
    """The Run form offers the site's images (and none); the job runs in the one picked,
    its environment built there (the script says so), and the list shows a profile's image."""
    from images.availability import image_state_store
    from images.models import Image
    from slurm.clusters import default_cluster

    image = Image.objects.create(
        name="debian12-sklearn",
        os="Debian GNU/Linux 12 (bookworm)",
        python_version="3.11.2",
        runtime="charliecloud",
        path="/srv/gpuportal/images/debian12-sklearn",
        digest="sha256:" + "ab" * 32,
        offers=["jupyterlab"],
    )
    image_state_store(image, default_cluster().name, available=True)
    profile = make(people["alice"])
    in_image = make(people["alice"], "in-image", text=EXAMPLE_TEXT.replace("resources:", "image: debian12-sklearn\nresources:"))
    client.force_login(people["alice"])
    page = client.get(f"/profiles/{profile.pk}/").content.decode()
    assert 'value="debian12-sklearn"' in page and "the profile&#x27;s (none)" in page and 'value="none"' in page
    rows = client.get("/profiles/").content.decode()
    assert "image debian12-sklearn" in rows and rows.count("image debian12-sklearn") == 1  # only in-image's row
    with django_capture_on_commit_callbacks():
        r = client.post(f"/profiles/{profile.pk}/run/", {"image": "debian12-sklearn"})
    job = Job.objects.get()
    assert r.status_code == HTTPStatus.FOUND and job.image_name == "debian12-sklearn" and job.image_digest == image.digest
    assert f"portal-env: in image debian12-sklearn ({image.digest})" in job.script
    assert "of image debian12-sklearn, 2 packages" in job.script
    # And back to the node's own system for a profile that names an image.
    with django_capture_on_commit_callbacks():
        r = client.post(f"/profiles/{in_image.pk}/run/", {"image": "none"})
    second = Job.objects.exclude(pk=job.pk).get()
    assert r.status_code == HTTPStatus.FOUND and second.image_name == "" and "portal-env: in image" not in second.script
    # An image the cluster does not have now is refused on the image field, and nothing is made.
    image_state_store(image, default_cluster().name, available=False, reason="it is not there")
    r = client.post(f"/profiles/{profile.pk}/run/", {"image": "debian12-sklearn"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and Job.objects.count() == 2
    assert "cannot be used on cluster" in r.content.decode()
    assert no_slurm.calls == []
