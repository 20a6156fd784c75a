"""Every audited change records the value before it as ``old`` and the value after it as ``new``
(a regression: stopping a session once said ``STOPPED -> STOPPED``, the old value read after the change).

One case per audited action (the table is :data:`tests.audit.action_cases.CASES`): the action runs
through its service, and the newest audit row of that action must hold what the database held
before (read before acting) and after. A guard reads the source for every ``audit(action=...)``
(literals, f-strings and variables, each resolved explicitly) and fails for an action without a
case, so a new audited action without a test fails CI. The audit page shows both sides."""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from django.db.models import Max

from audit.models import AuditEvent
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.audit.action_cases import CASES, CHANGE
from tests.audit.cases_people import token_revoke
from tests.audit.cases_teams import team_limits
from tests.audit.world import ISS, World
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

REPO = Path(__file__).resolve().parents[2]
#: Folders of the repository that hold no portal code.
NOT_SOURCE = {"tests", "node_modules", "var", "test-artifacts", "idp", "static", "docs"}


# --- the guard: every audited action in the source has a case ---------------------------------------
def _sync_action_kinds() -> set[str]:
    """``slurm.sync.<kind>`` for every sacctmgr action class (teams/sync/associations.py audits them as
    ``f"slurm.sync.{action.kind}"``)."""
    from teams.sync.actions import Action

    classes, todo = set(), [Action]
    while todo:
        for sub in todo.pop().__subclasses__():
            classes.add(sub)
            todo.append(sub)
    return {f"slurm.sync.{cls.kind}" for cls in classes if "kind" in vars(cls)}


#: Each f-string an ``audit(action=...)`` is written with (as ``ast.unparse`` writes it) -> the
#: actions it can produce. A new f-string must be added here with its actions.
FSTRINGS = {"f'slurm.sync.{action.kind}'": _sync_action_kinds}


@functools.cache
def source_files() -> dict[str, str]:
    """Path (relative to the repository) -> text of every Python file of the portal. Folders of
    NOT_SOURCE and hidden ones (``.venv``: tens of thousands of files) are never entered; read once
    per test process."""
    files = {}
    for top, dirs, names in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in NOT_SOURCE)
        for name in sorted(names):
            if name.endswith(".py"):
                path = Path(top) / name
                files[str(path.relative_to(REPO))] = path.read_text()
    return dict(sorted(files.items()))


#: The functions that write audit rows: one row (``audit``), or one per change in one INSERT
#: (``audit_many``, the poller's bulk updates of outside jobs).
AUDIT_FUNCTIONS = {"audit", "audit_many"}


def _is_audit_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in AUDIT_FUNCTIONS)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in AUDIT_FUNCTIONS)
    )


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _callers_pass(trees: dict[str, ast.Module], function: str, keyword: str) -> set[str]:
    """The string literals every call of ``function`` (by name) passes as ``keyword=``."""
    found = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name == function:
                found |= {s for k in node.keywords if k.arg == keyword for s in _strings(k.value)}
    return found


def scan(files: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """(action -> the places writing it, problems) for ``files`` (path -> Python text). An action
    given as a variable is resolved from the assignments to it in its function, or, for a parameter,
    from what the function's callers pass; an f-string from :data:`FSTRINGS`. Anything else, and
    an audit row written without :func:`audit.services.audit`, is a problem."""
    trees = {path: ast.parse(text, path) for path, text in files.items()}
    actions: dict[str, list[str]] = {}
    problems: list[str] = []
    for path, tree in trees.items():
        functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "create"
                and ast.unparse(node.func.value) == "AuditEvent.objects"
                and path != "audit/services.py"
            ):
                problems.append(f"{path}:{node.lineno}: writes an audit row without audit.services.audit")
            if not _is_audit_call(node):
                continue
            where = f"{path}:{node.lineno}"
            value = next((k.value for k in node.keywords if k.arg == "action"), None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names = {value.value}
            elif isinstance(value, ast.JoinedStr) and ast.unparse(value) in FSTRINGS:
                names = FSTRINGS[ast.unparse(value)]()
            elif isinstance(value, ast.Name):
                function = min(
                    (f for f in functions if f.lineno <= node.lineno <= f.end_lineno), key=lambda f: f.end_lineno - f.lineno
                )
                assigned = [
                    n.value
                    for n in ast.walk(function)
                    if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
                ]
                params = {a.arg for a in function.args.args + function.args.kwonlyargs}
                names = set().union(*map(_strings, assigned)) if assigned else set()
                if not assigned and value.id in params:
                    names = _callers_pass(trees, function.name, value.id)
            else:
                names = set()
            if not names:
                shown = ast.unparse(value) if value is not None else "(none)"
                problems.append(f"{where}: action={shown} cannot be resolved: add it to FSTRINGS or write it as a literal")
            for name in names:
                actions.setdefault(name, []).append(where)
    return actions, problems


def test_every_audited_action_in_the_source_has_a_case():
    actions, problems = scan(source_files())
    assert len(actions) > 30  # the scan found the portal's audit calls
    covered = {case.action for case in CASES}
    missing = {a: places for a, places in actions.items() if a not in covered}
    assert (missing, problems) == ({}, []), "each audited action needs a case in tests/audit/action_cases.py CASES"


def test_every_case_is_an_action_the_source_writes():
    actions, _ = scan(source_files())
    assert sorted({case.action for case in CASES} - set(actions)) == []


def test_the_guard_resolves_literals_fstrings_and_variables_and_refuses_the_rest():
    files = {
        "a.py": 'audit(actor=None, action="a.literal")\n',
        "b.py": "def f(change):\n    action = 'b.added' if change else 'b.changed'\n    audit(action=action)\n",
        "c.py": "def _send(job, *, action):\n    audit(action=action)\n\n_send(1, action='c.one')\nx._send(2, action='c.two')\n",
        "d.py": "audit(action=f'slurm.sync.{action.kind}')\n",
        "e.py": "audit(action=f'e.{what}')\naudit(action=names[0])\naudit(actor=None)\n",
        "f.py": "AuditEvent.objects.create(action='f.direct')\n",
        "g.py": "audit_many(actor=None, action='g.bulk', changes=[])\n",
    }
    actions, problems = scan(files)
    assert {a: p for a, p in actions.items() if not a.startswith("slurm.sync.")} == {
        "a.literal": ["a.py:1"],
        "b.added": ["b.py:3"],
        "b.changed": ["b.py:3"],
        "c.one": ["c.py:2"],
        "c.two": ["c.py:2"],
        "g.bulk": ["g.py:1"],
    }
    assert {a for a in actions if a.startswith("slurm.sync.")} >= {"slurm.sync.add_account", "slurm.sync.delete_user"}
    assert [p.split(":")[0:2] for p in problems] == [["e.py", "1"], ["e.py", "2"], ["e.py", "3"], ["f.py", "1"]]


# --- one case per action ---------------------------------------------------------------------------
@pytest.fixture
def world(django_user_model, slurm_json, clean_cache, settings, monkeypatch, client) -> World:
    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    fake = FakeTransport()  # the process-wide gateway: a case scripts what Slurm answers
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    users = django_user_model.objects
    alice = users.create(username="alice", slurm_accounts=["vision"], oidc_issuer=ISS, oidc_sub="s-alice")
    dana = users.create(username="dana", is_staff=True, is_superuser=True, oidc_issuer=ISS, oidc_sub="s-dana")
    client.force_login(dana)
    return World(alice, dana, fake, client, monkeypatch, settings, slurm_json)


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_audit_row_holds_the_value_before_and_the_value_after(world, case):
    last = AuditEvent.objects.aggregate(last=Max("id"))["last"] or 0
    old, new = case.run(world)
    rows = AuditEvent.objects.filter(action=case.action, id__gt=last)
    assert rows.exists(), f"{case.action} wrote no audit row"
    row = rows.latest("id")
    if case.before == CHANGE:
        assert old != new, "the case changes nothing"
    else:  # said in the table: nothing existed before, or an event has no before-value
        assert all(v is None for v in old.values()), f"{case.before}: old must be empty"
    assert row.old == old, f"old {row.old} is not what the database held before: {old}"
    assert row.new == new, f"new {row.new} is not what the database holds after: {new}"


# --- the audit page shows both sides ---------------------------------------------------------------
def _cells(row: dict) -> list[str]:
    return sorted(f"{k}: {'none' if v is None else v}" for k, v in row.items())


@pytest.mark.django_db
def test_the_audit_page_shows_old_and_new(world):
    team_limits(world)
    token_revoke(world)
    page = BeautifulSoup(world.admin.get("/audit/").content.decode(), "html.parser")
    shown = {}
    for tr in page.select('[data-testid="audit-table"] tbody tr'):
        cells = tr.find_all("td")
        shown[cells[2].get_text()] = (
            [d.get_text() for d in cells[4].find_all("div")],
            [d.get_text() for d in cells[5].find_all("div")],
        )
    for action in ("team.limits", "token.revoke"):
        row = AuditEvent.objects.get(action=action)
        assert (sorted(shown[action][0]), sorted(shown[action][1])) == (_cells(row.old), _cells(row.new))
    old, new = shown["team.limits"]
    assert (sorted(old), sorted(new)) == (["gpu_limit: 4", "gpu_minutes_quota: 600"], ["gpu_limit: 8", "gpu_minutes_quota: 1200"])
    assert "revoked_at: none" in shown["token.revoke"][0]  # None is written "none"
