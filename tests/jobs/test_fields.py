"""jobs.submit.fields: the one vocabulary of a request's fields. Every name in a surface's column is a field
that surface has, so a refusal re-keyed for it lands on a real field (or on the request as a whole)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from api.sessions import SessionIn
from interactive.forms import SessionForm
from interactive.options import ALLOWED_KEYS
from jobs.submit.fields import JOB_FORM, NAMES, PROFILE, SESSION_API, SESSION_FORM
from jobs.submit.policy import JobRequest
from jobs.web.forms import JobForm
from profiles.schema import Profile


def profile_paths(model: type[BaseModel] = Profile, prefix: str = "") -> set[str]:
    """Every dotted path of the profile schema (``resources.gpus_per_node``, ``resources``...)."""
    paths = set()
    for name, info in model.model_fields.items():
        paths.add(prefix + name)
        inner = [
            a
            for a in (info.annotation, *getattr(info.annotation, "__args__", ()))
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        for sub in inner:
            paths |= profile_paths(sub, f"{prefix}{name}.")
    return paths


def test_every_field_site_policy_names_has_a_row():
    assert {f.name for f in dataclasses.fields(JobRequest)} <= set(NAMES)


@pytest.mark.parametrize(
    "column, fields",
    [
        (JOB_FORM, set(JobForm.base_fields)),
        (SESSION_FORM, set(SessionForm.base_fields)),
        (SESSION_API, set(SessionIn.model_fields)),
        (PROFILE, profile_paths()),
    ],
    ids=["job form", "session form", "session API", "profile"],
)
def test_each_surface_column_names_fields_the_surface_has(column, fields):
    assert set(column) == set(NAMES)
    assert {name for name in column.values() if name} <= fields, {name for name in column.values() if name} - fields


def test_session_options_the_policy_does_not_name_are_named_alike_on_both_session_surfaces():
    own = set(ALLOWED_KEYS) - set(NAMES)
    assert own == {"ide", "hours"}
    assert own <= set(SessionForm.base_fields) and own <= set(SessionIn.model_fields)
