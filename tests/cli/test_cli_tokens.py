"""The CLI and its API token: a token is read without the whitespace around it; one with a character
no portal token has (the "…" the Tokens page's list ends a token's first characters with, a line
break, a space inside) is refused in one line naming where it came from, before any request; who
the token is (``whoami``, its expiry as the CLI prints times) and what it may not do (a 403 for a
missing scope, with where to make a token that has it)."""

from __future__ import annotations

import io
import json
import os
import time

import pytest

from gpuportal.cli import main

from .fake_api import TOKEN

pytestmark = pytest.mark.usefixtures("clean_env")

#: What the portal's Tokens page lists of a token: its first 12 characters and an ellipsis.
LISTED = "gpp_3fK9aQ2x…"
#: The portal's 403 for a token without a scope (api/base.py's need_scope).
NO_SCOPE = "This token does not have the 'jobs' scope (it has: read). Create a token with 'jobs' on the Tokens page."


def _refused(err: str, where: str, what: str, url: str) -> None:
    """``err`` is the one line refusing a token ``where`` holding ``what``, pointing at ``url``'s Tokens page."""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: the API token {where} holds {what}, which no token has"), err
    assert f"create a new one on {url}/account/tokens/" in err
    assert "shows only a token's first characters" in err and 'one ending in "…" is not the token' in err


@pytest.mark.parametrize(
    "token, what",
    [
        (LISTED, '"…" (U+2026)'),
        ("gpp_abc\ndef", "a line break (U+000A)"),
        ("gpp_abc def", "a space"),
        ("gpp_abc\x01def", "a control character (U+0001)"),
        ("gpp_abc\u00a0def", "a space character (U+00A0)"),
    ],
)
def test_a_token_from_the_environment_with_a_character_no_token_has_is_refused_before_any_request(
    env, monkeypatch, capsys, token, what
):
    monkeypatch.setenv("GPUPORTAL_TOKEN", token)
    assert main(["ls"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _refused(captured.err, "in GPUPORTAL_TOKEN", what, env.url)
    assert env.requests == []


def test_a_token_given_with_the_option_or_in_the_config_file_is_refused_naming_it(env, monkeypatch, tmp_path, capsys):
    assert main(["ls", "--token", "gpp_abc\tdef"]) == 2
    _refused(capsys.readouterr().err, "given with --token", "a tab (U+0009)", env.url)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'url = "{env.url}"\ntoken = "{LISTED}"\n', encoding="utf-8")
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    monkeypatch.delenv("GPUPORTAL_TOKEN")
    assert main(["--json", "ls"]) == 2
    captured = capsys.readouterr()
    _refused(captured.err, f"in the config file {cfg}", '"…" (U+2026)', env.url)
    error = json.loads(captured.out)["error"]
    assert error["kind"] == "config" and error["message"] == captured.err.removeprefix("error: ").rstrip("\n")
    assert env.requests == []


def test_login_refuses_such_a_token_and_writes_nothing(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "c" / "config.toml"
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    assert main(["login", "--url", api.url, "--token", LISTED]) == 2
    _refused(capsys.readouterr().err, "given with --token", '"…" (U+2026)', api.url)
    monkeypatch.setattr("sys.stdin", io.StringIO("gpp_abc\x1bdef\n"))
    assert main(["login", "--url", api.url]) == 2
    _refused(capsys.readouterr().err, "read from stdin", "a control character (U+001B)", api.url)
    assert not cfg.exists() and api.requests == []


def test_a_token_is_read_without_the_whitespace_around_it_wherever_it_comes_from(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'url = "{api.url}"\ntoken = " {TOKEN}\\n"\n', encoding="utf-8")
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    assert main(["whoami"]) == 0, capsys.readouterr().err
    monkeypatch.setenv("GPUPORTAL_TOKEN", f"\t{TOKEN}\r\n")
    assert main(["whoami", "--token", " \n"]) == 0, capsys.readouterr().err  # a blank option is no token
    assert main(["whoami", "--token", f" {TOKEN}\n"]) == 0, capsys.readouterr().err
    assert [r.headers["authorization"] for r in api.calls("GET", "/me")] == [f"Bearer {TOKEN}"] * 3


@pytest.fixture
def paris_time():
    """This process in Paris's time zone (a POSIX TZ rule: no tz database needed), then back."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "CET-1CEST,M3.5.0,M10.5.0/3"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_whoami_prints_the_tokens_expiry_in_local_time_with_its_zone(env, capsys, paris_time):
    me = {"username": "alice", "teams": ["vision"], "scopes": ["read"], "token_expires_at": "2026-12-05T18:00:00.011Z"}
    env.script("GET", "/me", (200, me))
    assert main(["whoami"]) == 0
    assert "token expires: 2026-12-05 19:00 CET\n" in capsys.readouterr().out


def test_a_403_for_a_missing_scope_says_where_to_make_a_token_with_it(env, capsys):
    env.script("POST", "/jobs/4242/cancel", (403, {"detail": NO_SCOPE, "errors": []}))
    assert main(["cancel", "4242"]) == 1
    hint = f"the Tokens page is {env.url}/account/tokens/; then give the new token to `gpuportal login` (or GPUPORTAL_TOKEN)"
    assert capsys.readouterr().err.splitlines() == [f"error: {NO_SCOPE}", f"hint: {hint}"]
    assert main(["--json", "cancel", "4242"]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["hint"] == hint


def test_a_403_for_a_scope_gets_only_the_hint_its_sentence_lacks_and_other_403s_none(env, capsys):
    env.script("GET", "/jobs", (403, {"detail": "This token does not have the 'read' scope (it has: jobs).", "errors": []}))
    assert main(["ls"]) == 1
    assert capsys.readouterr().err.splitlines()[1] == (
        f"hint: make a token with the 'read' scope on {env.url}/account/tokens/, then give the new token to `gpuportal login` "
        "(or GPUPORTAL_TOKEN)"
    )
    unlinked = "This token's owner is not linked to a cluster account: waiting for an administrator to link the account."
    env.script("GET", "/jobs", (403, {"detail": unlinked, "errors": []}))
    assert main(["ls"]) == 1
    assert capsys.readouterr().err == f"error: {unlinked}\n"
    with_page = f"This token does not have the 'read' scope. Create a token with 'read' on {env.url}/account/tokens/."
    env.script("GET", "/jobs", (403, {"detail": with_page, "errors": []}))
    assert main(["ls"]) == 1  # the address is not said twice
    assert capsys.readouterr().err.splitlines()[1] == "hint: then give the new token to `gpuportal login` (or GPUPORTAL_TOKEN)"
