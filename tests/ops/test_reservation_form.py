"""The cluster page's maintenance-reservation form through a scripted gateway on the recorded 22.05
cluster: unnamed windows that start the same minute get distinct names (the snapshot's and the
portal's own, not yet read back), a name Slurm already has is refused with "choose another name", an
end and a duration both given are refused before Slurm with what was typed kept, the success message
writes times as the portal does, and Delete asks first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from ops.cluster_forms import END_AND_DURATION
from slurm.snapshot import snapshot_store

pytestmark = pytest.mark.django_db

URL = "/ops/cluster/cluster1/reservations/"


@pytest.fixture
def dana(django_user_model, clean_cache):
    """The admin dana."""
    return django_user_model.objects.create(username="dana", is_staff=True)


def _window(start_min: int, end_min: int) -> tuple[datetime, datetime, dict]:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = now + timedelta(minutes=start_min), now + timedelta(minutes=end_min)
    return start, end, {"start": start.strftime("%Y-%m-%dT%H:%M"), "end": end.strftime("%Y-%m-%dT%H:%M")}


def _create_argv(name: str, start: datetime, end: datetime, nodes: str) -> list[str]:
    return ["env", "TZ=UTC", "scontrol", "create", "reservation", f"ReservationName={name}",
            f"StartTime={start:%Y-%m-%dT%H:%M:%S}", f"EndTime={end:%Y-%m-%dT%H:%M:%S}",
            f"Nodes={nodes}", "Users=root", "Flags=MAINT"]  # fmt: skip


def _soup(response):
    return BeautifulSoup(response.content, "html.parser")


def test_unnamed_windows_starting_the_same_minute_get_distinct_names(client, dana, snapshot, slurm):
    """The second is made before the next poll reads the first back: the portal's audit row names it."""
    start, end, times = _window(30, 90)
    slurm.expect(_create_argv(f"maint_{start:%Y%m%d_%H%M}", start, end, "node3"))
    slurm.expect(_create_argv(f"maint_{start:%Y%m%d_%H%M}_2", start, end, "node2,node3"))
    client.force_login(dana)
    assert client.post(URL, {"nodes": "node3", **times}).status_code == HTTPStatus.FOUND
    assert client.post(URL, {"nodes": "node[2-3]", **times}).status_code == HTTPStatus.FOUND
    assert not slurm.script


def test_an_unnamed_window_skips_a_name_the_snapshot_has(client, dana, snapshot, slurm):
    """A reservation made outside the portal (read by the poll) already has the name maint_<start>."""
    start, end, times = _window(30, 90)
    taken = replace(snapshot.reservations[0], name=f"maint_{start:%Y%m%d_%H%M}")
    snapshot_store(replace(snapshot, reservations=[taken, *snapshot.reservations[1:]]))
    slurm.expect(_create_argv(f"maint_{start:%Y%m%d_%H%M}_2", start, end, "node3"))
    client.force_login(dana)
    assert client.post(URL, {"nodes": "node3", **times}).status_code == HTTPStatus.FOUND
    assert not slurm.script


def test_a_name_made_before_the_last_poll_frees_once_gone(client, dana, snapshot, slurm):
    """A reservation the portal made (and its audit row) before the snapshot was taken, gone from the
    snapshot since (deleted), no longer takes its name."""
    start, end, times = _window(30, 90)
    name = f"maint_{start:%Y%m%d_%H%M}"
    row = AuditEvent.objects.create(action="reservation.create", target=f"reservation:cluster1/{name}", new={}, old={})
    AuditEvent.objects.filter(pk=row.pk).update(at=datetime.fromtimestamp(snapshot.taken_at - 60, UTC))
    slurm.expect(_create_argv(name, start, end, "node3"))
    client.force_login(dana)
    assert client.post(URL, {"nodes": "node3", **times}).status_code == HTTPStatus.FOUND
    assert not slurm.script


def test_a_picked_name_slurm_already_has_says_submit_again(client, dana, snapshot, slurm):
    """One made outside the portal since the last poll: the portal's own pick collides."""
    start, end, times = _window(30, 90)
    name = f"maint_{start:%Y%m%d_%H%M}"
    slurm.expect(
        _create_argv(name, start, end, "node3"),
        stderr="Error creating the reservation: Duplicate reservation name\n",
        returncode=1,
    )
    client.force_login(dana)
    response = client.post(URL, {"nodes": "node3", **times})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert (
        _soup(response)
        .select_one("[data-testid=error-name]")
        .text.endswith(f"already has a reservation named {name}: submit again, and the portal picks the next free name.")
    )


def test_a_name_slurm_already_has_is_refused_with_choose_another(client, dana, snapshot, slurm):
    start, end, times = _window(30, 90)
    slurm.expect(
        _create_argv("night", start, end, "node3"),
        stderr="Error creating the reservation: Duplicate reservation name\n",
        returncode=1,
    )
    client.force_login(dana)
    response = client.post(URL, {"nodes": "node3", "name": "night", **times})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    error = _soup(response).select_one("[data-testid=error-name]")
    assert error is not None and error.text == (
        "Slurm refused: Error creating the reservation: Duplicate reservation name. "
        "cluster1 (Slurm 22.05: A100, T4) already has a reservation named night: choose another name."
    )


def test_an_end_and_a_duration_are_refused_before_slurm_and_kept(client, dana, snapshot, slurm):
    *_, times = _window(30, 90)
    client.force_login(dana)
    response = client.post(URL, {"nodes": "node3", "name": "night", "duration": "45", **times})
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    page = _soup(response)
    assert page.select_one("[data-testid=error-duration]").text == END_AND_DURATION
    assert END_AND_DURATION == "You gave both an end and a duration: give one of them and leave the other empty."
    kept = {n: page.select_one(f"[data-testid=reservation-form] [name={n}]")["value"] for n in ("nodes", "name", "duration")}
    assert kept == {"nodes": "node3", "name": "night", "duration": "45"}
    assert {page.select_one(f"#id_{n}")["value"] for n in ("start", "end")} == {times["start"], times["end"]}
    # an end that is not a time, with a duration: both refusals at once, not one after the other
    response = client.post(URL, {"nodes": "node3", "duration": "45", **times, "end": "tomorrow"})
    page = _soup(response)
    assert page.select_one("[data-testid=error-duration]").text == END_AND_DURATION
    assert page.select_one("[data-testid=error-end]") is not None and slurm.calls == []


def test_the_success_message_writes_times_as_the_portal_does(client, dana, snapshot, slurm):
    start, end, times = _window(30, 90)
    slurm.expect(_create_argv("night", start, end, "node3"), stdout="Reservation created: night\n")
    client.force_login(dana)
    response = client.post(URL, {"nodes": "node3", "name": "night", **times}, follow=True)
    message = _soup(response).select_one("ul.messages li").text
    assert message == (
        f"Maintenance reservation night made on node3 from {start:%Y-%m-%d %H:%M} UTC to {end:%Y-%m-%d %H:%M} UTC; "
        "it shows below after the next poll."
    )


def test_deleting_a_reservation_asks_first(client, dana, snapshot, slurm):
    client.force_login(dana)
    page = _soup(client.get("/ops/cluster/cluster1/"))
    form = page.select_one("[data-testid=delete-fx_team]").find_parent("form")
    assert form["onsubmit"] == (
        "return confirm('Delete reservation fx_team? Slurm may then start jobs on its nodes during its window.')"
    )
    assert slurm.calls == []
