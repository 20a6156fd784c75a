"""Shared fixtures. Integration fixtures talk to the real local cluster (``make cluster``), the real
Redis and PostgreSQL, and a real OIDC provider (``idp/``) started per test session."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

#: A skipped test fails under make test (tests/no_skip.py).
pytest_plugins = ["tests.no_skip"]

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_this_process() -> str:
    """The ``DATABASE_URL`` of this process's test database (pytest-django's ``test_portal``,
    ``test_portal_gw0``, ...), for a portal process a test starts (a Celery worker, gunicorn): without
    it such a process reads and writes the dev database."""
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def pytest_configure(config):
    # The live server needs a known port before the IdP starts: the IdP must list the callback URL.
    # Likewise the test hub's public port (the IdP must list its OAuth callback). A pytest-xdist
    # worker (PYTEST_XDIST_WORKER) inherits the controller's environment and takes ports of its own.
    worker = "PYTEST_XDIST_WORKER" in os.environ
    for name, value in (("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1:{}"), ("TEST_HUB_PORT", "{}")):
        if worker or name not in os.environ:
            os.environ[name] = value.format(free_port())


#: Test modules (a path prefix, or path::test) that change what every other test shares, with why:
#: make test runs them in one process after the others, with only the unit tests beside them (on their
#: own Redis server; marker ``serial``, docs/testing.md). A new test that
#: stops a daemon, drains a node or changes an account, QOS or Slurm's configuration belongs here.
SERIAL = {
    "tests/fault/": "stop slurmctld, slurmdbd, Redis or the poller, and reconfigure Slurm",
    "tests/jobs/test_maintenance_integration.py": "drains nodes and makes a maintenance reservation",
    "tests/e2e/test_drained_node_browser.py": "drains a node",
    "tests/e2e/test_cluster_page_browser.py": "drains and resumes nodes",
    "tests/cluster/test_cluster_page_integration.py": "drains nodes and makes reservations",
    "tests/cluster/test_rate_limit_integration.py": "fills the portal user's RPC rate-limit bucket on cluster2",
    "tests/teams/test_quota_integration.py": "changes bob's default account and team limits",
    "tests/teams/test_quota_promised_integration.py": "makes an account with a GPU-minute quota and uses node3's t4s",
    "tests/teams/test_site_policy_integration.py": "adds QOS to alice",
    "tests/teams/test_slurm_sync_integration.py": "creates and changes accounts and associations",
    "tests/teams/test_usage_integration.py": "reads every account's usage on both clusters",
    "tests/teams/test_report_integration.py": "creates an account on both clusters and requeues a job on cluster1",
    "tests/jobs/test_preemption_integration.py": "creates an account and preempts its scavenger job holding node3's CPUs",
    "tests/jobs/test_borrowing_integration.py": "sets the scavenger QOS's GrpTRESMins, creates two accounts, uses node3's t4s",
    "tests/e2e/test_preemption_browser.py": "preempts alice's scavenger job holding node3's CPUs",
    "tests/accounts/test_linking_integration.py": "adds users' associations",
    "tests/cluster/test_sudo_system_accounts_integration.py": "puts root in the users group for a moment",
    "tests/cluster/test_big_sweep_pages.py": "counts alice's jobs on My jobs, where the poll adds her jobs of other tests",
    "tests/interactive/test_hub_integration.py::test_running_session_survives_the_controller_down_for_a_minute": "stops slurmctld",
}

#: Which lab cluster each SERIAL test changes (a key as in SERIAL: a path prefix, or path::test; the
#: longest that matches decides), so that make test runs the serial tests as two processes side by side,
#: each configured with its one cluster (``scripts/test.sh``, docs/testing.md): ``cluster1`` (the tier
#: ``serial``: the tests that change cluster1, and any that change no cluster), ``cluster2`` (marked
#: ``serial_c2``, beside it), ``both`` (marked ``serial_both``, alone after them: they need both clusters
#: configured), or ``each``: parametrized over the clusters, the test's id (``[cluster1]``,
#: ``[cluster2]``) names the one it changes. A SERIAL test not listed here, or an ``each`` whose id names
#: neither cluster, is ``serial_both``: it runs alone, as every serial test once did, until someone
#: reads it and lists it.
SERIAL_CLUSTERS = {
    "tests/fault/test_accounting_outage.py": "cluster1",
    "tests/fault/test_controller_reset.py": "cluster1",
    "tests/fault/test_fault_injection.py": "cluster1",
    "tests/fault/test_cluster_outage.py": "both",  # stops cluster2's controller, asserts cluster1 stays fresh
    "tests/interactive/test_hub_integration.py::test_running_session_survives_the_controller_down_for_a_minute": "cluster1",
    "tests/e2e/test_preemption_browser.py": "cluster1",
    "tests/e2e/test_drained_node_browser.py": "cluster1",
    "tests/e2e/test_cluster_page_browser.py": "cluster1",
    "tests/jobs/test_borrowing_integration.py": "cluster1",
    "tests/accounts/test_linking_integration.py": "cluster1",  # the host's sacctmgr and id
    "tests/cluster/test_sudo_system_accounts_integration.py": "cluster1",  # the host's users group
    "tests/cluster/test_big_sweep_pages.py": "cluster1",
    "tests/teams/test_site_policy_integration.py": "cluster1",
    "tests/teams/test_site_policy_integration.py::test_the_small_job_pool_admits_a_short_1_gpu_job_and_keeps_big_ones_out": "each",
    "tests/cluster/test_cluster_page_integration.py": "each",
    "tests/jobs/test_maintenance_integration.py": "each",
    "tests/jobs/test_preemption_integration.py": "each",
    "tests/teams/test_quota_integration.py": "each",
    "tests/teams/test_quota_promised_integration.py": "each",
    "tests/teams/test_report_integration.py": "each",
    "tests/cluster/test_rate_limit_integration.py": "cluster2",
    "tests/teams/test_slurm_sync_integration.py": "both",  # each test syncs both clusters and compares them
    "tests/teams/test_usage_integration.py": "both",  # a team's figures summed over both clusters
}


def serial_tier(path: str, test: str, param_id: str = "") -> str:
    """The make test tier of a SERIAL test (``path``, ``path::test`` without parameters, the test's
    parameter id or ""): ``serial`` (cluster1's process), ``serial_c2`` (cluster2's) or ``serial_both``,
    from :data:`SERIAL_CLUSTERS`."""
    keys = [key for key in SERIAL_CLUSTERS if path.startswith(key) or test == key]
    where = SERIAL_CLUSTERS[max(keys, key=len)] if keys else "both"
    if where == "each":
        where = param_id if param_id in ("cluster1", "cluster2") else "both"
    return {"cluster1": "serial", "cluster2": "serial_c2"}.get(where, "serial_both")


#: Tests that stop the poller's worker or restart the Redis server but change neither lab cluster,
#: with why: make test runs them in a process of their own with a Redis server of its own and a
#: clusters file of cluster1 alone (``scripts/test.sh``: the tier ``own_redis``; their Celery stack then
#: polls and syncs cluster1 only), beside the shared tier and the hub's process, instead of in the
#: serial tier after them. Marked ``own_redis``, not ``serial``.
OWN_REDIS = {
    "tests/fault/test_poller_stalls.py": "stops the poller's worker and beat, and restarts Redis",
    "tests/fault/test_stalled_poller_browser.py": "stops the poller's worker",
}


#: Shared-tier test modules checked to need nothing scarce, so make test spreads them over the shared
#: tier's workers: their jobs (if any) go to cluster1's partition train without naming a node (the
#: tests that pin 2 of node2's 4 A100s stay scarce), and they start no teams sync (a sync plans from
#: its own process's database; the production-path test's beat runs one). Every other
#: shared-tier test is in one xdist work unit, ``scarce`` (pytest_xdist_make_scheduler below), which
#: one worker runs test after test: those
#: tests wait within a deadline for node3 (partition small), cluster2's two nodes, or an account's
#: associations, and two workers' jobs there made each other's tests time out (docs/testing.md). A new
#: module is scarce until someone checks it and lists it here.
SPREAD = (
    "tests/slurm/test_ssh_transport.py",
    "tests/images/test_demo_image.py",
    "tests/runtimes/test_charliecloud_cluster.py",
    "tests/profiles/test_env_cache_setup.py",
    "tests/notifications/test_worker_killed.py",
    "tests/interactive/test_session_caps_browser.py",
    "tests/images/test_cli_e2e.py",
    "tests/gpuusage/test_real_prometheus.py",
    "tests/e2e/test_requeue_browser.py",
    "tests/e2e/test_profile_browser.py",
    "tests/e2e/test_notifications_browser.py",
    "tests/e2e/test_image_job_browser.py",
    "tests/e2e/test_adoption_browser.py",
    "tests/e2e/test_job_form_reload_browser.py",  # one job, on partition train
    # the IdP and the live portal only, no Slurm job
    "tests/e2e/test_accessibility_browser.py",
    "tests/accounts/test_idp_faults.py",
    "tests/accounts/test_login_oidc.py",
    "tests/e2e/test_session_expiry_browser.py",
    "tests/e2e/test_browser_login.py",
    "tests/accounts/test_login_audit.py",
    "tests/e2e/test_announcement_browser.py",
)


@pytest.hookimpl(tryfirst=True)  # before pytest's -m reads the marks
def pytest_collection_modifyitems(config, items):
    """Marks the tests of SERIAL ``serial`` (those of OWN_REDIS ``own_redis`` instead), those of them
    that change cluster2 alone also ``serial_c2`` and those that need both clusters ``serial_both``
    (:func:`serial_tier`), and ``hub`` every test that uses the test JupyterHub
    (tests/interactive/conftest.py: ``jupyterhub``): make test runs the hub's tests in one process
    beside the other shared ones, since they count alice's session jobs and single-user servers and
    read the hub's one log (docs/testing.md)."""
    for item in items:
        path = Path(item.fspath).relative_to(REPO).as_posix()
        test = f"{path}::{getattr(item, 'originalname', item.name)}"
        if path in OWN_REDIS:
            item.add_marker(pytest.mark.own_redis)
        elif any(path.startswith(prefix) or test == prefix for prefix in SERIAL):
            item.add_marker(pytest.mark.serial)
            callspec = getattr(item, "callspec", None)
            tier = serial_tier(path, test, callspec.id if callspec else "")
            if tier != "serial":
                item.add_marker(getattr(pytest.mark, tier))
        if "jupyterhub" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.hub)


def _scope(nodeid: str) -> str:
    """The xdist work unit of a test under ``--dist loadgroup`` (make test's shared tier): ``scarce`` for
    one in a module not listed in SPREAD, else the test alone."""
    return nodeid if nodeid.split("::")[0] in SPREAD else "scarce"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, xdist's load-scope scheduling with the work units of :func:`_scope`:
    the ``scarce`` tests are one unit, which one worker runs one after another, the SPREAD tests one
    unit each. Decided here, on the controller, from the test ids: an ``xdist_group`` mark does not
    group anything with pytest 9, whose test ids no longer take the group xdist appends to them."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ScarceTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return ScarceTogether(config, log)


_SCARCE_WORKERS: set[str] = set()


def pytest_runtest_logreport(report):
    """On the xdist controller: notes which workers ran a ``scarce`` test (see pytest_sessionfinish)."""
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)  # "gw0"
    if worker and report.when == "call" and _scope(report.nodeid) == "scarce":
        _SCARCE_WORKERS.add(str(worker))


def pytest_sessionfinish(session, exitstatus):
    """Under ``--dist loadgroup``, a run whose ``scarce`` tests ran on more than one worker fails: their
    jobs would wait for each other's on node3 and cluster2 (the grouping is what makes the tier safe)."""
    if session.config.getvalue("dist") == "loadgroup" and len(_SCARCE_WORKERS) > 1:
        session.config.get_terminal_writer().line(
            f"the scarce tests ran on {len(_SCARCE_WORKERS)} workers ({sorted(_SCARCE_WORKERS)}), not one: "
            "tests/conftest.py's pytest_xdist_make_scheduler was not used",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: Users of the local clusters whose jobs tests submit (cluster/lib.sh: DEMO_USERS, NEWCOMER_USER).
CLUSTER_TEST_USERS = ("alice", "bob", "carol", "dana", "erin")
#: Jobs older than this (seconds since submission) are left over from an earlier run; younger ones may
#: be another test session's on this machine (no test's job lives this long).
LEFTOVER_AGE_S = 20 * 60


def _leftover_job_ids(command: list[str], now: float) -> list[str]:
    """Ids of the test users' jobs that have not ended and were submitted over LEFTOVER_AGE_S ago,
    from ``squeue --json`` (``submit_time``: a number in 22.05, ``{"number": ...}`` from 23.11)."""
    import subprocess

    done = subprocess.run([*command, "squeue", "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        return []

    def number(value) -> int:
        return int((value.get("number") if isinstance(value, dict) else value) or 0)

    ids = set()
    for job in json.loads(done.stdout).get("jobs", []):
        state = job.get("job_state")
        states = set(state if isinstance(state, list) else [state])  # 22.05's --json ignores -t
        active = states & {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"}
        if active and job.get("user_name") in CLUSTER_TEST_USERS and now - number(job.get("submit_time")) > LEFTOVER_AGE_S:
            ids.add(str(number(job.get("array_job_id")) or number(job.get("job_id"))))
    return sorted(ids)


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_jobs(request):
    """Integration and browser tests wait for their jobs to start. Jobs an earlier run left queued or
    running on the local clusters (a fresh-ish CI machine keeps Slurm's saved state) hold the nodes
    those jobs need: CI once saw cluster2's only L40S node taken and a one-GPU job pending for 120 s.
    Once per session that has such tests, the test users' jobs submitted over LEFTOVER_AGE_S ago are
    cancelled on both clusters (never a younger job, which may be another session's). A run through
    ``scripts/test.sh`` under CI=true has already cancelled every queued job, whatever its age."""
    import subprocess
    import time

    if not any(i.get_closest_marker("integration") or i.get_closest_marker("e2e") for i in request.session.items):
        return
    for command in ([], ["chroot", "/srv/cluster2"]):
        if command and not Path("/srv/cluster2/usr/bin/squeue").exists():
            continue
        ids = _leftover_job_ids(command, time.time())
        if ids:
            print(f"cancelling {len(ids)} jobs left by an earlier run on {' '.join(command) or 'cluster1'}: {ids[:10]}")
            subprocess.run([*command, "scancel", *ids], capture_output=True)


#: The moment every unit test runs at (UTC; the clock ticks on from there): half a day after the newest
#: recording in tests/fixtures/ (cluster/record_*.py), so recorded times are as old, compared with
#: "now", as on the day they were recorded, whatever today's date and time of day. Code that keeps
#: a record for two days after its end (accounting's wait) or shows "3 hours ago" reads the same on
#: every run. Move it forward when a new recording is newer (tests/test_clock.py says so).
#: Integration and browser tests run on the real clock: the real Slurm, sshd and IdP use it.
UNIT_CLOCK = "2026-12-04T18:00:00Z"


def _uses_real_clock(item) -> bool:
    return any(item.get_closest_marker(name) for name in ("integration", "e2e", "real_clock"))


@pytest.fixture(autouse=True)
def _unit_clock(request):
    """Unit tests run with the clock moved to UNIT_CLOCK (time-machine: ``time.time``,
    ``datetime.now`` and Django's ``timezone.now``; ``time.monotonic`` is left alone, so deadlines
    still measure real seconds), or to the moment of their ``unit_clock("<ISO moment>")`` marker: a
    test whose subject is one recording's age (a window counted from a recorded end time) runs at a
    moment chosen from that recording, so newer recordings can move UNIT_CLOCK on without it. Tests
    marked ``integration``, ``e2e`` or ``real_clock`` keep the real clock."""
    if _uses_real_clock(request.node):
        yield None
        return
    import time_machine

    marker = request.node.get_closest_marker("unit_clock")  # a test tied to one recording's age
    with time_machine.travel(marker.args[0] if marker else UNIT_CLOCK, tick=True) as traveller:
        yield traveller


@pytest.fixture
def slurm_json():
    """Load a recorded Slurm JSON document: ``slurm_json("22.05", "sinfo")``."""

    def load(version: str, name: str) -> dict:
        return json.loads((FIXTURES / "slurm" / version / f"{name}.json").read_text())

    return load


@pytest.fixture(autouse=True)
def _fresh_gateway():
    """Every test starts with no pooled gateway (tests may change settings)."""
    from slurm import reset_gateway

    reset_gateway()
    yield
    reset_gateway()


@pytest.fixture(autouse=True)
def _no_incidental_slurm_sync(request, monkeypatch):
    """Membership and quota changes enqueue the Slurm sync on commit; with eager Celery in tests that
    would change the real demo accounts. Tests that want the sync call ``teams_sync()`` themselves
    (or mark themselves ``@pytest.mark.real_sync``). Yields one ``1`` per sync that would have been
    queued (the ``teams``/``by`` it was queued with are not kept)."""
    if request.node.get_closest_marker("real_sync"):
        yield None
        return
    calls: list[int] = []
    monkeypatch.setattr("teams.services._sync_on_commit", lambda **_: calls.append(1))
    yield calls


@pytest.fixture
def clean_cache():
    """The test Redis database (``/15``), emptied before and after the test."""
    from django.core.cache import cache

    cache.clear()
    yield cache
    cache.clear()


# --- a real OIDC provider (idp/server.mjs) for the test session ---------------------------------
import subprocess  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402

#: Test-only IdP users added to the dev users: each breaks one login rule. None of them has the
#: directory claim (posix_username) except ivan (an invalid one), olga (an account outside the
#: users group), rooty (root) and dmitri (daemon, uid 1: system accounts); alice2 and bobby are
#: impostors whose editable preferred_username names another person.
TEST_USERS = [
    {
        "username": "ivan",
        "password": "ivan",
        "claims": {
            "sub": "test-ivan",
            "email": "ivan@example.org",
            "email_verified": True,
            "name": "Ivan Invalid",
            "preferred_username": "Ivan Smith",
            "posix_username": "Ivan Smith",
            "groups": [],
        },
    },
    {
        "username": "rooty",
        "password": "rooty",
        "claims": {
            "sub": "test-rooty",
            "email": "rooty@example.org",
            "email_verified": True,
            "name": "Rooty Directory Mistake",
            "preferred_username": "root",
            "posix_username": "root",
            "groups": [],
        },
    },
    {
        "username": "dmitri",
        "password": "dmitri",
        "claims": {
            "sub": "test-dmitri",
            "email": "dmitri@example.org",
            "email_verified": True,
            "name": "Dmitri Daemon",
            "preferred_username": "daemon",
            "posix_username": "daemon",
            "groups": [],
        },
    },
    {
        "username": "nora",
        "password": "nora",
        "claims": {"sub": "test-nora", "email": "nora@example.org", "email_verified": True, "name": "Nora Noname", "groups": []},
    },
    {
        "username": "olga",
        "password": "olga",
        "claims": {
            "sub": "test-olga",
            "email": "olga@example.org",
            "email_verified": True,
            "name": "Olga Outsider",
            "preferred_username": "outsider",
            "posix_username": "outsider",
            "groups": [],
        },
    },
    {
        "username": "alice2",
        "password": "alice2",
        "claims": {
            "sub": "test-alice-impostor",
            "email": "alice@example.org",
            "email_verified": True,
            "name": "Not Alice",
            "preferred_username": "alice",
            "groups": [],
        },
    },
    {
        "username": "bobby",
        "password": "bobby",
        "claims": {
            "sub": "test-bob-impostor",
            "email": "bob@example.org",
            "email_verified": False,
            "name": "Not Bob",
            "preferred_username": "bob",
            "groups": ["nlp", "portal-admins"],
        },
    },
]


@dataclass
class TestIdP:
    issuer: str
    users_file: Path
    process: subprocess.Popen
    config_file: Path
    log_file: Path
    #: Seconds the IdP's clock runs ahead of this machine's (idp/server.mjs ``IDP_CLOCK_OFFSET_S``).
    clock_offset_s: float = 0

    def start(self) -> None:
        """Start the IdP process (a new signing key each time: the config has no ``jwks_file``)."""
        log = open(self.log_file, "a")
        mark = self.log_file.stat().st_size
        self.process = subprocess.Popen(
            ["node", str(REPO / "idp" / "server.mjs")],
            env={**os.environ, "IDP_CONFIG": str(self.config_file), "IDP_CLOCK_OFFSET_S": str(self.clock_offset_s)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        from tests.waiting import wait_for

        def listening() -> bool:
            if "IdP listening" in self.log_file.read_text()[mark:]:
                return True
            if self.process.poll() is not None:  # it exited: no use waiting (pytest.fail is not a "not yet")
                pytest.fail("the test IdP did not start (is `npm ci --prefix idp` done?):\n" + self.log_file.read_text()[mark:])
            return False

        try:
            wait_for(
                "the test IdP to say 'IdP listening' (is `npm ci --prefix idp` done?)",
                listening,
                timeout=30,
                every=0.1,
                seen=lambda: self.log_file.read_text()[mark:],
            )
        except BaseException:
            self.process.kill()
            raise

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def restart_with_new_keys(self) -> None:
        """Restart the IdP as after a key rotation: its sessions and signing key are new, so ID
        tokens it issued before no longer verify against its JWKS."""
        self.stop()
        self.start()

    @contextmanager
    def clock_ahead(self, seconds: float):
        """Run the IdP with its clock ``seconds`` ahead for the ``with`` block (restarted, so with
        new keys and no sessions), then restart it with the right time."""
        self.stop()
        self.clock_offset_s = seconds
        self.start()
        try:
            yield
        finally:
            self.stop()
            self.clock_offset_s = 0
            self.start()

    @contextmanager
    def stopped(self):
        """The IdP is down for the ``with`` block, then started again (new keys, no sessions)."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def requests_to(self, path: str, *, since: int = 0) -> int:
        """How many requests for ``path`` the IdP logged after log offset ``since`` (``log_size``)."""
        return sum(1 for line in self.log_file.read_text()[since:].splitlines() if f" {path} " in line)

    def log_size(self) -> int:
        return len(self.log_file.read_text())

    def users(self) -> list[dict]:
        return json.loads(self.users_file.read_text())["users"]

    @contextmanager
    def changed_claims(self, username: str, **changes):
        """Change one user's claims for the ``with`` block (``None`` removes a claim); the IdP
        re-reads its users file at every login. The original entry is restored afterwards."""
        original = self.users_file.read_text()
        users = self.users()
        for user in users:
            if user["username"] == username:
                for key, value in changes.items():
                    if value is None:
                        user["claims"].pop(key, None)
                    else:
                        user["claims"][key] = value
        self.users_file.write_text(json.dumps({"users": users}))
        try:
            yield
        finally:
            self.users_file.write_text(original)


@pytest.fixture(scope="session")
def oidc_idp(tmp_path_factory):
    """The dev IdP (``idp/server.mjs``, npm ``oidc-provider``) on a free port, with the dev users plus
    :data:`TEST_USERS`, and the portal client registered for the live server's address."""
    base = tmp_path_factory.mktemp("idp")
    port = free_port()
    portal = "http://" + os.environ["DJANGO_LIVE_TEST_SERVER_ADDRESS"]
    users = json.loads((REPO / "idp" / "users.json").read_text())["users"] + TEST_USERS
    (base / "users.json").write_text(json.dumps({"users": users}))
    config = {
        "issuer": f"http://127.0.0.1:{port}",
        "host": "127.0.0.1",
        "port": port,
        "users_file": str(base / "users.json"),
        "extra_profile_claims": ["posix_username", "unix_name"],  # the directory claim; unix_name for the configurable-claim test
        "clients": [
            {
                "client_id": "portal",
                "client_secret": "portal-test-secret",
                "redirect_uris": [f"{portal}/accounts/oidc/idp/login/callback/"],
                "post_logout_redirect_uris": [f"{portal}/"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
            {
                "client_id": "jupyterhub",
                "client_secret": "jupyterhub-test-secret",
                "redirect_uris": [f"http://127.0.0.1:{os.environ['TEST_HUB_PORT']}/hub/oauth_callback"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        ],
    }
    (base / "config.json").write_text(json.dumps(config))
    # make test keeps the IdP's log with the run's other logs (TEST_ARTIFACTS, scripts/test.sh).
    logs = Path(os.environ["TEST_ARTIFACTS"]) / "logs" if os.environ.get("TEST_ARTIFACTS") else base
    logs.mkdir(parents=True, exist_ok=True)
    log_file = logs / f"idp-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{port}.log"
    log_file.write_text("")
    idp = TestIdP(
        issuer=config["issuer"],
        users_file=base / "users.json",
        process=None,
        config_file=base / "config.json",
        log_file=log_file,
    )
    idp.start()
    yield idp
    idp.stop()


@pytest.fixture
def portal_with_idp(settings, oidc_idp, live_server, transactional_db, clean_cache):
    """The live portal configured for the test IdP. Returns the portal's base URL. The portal's
    cached JWKS is dropped first: tests restart the IdP with new keys far more often than any real
    IdP rotates them (accounts/oidc/tokens.py rate-limits forced key fetches)."""
    from accounts.oidc.tokens import jwks_forget
    from portal.settings.base import socialaccount_providers

    jwks_forget()
    settings.PORTAL_OIDC = {
        **settings.PORTAL_OIDC,
        "issuer": oidc_idp.issuer,
        "client_id": "portal",
        "client_secret": "portal-test-secret",
        "name": "Test IdP",
    }
    settings.SOCIALACCOUNT_PROVIDERS = socialaccount_providers(settings.PORTAL_OIDC)
    settings.PORTAL_HUB_URL = ""  # no hub unless a test starts one (hub_portal): sign-out then skips the hub
    return live_server.url


@pytest.fixture
def collector_on():
    """The cyclic garbage collector on for the test (whatever an earlier test left), as it was after."""
    import gc

    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()
