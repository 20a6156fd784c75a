"""What every case of :mod:`tests.audit.test_every_action` starts from and returns (the table is
:data:`tests.audit.action_cases.CASES`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import models
from django.test import Client

from tests.fakes import FakeTransport

#: ``old`` is the value the database held before the change.
CHANGE = "the value before the change"
#: Nothing existed before: ``old`` is ``{}`` or names the thing as absent (``None`` values).
CREATED = "a creation: nothing before"
#: An event that changes no stored value (a sign-in, a refusal): ``old`` is ``{}``.
EVENT = "an event: no value before"

ISS = "https://idp.example.org"


@dataclass
class World:
    """What every case starts from: ``alice`` (linked, Slurm account vision), ``dana`` (a linked
    portal admin), the recorded cluster's snapshot stored, ``slurm`` the process-wide gateway's
    scripted transport (any unscripted call fails), ``admin`` a client signed in as dana."""

    alice: models.Model
    dana: models.Model
    slurm: FakeTransport
    admin: Client
    monkeypatch: object
    settings: object
    slurm_json: Callable[[str, str], dict]


@dataclass(frozen=True)
class Case:
    """``action``: the audit action; ``run(world) -> (old, new)``; ``before``: :data:`CHANGE`,
    :data:`CREATED` or :data:`EVENT`; ``name``: the case's id when an action has several."""

    action: str
    run: Callable[[World], tuple[dict, dict]]
    before: str = CHANGE
    name: str = ""

    @property
    def id(self) -> str:
        return f"{self.action}[{self.name}]" if self.name else self.action


def read(obj: models.Model, *fields: str) -> dict:
    """``fields`` of ``obj``'s row as the database holds it now (times as ISO 8601 text, as audit rows
    hold them); ``{}`` when the row is gone."""
    row = type(obj)._default_manager.filter(pk=obj.pk).values(*fields).first()
    return {} if row is None else {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
