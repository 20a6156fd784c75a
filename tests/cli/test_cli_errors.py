"""The CLI when connections fail or the portal refuses, against the fake API over
real sockets: idempotent reads are sent again on a connection the server reset (the fake's
keep-alive mode resets a kept-alive connection that idled, as gunicorn's keep-alive timer does when
it fires just as the next poll arrives), writes are not; "cannot connect" is said only when no
connection could be made; under ``--json`` every error is one JSON line of one shape on stdout."""

from __future__ import annotations

import email.utils
import json
import re
import runpy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuportal import cli
from gpuportal.cli import main
from gpuportal.client import Client
from gpuportal.errors import ConnectionFailed

from .fake_api import RESET, TOKEN, FakeAPI, dead_url, make_job

pytestmark = pytest.mark.usefixtures("clean_env")

REPO = Path(__file__).resolve().parents[2]
ERROR_KEYS = {"kind", "status", "message", "errors", "url", "hint"}


@pytest.fixture
def keepalive_api(monkeypatch):
    """The fake API keeping connections alive and resetting any that idled for more than 0.05 s."""
    fake = FakeAPI(keep_alive_s=0.05).start()
    monkeypatch.setenv("GPUPORTAL_URL", fake.url)
    monkeypatch.setenv("GPUPORTAL_TOKEN", TOKEN)
    yield fake
    fake.stop()


def log_page(offset: int, data: str, *, final: bool = False) -> dict:
    state = "COMPLETED" if final else "RUNNING"
    nxt = offset + len(data.encode())
    return {"stream": "out", "offset": offset, "data": data, "next_offset": nxt, "missing": False, "final": final, "state": state}


def test_follow_over_many_polls_survives_a_server_that_resets_idle_connections(keepalive_api, capsys):
    lines = [f"step {i}\n" for i in range(12)]
    offsets = [sum(len(x) for x in lines[:i]) for i in range(len(lines) + 1)]
    keepalive_api.log_pages = [log_page(o, x) for o, x in zip(offsets, lines, strict=False)] + [
        log_page(offsets[-1], "", final=True)
    ]
    keepalive_api.jobs[0].update(state="COMPLETED", final=True, exit_code=0)
    # Each poll comes 0.1 s after the last answer, on the kept-alive connection the server has by then
    # given up: the server resets it as the request arrives.
    assert main(["logs", "-f", "--interval", "0.1", "4242"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert captured.out == "".join(lines)
    assert captured.err.splitlines() == ["job 4242 ended: COMPLETED (exit code 0)"]
    assert keepalive_api.resets >= 12  # every poll met a reset connection and was sent again on a new one
    assert [int(r.query["offset"]) for r in keepalive_api.calls("GET", "/jobs/4242/log")] == offsets


def test_a_read_reset_every_time_is_tried_again_then_reported_as_dropped_not_as_cannot_connect(env, capsys):
    env.script("GET", "/jobs", RESET)
    assert main(["ls"]) == 1
    err = capsys.readouterr().err
    assert len(env.calls("GET", "/jobs")) == 4  # the first try and 3 more, each on a new connection
    assert "cannot connect" not in err
    assert err == (
        f"error: the portal at {env.url}/api/v1/jobs?scope=active closed the connection without answering, 4 times in a row "
        "(Connection reset by peer): it is reachable but dropping connections; try again in a moment\n"
    )


def test_a_write_whose_connection_breaks_is_sent_once_and_the_error_says_it_may_have_been_done(env, capsys):
    env.script("POST", "/jobs/4242/cancel", RESET)
    assert main(["cancel", "4242"]) == 1
    err = capsys.readouterr().err
    assert len(env.calls("POST", "/jobs/4242/cancel")) == 1  # never sent twice: the portal may have acted on it
    assert "cannot connect" not in err
    assert f"the connection to the portal at {env.url}/api/v1/jobs/4242/cancel was closed before it answered" in err
    assert "the POST may or may not have been carried out" in err and "gpuportal ls" in err


def _bad_profile(env, tmp_path, monkeypatch):
    env.script(
        "POST",
        "/jobs",
        (400, {"detail": "The profile is not valid.", "errors": [{"field": "gpus", "message": "at most 8 GPUs", "line": 7}]}),
    )
    f = tmp_path / "bad.yaml"
    f.write_text("name: t\n")
    return ["submit", str(f)]


def _server_error(env, tmp_path, monkeypatch):
    env.script("GET", "/jobs", (500, {"detail": "The portal failed to answer this request.", "errors": []}))
    return ["ls"]


def _proxy_error_page(env, tmp_path, monkeypatch):
    env.script("GET", "/jobs", (502, "<html><body>Bad gateway</body></html>"))
    return ["ls"]


def _bad_token(env, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPORTAL_TOKEN", "revoked")
    return ["ls"]


def _refused(env, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPORTAL_URL", dead_url())
    return ["show", "4242"]


def _reset(env, tmp_path, monkeypatch):
    env.script("GET", "/jobs/4242", RESET)
    return ["show", "4242"]


def _missing(env, tmp_path, monkeypatch):
    env.script("GET", "/jobs/99999", (404, {"detail": f"{env.url}/api/v1/jobs/99999", "errors": []}))
    return ["show", "99999"]  # its detail is the URL the error's url must be: the whole of it


def _not_the_portal(env, tmp_path, monkeypatch):
    env.script("GET", "/me", (200, "<html>a web page</html>"))
    return ["whoami"]


def _usage(env, tmp_path, monkeypatch):
    return ["submit"]


def _not_configured(env, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPORTAL_URL")
    return ["ls"]


def _bad_config_file(env, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPORTAL_URL")
    cfg = tmp_path / "config.toml"
    cfg.write_text("url = [not toml")
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    return ["ls"]


CASES = [
    (
        "4xx-with-field-errors",
        _bad_profile,
        1,
        "http",
        400,
        lambda e: e["errors"] == [{"field": "gpus", "message": "at most 8 GPUs", "line": 7}],
    ),
    ("5xx", _server_error, 1, "http", 500, lambda e: e["message"] == "The portal failed to answer this request."),
    (
        "5xx-html-page",
        _proxy_error_page,
        1,
        "http",
        502,
        lambda e: (
            e["message"].startswith("the portal, or a proxy in front of it, is unavailable or restarting (HTTP 502")
            and "not a JSON answer" not in e["message"]
        ),
    ),
    (
        "bad-token",
        _bad_token,
        1,
        "http",
        401,
        lambda e: e["message"] == "Invalid or missing API token." and "/account/tokens/" in e["hint"],
    ),
    (
        "refused",
        _refused,
        1,
        "unreachable",
        None,
        lambda e: "cannot connect" in e["message"] and e["url"].endswith("/api/v1/jobs/4242"),
    ),
    (
        "reset",
        _reset,
        1,
        "connection_lost",
        None,
        lambda e: "Connection reset by peer" in e["message"] and "cannot connect" not in e["message"],
    ),
    ("4xx-url", _missing, 1, "http", 404, lambda e: e["url"] == e["message"]),
    ("not-the-portal", _not_the_portal, 1, "bad_answer", None, lambda e: "did not answer with a JSON object" in e["message"]),
    ("usage", _usage, 2, "usage", None, lambda e: e["message"] == "the following arguments are required: FILE.yaml"),
    ("not-configured", _not_configured, 2, "usage", None, lambda e: "no portal URL configured" in e["message"]),
    ("bad-config-file", _bad_config_file, 2, "config", None, lambda e: "is not valid TOML" in e["message"]),
]


@pytest.mark.parametrize("setup, status, kind, http_status, check", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_every_error_under_json_is_one_json_line_of_one_shape(
    env, tmp_path, monkeypatch, capsys, setup, status, kind, http_status, check
):
    argv = setup(env, tmp_path, monkeypatch)
    assert main(["--json", *argv]) == status
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 1, captured.out
    document = json.loads(lines[0])
    assert set(document) == {"error"} and set(document["error"]) == ERROR_KEYS, document
    error = document["error"]
    assert (error["kind"], error["status"]) == (kind, http_status), error
    assert isinstance(error["message"], str) and error["message"] and isinstance(error["errors"], list)
    assert check(error), error
    assert "error: " in captured.err  # people still get the sentence on stderr


UNAVAILABLE = "the portal, or a proxy in front of it, is unavailable or restarting"
PAGE = "<html><body><h1>Sorry</h1></body></html>"


@pytest.mark.parametrize(
    "status, reason, headers, sentence",
    [
        (
            429,
            "Too Many Requests",
            {"Retry-After": "30"},
            "too many requests: the portal, or a proxy in front of it, refused this one",
        ),
        (429, "Too Many Requests", {}, "too many requests: the portal, or a proxy in front of it, refused this one"),
        (502, "Bad Gateway", {}, UNAVAILABLE),
        (503, "Service Unavailable", {"Retry-After": "120"}, UNAVAILABLE),
        (504, "Gateway Timeout", {}, UNAVAILABLE),
        (500, "Internal Server Error", {}, "the portal failed on its side"),
    ],
)
def test_a_proxys_or_the_servers_page_for_a_busy_or_failed_portal_says_so_and_when_to_try_again(
    env, capsys, status, reason, headers, sentence
):
    env.script("GET", "/jobs", (status, PAGE, headers))
    assert main(["ls"]) == 1
    err = capsys.readouterr().err
    http = f"(HTTP {status} {reason} from {env.url}/api/v1/jobs?scope=active)"
    if status == 500:
        later = "try again, and tell the portal's admins if it keeps failing"
    elif headers:
        later = f"try again in {headers['Retry-After']} s"
    else:
        later = "try again in a moment" if status == 429 else "try again shortly"
    assert err == f"error: {sentence} {http}; {later}\n"
    assert "portal's address" not in err


def test_a_retry_after_date_is_said_in_seconds_and_a_page_for_another_status_still_asks_about_the_address(env, capsys):
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    env.script("GET", "/jobs", (503, PAGE, {"Retry-After": when}))
    assert main(["ls"]) == 1
    assert re.search(r"; try again in (89|90|91) s\n$", capsys.readouterr().err)
    env.script("GET", "/jobs", (404, PAGE))
    assert main(["ls"]) == 1
    assert capsys.readouterr().err == (
        f"error: HTTP 404 Not Found from {env.url}/api/v1/jobs?scope=active (not a JSON answer: is {env.url} the portal's address?)\n"
    )


def test_the_errors_url_is_the_whole_url_that_answered_after_a_redirect_too(env, capsys):
    other = FakeAPI().start()
    try:
        env.script("GET", "/jobs/4242", (307, "", {"Location": f"{other.url}/api/v1/jobs/4242?cluster=b"}))
        assert main(["--json", "show", "4242"]) == 1
        error = json.loads(capsys.readouterr().out)["error"]
        assert (error["status"], error["url"]) == (401, f"{other.url}/api/v1/jobs/4242?cluster=b")  # no token sent there
        env.script("GET", "/jobs/4242", (302, "", {"Location": "/api/v1/jobs/99999"}))
        assert main(["--json", "show", "4242"]) == 1
        assert json.loads(capsys.readouterr().out)["error"]["url"] == f"{env.url}/api/v1/jobs/99999"
    finally:
        other.stop()


def test_a_header_that_cannot_be_sent_is_one_line_not_a_traceback(env):
    """``main`` refuses such a token first; the client too never lets http.client's error through."""
    with pytest.raises(ConnectionFailed) as failed:
        Client(env.url, "gpp_ab…").me()
    assert failed.value.kind == "invalid_request" and str(failed.value).startswith(f"cannot send the request to {env.url}")
    assert env.requests == []


def test_json_success_output_is_unchanged(env, capsys):
    env.jobs[0] = make_job(state="RUNNING")
    assert main(["--json", "show", "4242"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "RUNNING"


def test_the_servers_keep_alive_outlasts_every_poll_and_every_way_of_running_it_uses_it():
    """gunicorn must never be the side that closes an idle connection a client is about to reuse."""
    conf = runpy.run_path(str(REPO / "portal" / "gunicorn.conf.py"))
    parser = cli.build_parser()
    cli_polls = [
        parser.parse_args(argv).interval for argv in (["logs", "1"], ["notebook"], ["submit", "x.yaml"], ["profiles", "run", "1"])
    ]
    page_polls = [int(n) for path in (REPO / "templates").rglob("*.html") for n in re.findall(r"every (\d+)s", path.read_text())]
    assert cli_polls and page_polls  # the test reads real intervals
    assert conf["keepalive"] > max(cli_polls + page_polls)
    assert conf["keepalive"] > 60  # nginx's upstream keepalive_timeout and AWS ALB's idle timeout (defaults)
    dev = (REPO / "scripts" / "dev.sh").read_text()
    assert '-c "$REPO_DIR/portal/gunicorn.conf.py"' in dev and "--keep-alive" not in dev
    assert '"-c", "portal/gunicorn.conf.py"' in (REPO / "Dockerfile").read_text()
