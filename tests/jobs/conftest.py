"""Fixtures of the batch-job tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def portal_rows_only(monkeypatch):
    """The poller's sync without the rows of jobs submitted outside the portal (``jobs.worker.outside``),
    for tests about the portal's own rows over a recorded queue that also holds other jobs of the
    same user (22.05's ``squeue_arrays.json``: alice's jobs 15-26, only 18 carrying a portal key),
    and without the poller's import of such jobs from accounting (``jobs.worker.outside_import``)."""
    from jobs.worker.outside import OutsideResult

    monkeypatch.setattr("jobs.worker.sync.outside_sync", lambda entries, **kw: OutsideResult())
    monkeypatch.setattr("jobs.worker.services.outside_import", lambda gateway, **kw: None)
