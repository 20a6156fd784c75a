"""The Celery app's own settings (portal/celery.py)."""


def test_worker_keeps_database_connections_as_requests_do_and_leaves_eager_tasks_alone(monkeypatch):
    """portal.celery closes only unusable or old connections around a task (CELERY_DB_REUSE_MAX keeps
    Celery's own fixup from closing them every time), and does nothing for an eager task, which runs
    inside the caller's transaction."""
    from types import SimpleNamespace

    import django.db

    from portal import celery as portal_celery

    calls = []
    monkeypatch.setattr(django.db, "close_old_connections", lambda: calls.append(1))
    portal_celery._database_connections_as_for_a_request(task=SimpleNamespace(request=SimpleNamespace(is_eager=True)))
    assert calls == []
    portal_celery._database_connections_as_for_a_request(task=SimpleNamespace(request=SimpleNamespace(is_eager=False)))
    assert calls == [1]
    assert portal_celery.app.conf.get("CELERY_DB_REUSE_MAX") == 1000
