"""images.availability.image_probe with a scripted transport: readable, there but unreadable, not
there, and a cluster that does not answer (the last answer stays); the argv is a list, never a
shell string, whatever the path holds."""

from __future__ import annotations

import pytest

from images import availability
from images.availability import NOT_CHECKED, image_probe, image_state
from slurm import SlurmGateway, SlurmUnreachable
from tests.fakes import FakeTransport

PATH = "/srv/gpuportal/images/x $(id);`id`"


@pytest.fixture
def fake(monkeypatch):
    transport = FakeTransport()
    monkeypatch.setattr("slurm.gateway.get_gateway", lambda *_a, **_k: SlurmGateway(transport))
    return transport


@pytest.fixture
def image(make_image):
    return make_image(available=None, path=PATH)


def test_readable(fake, image):
    fake.expect(["test", "-r", PATH])
    state = image_probe(image, "cluster1")
    assert (state.available, state.reason, state.checked) == (True, "", True)
    assert image_state(image, "cluster1") == state


def test_there_but_unreadable(fake, image):
    fake.expect(["test", "-r", PATH], returncode=1).expect(["test", "-e", PATH])
    state = image_probe(image, "cluster1")
    assert (state.available, state.reason) == (
        False,
        "it is there but the portal's service user cannot read it (a private directory?)",
    )


def test_not_there(fake, image):
    fake.expect(["test", "-r", PATH], returncode=1).expect(["test", "-e", PATH], returncode=1)
    assert (
        image_probe(image, "cluster1").reason
        == "it is not there, or it lies in a directory the portal's service user cannot read"
    )


def test_an_unreachable_cluster_keeps_the_last_answer(fake, image):
    fake.expect(["test", "-r", PATH])
    first = image_probe(image, "cluster1")
    fake.expect(["test", "-r", PATH], raises=SlurmUnreachable(["test"], -1, "", "", message="connection refused"))
    assert image_probe(image, "cluster1") == first


def test_never_checked_is_not_available(image):
    state = image_state(image, "cluster2")
    assert (state.available, state.reason, state.checked_at) == (False, NOT_CHECKED, None)


def test_states_expire_after_ten_intervals(fake, image, settings, monkeypatch):
    settings.PORTAL_IMAGE_CHECK_INTERVAL = 30
    seen = {}
    monkeypatch.setattr(availability.cache, "set", lambda key, value, ttl: seen.update(ttl=ttl))
    fake.expect(["test", "-r", PATH])
    image_probe(image, "cluster1")
    assert seen["ttl"] == 300
