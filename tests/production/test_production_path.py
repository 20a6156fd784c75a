"""The production path, run as a site runs it: in a copy of the checkout, the
production commands of docs/production.md line by line (the same command lines as docker-compose.yml's services,
checked here), with ``DJANGO_SETTINGS_MODULE=portal.settings.production`` and a ``.env`` made from
``deploy/env.example``, against the local stack: its own PostgreSQL database, Redis database 12
(``make dev`` uses 0, the tests 15: this stack's workers never take their tasks), a test IdP, and
cluster1 through the portal's sshd on 127.0.0.1:2222.

With the example's secrets left at change-me, the same lines refuse to start, naming each secret
(``test_the_example_env_with_its_secrets_unset_refuses_to_start``).

HTTPS is real: gunicorn speaks TLS itself with a self-signed certificate made here by ``openssl``
(``GUNICORN_CMD_ARGS``, which gunicorn reads from the environment, so compose's web service honours it
from ``.env`` too); the client checks that certificate. A site's TLS proxy instead sets
``X-Forwarded-Proto: https`` (tests/production/test_proxy_header.py)."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import psycopg
import pytest
import requests
from bs4 import BeautifulSoup

from tests import conftest as shared
from tests.conftest import free_port
from tests.production.site import (
    REPO,
    checkout_copy,
    compose_services,
    dockerfile_lines,
    env_edited,
    own_database,
    pg_url,
    readme_commands,
    recreate_database,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

#: The stack's own Redis database: never 0 (make dev's workers) nor 15 (the tests').
REDIS_DB = 12
DEADLINE_S = 120


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (subjectAltName IP) and its key, made by ``openssl req``."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def start_idp(tmp: Path, portal: str) -> shared.TestIdP:
    """The dev IdP (idp/server.mjs) with the dev users, on a port of its own, with this portal's
    client registered for its https callback."""
    import json

    port = free_port()
    (tmp / "users.json").write_text((REPO / "idp" / "users.json").read_text())
    config = {
        "issuer": f"http://127.0.0.1:{port}",
        "host": "127.0.0.1",
        "port": port,
        "users_file": str(tmp / "users.json"),
        "extra_profile_claims": ["posix_username"],
        "clients": [
            {
                "client_id": "portal-prod",
                "client_secret": "portal-prod-test-secret",
                "redirect_uris": [f"{portal}/accounts/oidc/idp/login/callback/"],
                "post_logout_redirect_uris": [f"{portal}/"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }
        ],
    }
    (tmp / "config.json").write_text(json.dumps(config))
    (tmp / "idp.log").write_text("")
    idp = shared.TestIdP(issuer=config["issuer"], users_file=tmp / "users.json", process=None,
                  config_file=tmp / "config.json", log_file=tmp / "idp.log")  # fmt: skip
    idp.start()
    return idp


def form_fields(html: str, base: str, action_contains: str = "") -> tuple[str, dict]:
    """The first form (whose action contains ``action_contains``): its absolute action URL and the
    values a browser would send (inputs, the selected option of each select, textareas)."""
    soup = BeautifulSoup(html, "html.parser")
    form = next(f for f in soup.find_all("form") if action_contains in (f.get("action") or ""))
    fields: dict[str, str] = {}
    for field in form.find_all(["input", "select", "textarea"]):
        name = field.get("name")
        if not name or (field.get("type") in ("checkbox", "radio") and not field.has_attr("checked")):
            continue
        if field.name == "select":
            options = field.find_all("option")
            chosen = next((o for o in options if o.has_attr("selected")), options[0] if options else None)
            fields[name] = chosen.get("value", chosen.text) if chosen else ""
        elif field.name == "textarea":
            fields[name] = field.text
        else:
            fields[name] = field.get("value", "")
    return urljoin(base, form.get("action") or base), fields


def sign_in(session: requests.Session, portal: str, username: str) -> requests.Response:
    """The authorization-code sign-in through the IdP's login form, as a browser does it over
    https (a Referer on each POST to the portal: Django's CSRF check of a secure request needs it)."""
    page = session.get(f"{portal}/accounts/login/")
    action, fields = form_fields(page.text, page.url)
    at_idp = session.post(action, data=fields, headers={"Referer": page.url})
    action, fields = form_fields(at_idp.text, at_idp.url)
    fields.update(username=username, password=username)
    return session.post(action, data=fields)


class Stack:
    """The services started from docs/production.md's lines, each a ``bash`` running the loader line and then
    ``exec``-ing the service's command (so a signal reaches gunicorn or celery itself)."""

    def __init__(self, site: Path, env: dict, logs: Path):
        self.site, self.env, self.logs = site, env, logs
        self.procs: dict[str, subprocess.Popen] = {}

    def run(self, loader: str, line: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"{loader}\n{line}"], cwd=self.site, env=self.env,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def start(self, name: str, loader: str, line: str) -> None:
        out = open(self.logs / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(["bash", "-c", f"{loader}\nexec {line}"], cwd=self.site, env=self.env,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        out.close()

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def ended(self) -> str:
        """Which services ended, with the end of their output ("" while all run)."""
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        return f"services ended: {dead}\n" + "\n".join(self.log(n)[-3000:] for n in dead) if dead else ""

    def alive(self) -> None:
        ended = self.ended()
        assert not ended, ended

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def wait_on_stack(what: str, probe, timeout: float = DEADLINE_S, stack: Stack | None = None, log: str = ""):
    """``tests.waiting.wait_for`` every 0.5 s, failing at once if one of the ``stack``'s services
    ended; on timeout it shows the end of the service ``log``'s output."""

    def running_then_probe():
        if stack and (ended := stack.ended()):
            pytest.fail(ended, pytrace=False)  # not a "not yet": no use waiting
        return probe()

    return wait_for(
        what,
        running_then_probe,
        timeout=timeout,
        every=0.5,
        seen=lambda: stack.log(log)[-4000:] if stack and log else "",
    )


def test_readme_compose_and_dockerfile_run_the_same_commands():
    """No drift: each portal service of docker-compose.yml runs a command line of docs/production.md's
    block (and that block starts no service compose lacks), the image's CMD is the web service's, and
    its collectstatic is the one the Dockerfile's RUN line runs."""
    readme = readme_commands()
    services = compose_services()
    by_argv = {tuple(spec["command"]): name for name, spec in services.items()}
    readme_argvs = [tuple(shlex.split(line)) for line in readme.once + readme.services]
    assert set(by_argv) <= set(readme_argvs), {n: c for c, n in by_argv.items() if c not in readme_argvs}
    assert {tuple(shlex.split(line)) for line in readme.services} <= set(by_argv)
    assert {by_argv[tuple(shlex.split(line))] for line in readme.services} == {"web", "worker", "poller", "beat"}
    assert by_argv[tuple(shlex.split(next(li for li in readme.once if " migrate" in li)))] == "migrate"
    runs, cmd = dockerfile_lines()
    assert cmd == services["web"]["command"]
    collect = next(line for line in readme.once if "collectstatic" in line)
    assert shlex.split(collect) in runs, runs
    for name, spec in services.items():
        assert spec["env_file"] == ".env", name
        # Only the compose network's names differ from .env: the stack's own database and Redis.
        assert set(spec.get("environment", {})) == {"DATABASE_URL", "REDIS_URL"}, name
    assert "--schedule" not in services["beat"]["command"]  # RedBeat: the schedule lives in Redis


#: Each refused secret's check id and sentence when deploy/env.example's change-me is left in it
#: (``manage.py check`` writes "(portal.E002) PORTAL_SECRET_KEY ...", the services "portal.E002: PORTAL_SECRET_KEY ...").
EXAMPLE_SECRETS_REFUSED = [
    (check_id, f"{name} is a placeholder (like deploy/env.example's 'change-me'), not a secret.")
    for check_id, name in (
        ("portal.E002", "PORTAL_SECRET_KEY"),
        ("portal.E003", "PORTAL_HUB_TOKEN"),
        ("portal.E004", "PORTAL_OIDC_CLIENT_SECRET"),
    )
]


@pytest.mark.timeout(600)
def test_the_example_env_with_its_secrets_unset_refuses_to_start(tmp_path):
    """deploy/env.example as a site copies it (the README's line 1), with only what points it at this
    machine's stack set (database, Redis 12, sshd, a free port for gunicorn) and its three secrets
    left at change-me: the README's ``check --deploy`` and each service line (web, worker, poller,
    beat) end on their own, non-zero, naming every secret. The test above runs the same lines once a
    site has set them."""
    readme = readme_commands()
    site = checkout_copy(tmp_path / "site")
    (tmp_path / "logs").mkdir()
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "TZ": "UTC"}  # fmt: skip
    stack = Stack(site, env, tmp_path / "logs")
    copied = subprocess.run(["bash", "-c", readme.copy_env], cwd=site, env=env, capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    database = own_database("prodrefuse")
    values = {
        "PORTAL_ALLOWED_HOSTS": "127.0.0.1",
        "PORTAL_DB_PASSWORD": "portal",
        "DATABASE_URL": pg_url(database),
        "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "PORTAL_SSH_HOST": "127.0.0.1",
        "PORTAL_SSH_PORT": "2222",
        "PORTAL_SSH_KEY_FILE": str(REPO / "var" / "ssh" / "portal_ed25519"),
        "PORTAL_SSH_KNOWN_HOSTS": str(REPO / "var" / "ssh" / "known_hosts"),
        "GUNICORN_CMD_ARGS": f"--bind=127.0.0.1:{free_port()}",
    }
    dotenv = site / ".env"
    dotenv.write_text(env_edited(dotenv.read_text(), values))
    for name in ("PORTAL_SECRET_KEY", "PORTAL_HUB_TOKEN", "PORTAL_OIDC_CLIENT_SECRET"):
        assert f"\n{name}=change-me\n" in dotenv.read_text(), f"deploy/env.example no longer ships {name}=change-me"
    recreate_database(database)
    try:
        check = next(line for line in readme.once if "check --deploy" in line)
        for line in [check, *readme.services]:
            done = stack.run(readme.load_env, line, timeout=120)  # TimeoutExpired: it started instead of refusing
            said = done.stdout + done.stderr
            assert done.returncode != 0, f"{line} started with the example's secrets\n{said[-3000:]}"
            missing = [
                (check_id, words) for check_id, words in EXAMPLE_SECRETS_REFUSED if check_id not in said or words not in said
            ]
            assert not missing, f"{line}: {missing}\n{said[-3000:]}"
    finally:
        recreate_database(database, drop_only=True)
        subprocess.run(["redis-cli", "-n", str(REDIS_DB), "flushdb"], capture_output=True)  # beat's schedule, if written


@pytest.fixture
def production_site(tmp_path):
    """A copy of the checkout with its .env made from deploy/env.example (docs/production.md's line 1, then
    the edits), a fresh database, Redis database 12 emptied, a certificate and a test IdP. Yields
    (site dir, portal URL, certificate, Stack, database name); stops and removes everything after."""
    readme = readme_commands()
    site = checkout_copy(tmp_path / "site")
    port = free_port()
    portal = f"https://127.0.0.1:{port}"
    cert, key = self_signed_cert(tmp_path)
    (tmp_path / "idp").mkdir()
    (tmp_path / "logs").mkdir()
    database = own_database("prodpath")
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "TZ": "UTC"}  # fmt: skip
    stack = Stack(site, env, tmp_path / "logs")
    with ExitStack() as cleanup:
        idp = start_idp(tmp_path / "idp", portal)
        cleanup.callback(idp.stop)
        copied = subprocess.run(["bash", "-c", readme.copy_env], cwd=site, env=env, capture_output=True, text=True)
        assert copied.returncode == 0, copied.stderr
        redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
        values = {
            "PORTAL_SECRET_KEY": secrets.token_urlsafe(50),
            "PORTAL_ALLOWED_HOSTS": "127.0.0.1",
            "PORTAL_CSRF_TRUSTED_ORIGINS": portal,
            "PORTAL_DB_PASSWORD": "portal",
            "DATABASE_URL": pg_url(database),
            "REDIS_URL": redis_url,
            "PORTAL_OIDC_ISSUER": idp.issuer,
            "PORTAL_OIDC_CLIENT_ID": "portal-prod",
            "PORTAL_OIDC_CLIENT_SECRET": "portal-prod-test-secret",
            "PORTAL_OIDC_LINK_CLAIM": "posix_username",  # the dev IdP plays the site directory
            "PORTAL_SSH_HOST": "127.0.0.1",
            "PORTAL_SSH_PORT": "2222",
            "PORTAL_SSH_KEY_FILE": str(REPO / "var" / "ssh" / "portal_ed25519"),
            "PORTAL_SSH_KNOWN_HOSTS": str(REPO / "var" / "ssh" / "known_hosts"),
            "PORTAL_HUB_URL": f"http://127.0.0.1:{free_port()}",  # no hub in this test
            "PORTAL_HUB_API_URL": f"http://127.0.0.1:{free_port()}/hub/api",
            "PORTAL_HUB_TOKEN": secrets.token_urlsafe(32),
            "GUNICORN_CMD_ARGS": f"--bind=127.0.0.1:{port} --certfile={cert} --keyfile={key}",
        }
        dotenv = site / ".env"
        dotenv.write_text(env_edited(dotenv.read_text(), values))
        unset = [line for line in dotenv.read_text().splitlines() if "change-me" in line and not line.startswith("#")]
        assert not unset, f"values the example marks as the site's were not set: {unset}"
        recreate_database(database)
        cleanup.callback(recreate_database, database, drop_only=True)
        subprocess.run(["redis-cli", "-n", str(REDIS_DB), "flushdb"], check=True, capture_output=True)
        cleanup.callback(subprocess.run, ["redis-cli", "-n", str(REDIS_DB), "flushdb"], capture_output=True)
        cleanup.callback(stack.stop)
        yield site, portal, cert, stack, database


@pytest.mark.timeout(600)  # migrate, collectstatic and four services on a loaded 2-CPU CI machine
def test_production_path_from_the_readme(production_site):
    site, portal, cert, stack, database = production_site
    readme = readme_commands()

    # Lines 3-5: check --deploy clean, the tables, the static files.
    for line in readme.once:
        done = stack.run(readme.load_env, line)
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if "check --deploy" in line:
            assert "System check identified no issues" in done.stdout + done.stderr, done.stdout + done.stderr
            assert "WARNING" not in done.stdout + done.stderr
    assert (site / "staticfiles" / "staticfiles.json").exists()  # the manifest storage's

    # Lines 6-9: web, worker, poller, beat.
    names = {"gunicorn": "web", "-Q celery": "worker", "-Q poller": "poller", " beat": "beat"}
    for line in readme.services:
        stack.start(next(n for mark, n in names.items() if mark in line), readme.load_env, line)

    http = requests.Session()
    http.verify = str(cert)  # the self-signed certificate, checked: real TLS, not verify=False
    http.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would replace it

    def login_page():
        try:
            return [http.get(f"{portal}/accounts/login/", timeout=5)]  # a list: a 4xx/5xx Response is false
        except (requests.ConnectionError, requests.Timeout):  # not up yet: the socket is bound before the
            return None  # workers answer (a TLS handshake that timed out while they loaded, in CI)

    [login] = wait_on_stack("gunicorn to answer over https", login_page, timeout=60, stack=stack, log="web")
    assert login.status_code == 200
    assert login.headers["Strict-Transport-Security"].startswith("max-age=31536000")

    # Static files through whitenoise: the collected (hashed) names the pages link to, and the plain path.
    soup = BeautifulSoup(login.text, "html.parser")
    css_href = next(link["href"] for link in soup.find_all("link", rel="stylesheet") if "portal" in link["href"])
    js_src = next(tag["src"] for tag in soup.find_all("script", src=True) if "/vendor/" in tag["src"])
    assert re.search(r"portal\.[0-9a-f]{12}\.css$", css_href), css_href  # ManifestStaticFilesStorage's name
    for url, kind, source in (
        (css_href, "text/css", site / "static" / "css" / "portal.css"),
        ("/static/css/portal.css", "text/css", site / "static" / "css" / "portal.css"),
        (js_src, "javascript", site / "static" / urlsplit(js_src).path.split("/static/", 1)[1]),
    ):
        got = http.get(urljoin(portal, url), timeout=10)
        assert got.status_code == 200, url
        assert kind in got.headers["Content-Type"], (url, got.headers["Content-Type"])
        if source.exists():  # the hashed JS name is not a source file; the CSS's is compared
            assert got.content == source.read_bytes(), url
    assert "immutable" in http.get(urljoin(portal, css_href)).headers.get("Cache-Control", "")

    # Sign-in through the IdP over https; the session cookie is Secure.
    home = sign_in(http, portal, "alice")
    assert home.status_code == 200 and home.url == f"{portal}/", (home.status_code, home.url, home.text[:500])
    assert "alice" in home.text
    session_cookie = next(c for c in http.cookies if c.name == "sessionid")
    assert session_cookie.secure and session_cookie.domain.startswith("127.0.0.1")

    # A job through the production portal, worker and poller.
    def form_with_partitions():  # the form offers the partitions of the poller's first snapshot
        page = http.get(f"{portal}/jobs/new/")
        return [page] if page.status_code == 200 and '<option value="train"' in page.text else None

    [form] = wait_on_stack("the production poller's first snapshot (partitions in the form)", form_with_partitions,
                           timeout=60, stack=stack, log="poller")  # fmt: skip
    action, fields = form_fields(form.text, form.url, action_contains="/jobs/new/")
    fields.update(
        name="production path", partition="train", gpu_type="", gpu_count="0", cpus="1", memory_gb="1",
        time_limit="00:02:00", script="#!/bin/bash\necho production-path-ok\n",
    )  # fmt: skip
    posted = http.post(action, data=fields, headers={"Referer": form.url})
    refusals = [p.get_text(" ", strip=True) for p in BeautifulSoup(posted.text, "html.parser").select("p.error")]
    assert posted.status_code == 200 and "/new/" not in posted.url, (posted.status_code, refusals, fields)
    key = urlsplit(posted.url).path.strip("/").split("/")[1]

    def row():
        with psycopg.connect(pg_url(database)) as conn:
            return conn.execute("select state, slurm_job_id from jobs_job where key = %s", [key]).fetchone()

    slurm_id = wait_on_stack("the portal to record the Slurm job id", lambda: row()[1], stack=stack, log="web")
    try:
        wait_on_stack("the poller to see the job finish", lambda: row()[0] == "COMPLETED", stack=stack, log="poller")
        page = http.get(f"{portal}/jobs/{key}/")
        assert 'data-state="COMPLETED"' in page.text and str(slurm_id) in page.text
        assert "production-path-ok" in http.get(f"{portal}/jobs/{key}/log/out/").text  # read as alice over the gateway
    finally:
        subprocess.run(["scancel", str(slurm_id)], capture_output=True)

    # It was this stack's processes, on their own Redis database, that did it.
    for worker, queue in (("worker", "celery"), ("poller", "poller")):  # celery's banner: broker and queues
        banner = stack.log(worker).split("[tasks]", 1)[0]
        assert re.search(rf"transport: +redis://(:\*\*@)?127\.0\.0\.1:6379/{REDIS_DB}\n", banner), banner
        assert re.findall(r"\.> (\w+) +exchange=", banner) == [queue], banner
    # Sent by the web process right after the row's commit (the worker only when that fails).
    assert re.search(rf"job \d+ sent after commit: PENDING, Slurm job {slurm_id} ", stack.log("web")), stack.log("web")[-2000:]
    assert "snapshot poll: cluster1" in stack.log("poller")
    assert "Sending due task cluster-snapshot" in stack.log("beat")
    stack.alive()
