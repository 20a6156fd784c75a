"""Memory through the API: a session body's ``memory`` and a profile's
``overrides.memory`` are read by the one reader (portal.units.memory_mib), as on the pages; a
refusal is the API's 400 naming the field, with the sentence that says which units are accepted.
JupyterHub is not running (nothing listens at its URL): a start that passes every check is stored,
then fails at the hub call with 503, so what was read can be seen on the stored session."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from interactive.models import Session
from jobs.models import Job
from portal.units import ACCEPTED
from tests.api.test_api import call
from tests.conftest import free_port
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_hub(settings):
    settings.PORTAL_HUB_API_URL = f"http://127.0.0.1:{free_port()}/hub/api"  # nothing listens there
    settings.PORTAL_HUB_TOKEN = "t"
    settings.PORTAL_SESSION_PARTITIONS, settings.PORTAL_SESSION_MAX_GPUS, settings.PORTAL_SESSION_MAX_HOURS = (
        ["interactive"],
        2,
        8,
    )


@pytest.mark.parametrize(
    "body, mib",
    [
        ({"memory": "4000M"}, 4000),  # memory_gb (a float of GB) could not say 4000 MiB
        ({"memory": "4 GB"}, 4096),
        ({"memory": "512MiB"}, 512),
        ({"memory": 1.5}, 1536),  # a bare number means GB, as on the Sessions page
        ({"memory": "2"}, 2048),
        ({}, 4096),  # the default, 4G
        ({"memory_gb": 2}, 2048),  # older clients
        ({"memory_gb": 0.5}, 512),
    ],
)
def test_session_memory_is_read_by_the_one_reader(client, people, tokens, cluster, no_slurm, no_hub, body, mib):  # noqa: F811
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "hours": 1, **body})
    assert r.status_code == HTTPStatus.SERVICE_UNAVAILABLE, r.content  # every check passed; the hub is down
    assert Session.objects.get().memory_mb == mib


@pytest.mark.parametrize(
    "body, field, sentence",
    [
        ({"memory": "4GBs"}, "memory", "'4GBs' is not an amount of memory."),
        ({"memory": "1e3"}, "memory", "'1e3' is not an amount of memory."),
        ({"memory": "0"}, "memory", "Memory must be more than 0 ('0' is not)."),
        ({"memory": -1}, "memory", "Memory must be more than 0 ('-1' is not)."),
        ({"memory": "99T"}, "memory", "'99T' is more memory than any node has: at most 64T."),
        ({"memory": 2048}, "memory", "2048 with no unit would be 2048 GB: write 2048M for MiB"),
        ({"memory": True}, "memory", "Memory must be an amount such as 4G, not yes/no or true/false."),
    ],
)
def test_session_memory_refused_names_the_field_and_the_units(
    client, people, tokens, cluster, no_slurm, no_hub, body, field, sentence
):  # noqa: F811
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "hours": 1, **body})
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    [error] = r.json()["errors"]
    assert error["field"] == field and error["message"].startswith(sentence) and error["message"].endswith(ACCEPTED), error
    assert not Session.objects.exists()


def test_session_memory_beyond_the_largest_node_is_site_policys_refusal_on_memory(
    client, people, tokens, cluster, no_slurm, no_hub
):  # noqa: F811
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "hours": 1, "memory": "64G"})
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    [error] = r.json()["errors"]
    assert error["field"] == "memory" and error["message"].startswith("Memory must be at most 15.6 GB"), error


def test_session_memory_and_memory_gb_together_are_refused(client, people, tokens, cluster, no_slurm, no_hub):  # noqa: F811
    r = call(client, "post", "/sessions", tokens["alice"], {"partition": "interactive", "memory": "4G", "memory_gb": 4})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["errors"] == [
        {"field": "memory", "message": "Give memory or memory_gb, not both (memory takes 4G, 4000M or 1.5T).", "line": None}
    ]


@pytest.mark.parametrize("memory, mib", [("4000M", 4000), ("1.5G", 1536), (3, 3072), ("6 GiB", 6144)])
def test_profile_memory_override_is_read_by_the_one_reader(client, people, tokens, cluster, no_slurm, memory, mib):  # noqa: F811
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"memory": memory}})
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert r.json()["memory_mb"] == mib and Job.objects.get().memory_mb == mib


def test_profile_memory_override_refused_says_what_to_write(client, people, tokens, cluster, no_slurm):  # noqa: F811
    """``--set memory=4096`` (Slurm's habit: MiB) is refused with the sentence, not taken as 4096 GB."""
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"memory": 4096}})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    [error] = r.json()["errors"]
    assert (error["field"], error["line"]) == ("resources.memory", None)
    assert error["message"] == (
        "4096 with no unit would be 4096 GB: write 4096M for MiB (what Slurm's --mem means by a bare number) or 4096G for GB. "
        + ACCEPTED
    )
    assert not Job.objects.exists()
