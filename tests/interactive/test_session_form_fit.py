"""The session form's defaults can be started as they stand: its hours fit the partition it shows
(the recorded clusters: cluster2's small allows 1 h), on first load and after the cluster or the
partition changes (each reloads the form); and the site policy above it speaks of the chosen
cluster's sessions."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from interactive.models import Session

from .test_session_clusters import page, world  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def form_values(html: BeautifulSoup) -> dict:
    """What a browser would send of the form as shown."""
    values = {i["name"]: i.get("value", "") for i in html.select("form.job-form input") if i.get("type") not in ("radio",)}
    values |= {i["name"]: i["value"] for i in html.select("form.job-form input[type=radio][checked]")}
    for select in html.select("form.job-form select"):
        chosen = select.select_one("option[selected]") or select.select_one("option")
        values[select["name"]] = chosen["value"] if chosen else ""
    return values


def test_the_defaults_on_cluster2_fit_its_small_partition_and_start(client, world):  # noqa: F811
    client.force_login(world["alice"])
    html = page(client, cluster="cluster2")
    assert html.select_one("#id_partition option")["value"] == "small"
    assert html.select_one("#id_hours")["value"] == "1"
    assert "At most 1 hour in small." in html.get_text()
    resp = client.post("/sessions/", form_values(html))
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[-2000:]
    assert Session.objects.get().time_limit_min == 60


def test_the_defaults_on_cluster1_keep_two_hours(client, world):  # noqa: F811
    client.force_login(world["alice"])
    assert page(client).select_one("#id_hours")["value"] == "2"


def test_choosing_cluster2_or_its_small_partition_brings_the_hours_down(client, world):  # noqa: F811
    client.force_login(world["alice"])
    reload = {"cpus": "2", "memory_gb": "4", "hours": "2", "form_reload": "cluster"}
    resp = client.post("/sessions/", {**reload, "cluster": "cluster2", "partition": "interactive"})
    html = BeautifulSoup(resp.content.decode(), "html.parser")
    assert html.select_one("#id_hours")["value"] == "1"
    resp = client.post("/sessions/", {**reload, "cluster": "cluster1", "partition": "small"})
    html = BeautifulSoup(resp.content.decode(), "html.parser")
    assert html.select_one("#id_hours")["value"] == "1"
    select = html.select_one("#id_partition")
    assert (select["hx-post"], json.loads(select["hx-vals"])) == ("/sessions/", {"form_reload": "cluster"})
    assert Session.objects.count() == 0 and world["sent"] == []


def test_the_maintenance_check_after_a_change_of_cluster_uses_the_partition_shown(world):  # noqa: F811
    """A reload carries the old cluster's partition (interactive) to cluster2, which offers small: the
    form shows small, and the maintenance check before a start asks about small, not interactive."""
    from interactive.forms import SessionForm
    from interactive.services import current_policy
    from interactive.views import _shown

    form = SessionForm(
        None,
        initial={"cluster": "cluster2", "partition": "interactive", "hours": 2},
        policy=current_policy("cluster2"),
        accounts=["vision"],
        clusters=[("cluster1", "cluster1"), ("cluster2", "cluster2")],
    )
    assert _shown(form) == {"partition": "small", "hours": 1}


def _form_with(policy, **limits_min):
    """The session form on ``policy`` with the named partitions' longest time (minutes) changed."""
    from dataclasses import replace

    from interactive.forms import SessionForm

    partitions = {name: replace(p, max_time_min=limits_min.get(name, p.max_time_min)) for name, p in policy.partitions.items()}
    return SessionForm(None, policy=replace(policy, partitions=partitions), accounts=["vision"])


def test_a_partition_that_allows_less_than_an_hour_is_not_offered(world):  # noqa: F811
    """A session lasts whole hours: a partition whose MaxTime is 30 min can hold none, so the form
    offers the others instead of showing "At most 1 hour" and then refusing that hour."""
    from interactive.services import current_policy

    form = _form_with(current_policy("cluster1"), interactive=30)
    assert [value for value, _ in form.fields["partition"].widget.choices] == ["small"]
    assert "interactive" not in str(form["partition"])


def test_when_every_partition_allows_less_than_an_hour_the_hours_say_why_nothing_fits(world, settings):  # noqa: F811
    from interactive.services import current_policy

    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    form = _form_with(current_policy("cluster1"), interactive=30)
    assert [value for value, _ in form.fields["partition"].widget.choices] == ["interactive"]
    help_text = form.fields["hours"].help_text
    assert help_text.startswith("interactive allows at most 30 min and a session lasts whole hours: no session fits there.")
    assert "At most 1 hour" not in help_text
