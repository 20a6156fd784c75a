"""The cluster page's forms say only what is wrong, in the portal's words: a duration without a start
asks for the start alone; a node list too large to write out says how many nodes it names and how
many the cluster has; Drain without a node asks for one; a reservation name over the service's limit
and a duration that is not whole minutes are refused as such. Nothing reaches Slurm, and what was
typed is kept."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone as djtz

from audit.models import AuditEvent
from ops.reservations import reservation_create
from portal.refusals import Refused

pytestmark = pytest.mark.django_db

RESERVE = "/ops/cluster/cluster1/reservations/"
LABEL = "cluster1 (Slurm 22.05: A100, T4)"


def _errors(response) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for e in BeautifulSoup(response.content, "html.parser").select("p.error[data-testid^=error-]"):
        errors.setdefault(e["data-testid"].removeprefix("error-"), []).append(e.get_text(strip=True))
    return errors


def _kept(response, names) -> dict[str, str]:
    page = BeautifulSoup(response.content, "html.parser")
    return {n: page.select_one(f"[data-testid=reservation-form] [name={n}]").get("value", "") for n in names}


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ({"nodes": "node3", "duration": "60"}, {"start": ["Give the start of the window (date and time, UTC)."]}),
        (
            {"nodes": "node[1-99999999]", "start": "2026-12-05 10:00", "duration": "60"},
            {
                "nodes": [
                    f"'node[1-99999999]' names more than 100,000 nodes; {LABEL} has 3. "
                    "Name the ones to reserve, e.g. node[1-3], or write ALL."
                ]
            },
        ),
        (
            {"nodes": "node3", "start": "2026-12-05 10:00", "duration": "60", "name": "n" * 5000},
            {"name": ["The name is 5000 characters long: keep it to 64."]},
        ),
        (
            {"nodes": "node3", "start": "2026-12-05 10:00", "duration": "1.5"},
            {"duration": ["Give the duration in whole minutes (90 for 1 h 30 min)."]},
        ),
    ],
    ids=["duration without a start", "node list too large", "name of 5000 characters", "duration of 1.5"],
)
def test_a_reservation_form_says_only_what_is_wrong(client, dana, snapshot, slurm, form, expected):
    response = client.post(RESERVE, form)
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    assert _errors(response) == expected
    assert _kept(response, [n for n in form if n != "start"]) == {n: v for n, v in form.items() if n != "start"}
    assert not AuditEvent.objects.filter(action="reservation.create").exists()


def test_the_service_counts_a_duration_and_refuses_a_long_name_in_the_same_words(dana, snapshot, slurm):
    with pytest.raises(Refused) as refused:
        reservation_create(cluster="cluster1", start=None, nodes="node3", duration=60, by=dana)
    assert [(p.field, p.message) for p in refused.value.problems] == [
        ("start", "Give the start of the window (date and time, UTC).")
    ]
    with pytest.raises(Refused) as refused:
        reservation_create(cluster="cluster1", start=djtz.now(), nodes="node3", duration=60, name="n" * 65, by=dana)
    assert [p.message for p in refused.value.problems] == ["The name is 65 characters long: keep it to 64."]
    assert slurm.calls == []


def test_drain_without_a_node_asks_for_one(client, dana, snapshot, slurm):
    response = client.post("/ops/cluster/cluster1/drain/", {"node": "", "reason": "disk swap"})
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    assert _errors(response) == {"node": ["Choose a node to drain."]}
    assert not AuditEvent.objects.filter(action="node.drain").exists()
