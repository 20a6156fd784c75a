"""The one refusal type: what a service raises when it will not do what was asked, and why.

A :class:`Refused` carries one or more :class:`Problem` s, each a field, a sentence saying what is
wrong and what is allowed, and (for a profile file) the line. Site policy, job submission, profiles,
sessions, teams, tokens and account links all raise it. Each kind of page shows it in one place:
a Django form with :func:`refusal_to_form`, the REST API with the handler in :mod:`api.base`.

A service names fields in its own words (the policy speaks :class:`jobs.submit.policy.JobRequest`'s);
an input surface that calls them differently re-keys the problems once with :meth:`Refused.renamed`
and the surface's column of :mod:`jobs.submit.fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django import forms


@dataclass(frozen=True)
class Problem:
    """One reason for a refusal: ``field`` the name of the field it concerns (a dotted path such as
    ``resources.gpus_per_node`` in a profile; ``""`` for the request as a whole), ``message`` a
    sentence saying what is wrong and what is allowed, ``line`` 1-based in a profile file (``None``
    when the value did not come from a file)."""

    field: str
    message: str
    line: int | None = None

    def as_dict(self) -> dict:
        """``{"field", "message", "line"}``: one entry of the API's ``errors``."""
        return {"field": self.field, "message": self.message, "line": self.line}


class Refused(Exception):
    """A request is refused; ``problems`` lists every reason (at least one). ``detail`` is an
    optional headline for the whole refusal (the API's ``detail``; default: the messages).
    ``str()`` is the messages joined by "; "."""

    def __init__(self, *problems: Problem, detail: str = ""):
        if not problems:
            raise ValueError("A refusal needs at least one problem.")
        self.problems = list(problems)
        self.detail = detail
        super().__init__("; ".join(p.message for p in self.problems))

    def renamed(self, names: Mapping[str, str]) -> Refused:
        """The same refusal with each problem's field re-keyed through ``names`` (the service's name
        -> the surface's; ``""`` for a name the surface has no field for). Names not in ``names``
        are kept."""
        return Refused(*(Problem(names.get(p.field, p.field), p.message, p.line) for p in self.problems), detail=self.detail)


def limit_sentence(kind: str, ctx: Mapping) -> str:
    """A declared limit of a field that a value broke, in the portal's words: ``kind`` and ``ctx`` are
    a pydantic error's ``type`` and ``ctx`` (``greater_than_equal`` with ``{"ge": 1}`` -> "Must be
    at least 1."), for the profile schema and the API's request bodies alike (pydantic's own
    "Input should be greater than or equal to 1" names neither the rule nor the fix). ``""`` for
    an error of another kind."""
    if kind == "greater_than_equal":
        return f"Must be at least {ctx.get('ge')}."
    if kind == "less_than_equal":
        return f"Must be at most {ctx.get('le')}."
    if kind == "greater_than":
        return f"Must be more than {ctx.get('gt')}."
    if kind == "less_than":
        return f"Must be less than {ctx.get('lt')}."
    if kind == "string_too_short":
        return (
            "Must not be empty." if ctx.get("min_length") == 1 else f"Must be at least {ctx.get('min_length')} characters long."
        )
    if kind == "string_too_long":
        return f"Must be at most {ctx.get('max_length')} characters long; shorten it."
    if kind == "too_long":
        return f"At most {ctx.get('max_length')} items are allowed here (this list has {ctx.get('actual_length')})."
    return ""


def refusal_to_form(form: forms.BaseForm, refused: Refused) -> None:
    """Show every problem of ``refused`` on the bound ``form``: on the field of that name when the
    form has one, otherwise among the form's non-field errors."""
    for problem in refused.problems:
        form.add_error(problem.field if problem.field in form.fields else None, problem.message)
