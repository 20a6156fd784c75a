"""Stopping a session whose server is the hub's default one (started from the hub's own home page,
``server_name`` ""): the hub refuses ``DELETE /users/{name}/servers/`` with ``remove`` ("Cannot delete
the default server"), so the portal asks ``DELETE /users/{name}/server``."""

from __future__ import annotations

from interactive import hub


def test_the_default_server_is_stopped_without_remove(monkeypatch, settings):
    settings.PORTAL_HUB_TOKEN = "t"
    sent = []
    monkeypatch.setattr(hub, "_call", lambda method, path, **kw: sent.append((method, path, kw.get("body"))))
    hub.stop_server("bob", "")
    hub.stop_server("bob", "lab-1")
    assert sent == [
        ("DELETE", f"{hub.user_path('bob')}/server", None),
        ("DELETE", f"{hub.user_path('bob')}/servers/lab-1", {"remove": True}),
    ]


def test_a_default_server_the_hub_no_longer_has_counts_as_stopped(monkeypatch, settings):
    settings.PORTAL_HUB_TOKEN = "t"

    def gone(method, path, **kw):
        raise hub.HubRefused(404, "no such server")

    monkeypatch.setattr(hub, "_call", gone)
    hub.stop_server("bob", "")  # no error
