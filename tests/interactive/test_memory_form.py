"""The Sessions form's memory field reads what the other surfaces read: the one
reader (portal.units.memory_mib), a bare number meaning GB, and its refusals, each saying which
units are accepted. JupyterHub is not running here (tests/interactive/test_pages.py's ``world``): a
start that passes every check is stored and fails at the hub call, so what was read is on the row."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from interactive.models import Session
from portal.units import ACCEPTED
from tests.interactive.test_pages import GOOD, world  # noqa: F401  (fixture: snapshot, no hub, alice and bob)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "typed, mib",
    [("4000M", 4000), ("4 GB", 4096), ("512MiB", 512), (" 4 g ", 4096), ("1.5", 1536), ("2", 2048), ("0.75G", 768)],
)
def test_session_memory_as_typed(client, world, typed, mib):  # noqa: F811
    """The form once rounded to 0.1 GB: "4000M" became 3993 MiB."""
    alice, _ = world
    client.force_login(alice)
    resp = client.post("/sessions/", {**GOOD, "memory_gb": typed})
    assert "JupyterHub did not answer" in resp.content.decode()  # every check passed; the hub is down
    assert Session.objects.get().memory_mb == mib


@pytest.mark.parametrize(
    "typed, sentence",
    [
        ("4GBs", "&#x27;4GBs&#x27; is not an amount of memory."),
        ("4.5.6", "&#x27;4.5.6&#x27; is not an amount of memory."),
        ("1e3", "&#x27;1e3&#x27; is not an amount of memory."),
        ("0", "Memory must be more than 0 (&#x27;0&#x27; is not)."),
        ("-1", "Memory must be more than 0 (&#x27;-1&#x27; is not)."),
        ("2048", "2048 with no unit would be 2048 GB: write 2048M for MiB"),
        ("99999999999T", "is more memory than any node has: at most 64T."),
        ("256M", "Give at least 512M (0.5 GB) of memory."),  # a session's least
    ],
)
def test_session_memory_refused_with_the_units_accepted(client, world, typed, sentence):  # noqa: F811
    alice, _ = world
    client.force_login(alice)
    resp = client.post("/sessions/", {**GOOD, "memory_gb": typed})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    [error] = resp.context["form"].errors["memory_gb"]
    assert error.endswith(ACCEPTED), error
    assert sentence in resp.content.decode()
    assert not Session.objects.exists()


def test_the_field_says_what_a_bare_number_means(client, world):  # noqa: F811
    alice, _ = world
    client.force_login(alice)
    body = client.get("/sessions/").content.decode()
    assert "4G, 4000M or 1.5T (a bare number means GB)" in body and 'name="memory_gb" value="4G"' in body


@pytest.mark.parametrize(
    "field, typed, sentence",
    [
        ("ide", "", "Choose the IDE the session opens."),
        ("ide", "emacs", "'emacs' is not an IDE offered here: choose one of the list."),
        ("partition", "", "Choose a partition for the session."),
        ("gpu_count", "", "Choose how many GPUs: 0 for none."),
        ("gpu_count", "two", "GPUs must be a whole number: 0 for none."),
        ("gpu_count", "-1", "GPUs cannot be fewer than 0: choose 0 for a session without GPUs."),
        ("gpu_count", "65", "GPUs must be at most 64: choose a number from the list."),
        ("cpus", "", "Give the number of CPUs, such as 2."),
        ("cpus", "2.5", "CPUs must be a whole number, such as 2."),
        ("cpus", "0", "A session needs at least 1 CPU."),
        ("cpus", "5000", "CPUs must be at most 4096."),
        ("memory_gb", "", f"Give the memory the session needs. {ACCEPTED}"),
        ("hours", "", "Give how many hours the session may last, such as 2."),
        ("hours", "two", "Hours must be a whole number, such as 2."),
        ("image", "no-such-image", "'no-such-image' is not an image offered here: choose one of the list."),
    ],
)
def test_each_session_field_refusal_says_what_to_give(client, world, field, typed, sentence):  # noqa: F811
    """Not Django's generic "This field is required.", "Enter a whole number." or "Select a valid choice"."""
    alice, _ = world
    client.force_login(alice)
    resp = client.post("/sessions/", {**GOOD, field: typed})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["form"].errors[field] == [sentence]
    assert not Session.objects.exists()
