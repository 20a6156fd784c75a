"""Tests of the ``gpuportal`` CLI against a fake of the portal's REST API (no database, no Slurm)."""

from __future__ import annotations

import io
import json
import os
import stat
import time
import tomllib

import pytest

from gpuportal import __version__, config
from gpuportal.cli import main, parse_override, parse_value

from .fake_api import KEY_1, KEY_2, TOKEN, dead_url, make_job, make_session

pytestmark = pytest.mark.usefixtures("clean_env")


def write_file_config(path, url, token):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"url = {json.dumps(url)}\ntoken = {json.dumps(token)}\n")


# --- basics --------------------------------------------------------------------------------------
def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gpuportal {__version__}"


def test_usage_error_exits_2(capsys):
    assert main(["submit"]) == 2
    assert "FILE.yaml" in capsys.readouterr().err
    assert main(["submit", "x.yaml", "--set", "novalue"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, value",
    [
        ("4", 4),
        ("-2", -2),
        ("1.5", 1.5),
        ("2e3", 2000.0),
        ("true", True),
        ("False", False),
        ("train", "train"),
        ("007", "007"),
        ("1e999", "1e999"),
        ("", ""),
        ("a=b", "a=b"),
        ("nan", "nan"),
    ],
)
def test_parse_value(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    "text, pair",
    [
        ("name=2024", ("name", "2024")),  # the shell takes quotes away: '"2024"' would keep them
        ("partition=7", ("partition", "7")),
        ("resources.partition=7", ("resources.partition", "7")),
        ("image=3.10", ("image", "3.10")),
        ("priority=true", ("priority", "true")),
        ("gpus=4", ("gpus", 4)),
        ("requeue=false", ("requeue", False)),
        ("time_limit=90", ("time_limit", 90)),
    ],
)
def test_text_overrides_stay_text_and_the_others_are_typed(text, pair):
    parsed = parse_override(text)
    assert parsed == pair and type(parsed[1]) is type(pair[1])


# --- configuration ---------------------------------------------------------------------------------
def test_missing_configuration_exits_2_with_instructions(capsys):
    assert main(["ls"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "gpuportal login --url" in captured.err and "GPUPORTAL_URL" in captured.err and "GPUPORTAL_TOKEN" in captured.err


def test_missing_token_names_the_tokens_page(capsys, monkeypatch):
    monkeypatch.setenv("GPUPORTAL_URL", "https://portal.example.org/")
    assert main(["ls"]) == 2
    err = capsys.readouterr().err
    assert "https://portal.example.org/account/tokens/" in err and "GPUPORTAL_TOKEN" in err


def test_config_file_location(monkeypatch, tmp_path):
    assert config.config_path() == tmp_path / "home" / ".config" / "gpuportal" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.config_path() == tmp_path / "xdg" / "gpuportal" / "config.toml"
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(tmp_path / "elsewhere.toml"))
    assert config.config_path() == tmp_path / "elsewhere.toml"


def test_token_precedence_flag_over_env_over_file(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "xdg" / "gpuportal" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    write_file_config(cfg, api.url, "file-token")
    for t in ("file-token", "env-token", "flag-token"):
        api.token = t  # the fake accepts only this one
        if t == "env-token":
            monkeypatch.setenv("GPUPORTAL_TOKEN", "env-token")
        argv = ["whoami"] + (["--token", "flag-token"] if t == "flag-token" else [])
        assert main(argv) == 0, capsys.readouterr().err
        assert api.requests[-1].headers["authorization"] == f"Bearer {t}"
    assert "alice" in capsys.readouterr().out


def test_url_precedence_flag_over_env_over_file(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    write_file_config(cfg, api.url, TOKEN)
    assert main(["whoami"]) == 0  # file only
    monkeypatch.setenv("GPUPORTAL_URL", dead_url())
    assert main(["whoami"]) == 1  # the env's (dead) URL wins over the file's
    assert "connection refused" in capsys.readouterr().err
    assert main(["whoami", "--url", api.url + "/"]) == 0  # the flag wins over the env
    assert len(api.calls("GET", "/me")) == 2


def test_invalid_config_file_is_a_clean_error(monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("url = [unterminated\n")
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    assert main(["ls"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the config file") and "Traceback" not in err


def test_a_config_file_that_is_not_utf8_is_a_clean_error(monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    cfg.write_bytes('url = "https://portal.example.org/é"\n'.encode("latin-1"))
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    monkeypatch.delenv("GPUPORTAL_URL", raising=False)
    assert main(["ls"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: the config file {cfg} is not UTF-8 text (its byte 35 is not UTF-8): save it as UTF-8, "
        "or run `gpuportal login` to write it again\n"
    )


@pytest.mark.parametrize(
    "url, why",
    [
        ("https://[::1", "cannot be read (Invalid IPv6 URL)"),
        ("https://portal:https", "cannot be read (Port could not be cast to integer value as 'https')"),
        ("https://portal:70000", "cannot be read (Port out of range 0-65535)"),
        ("https://:8000", "names no host"),
    ],
)
def test_a_url_python_cannot_read_is_a_clean_error(monkeypatch, capsys, url, why):
    monkeypatch.setenv("GPUPORTAL_URL", url)
    assert main(["ls"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: the portal URL {url!r} {why}: give it as https://host or https://host:port")
        and "Trace" not in err
    )


def test_login_writes_a_private_config_file(api, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    token = "tok\"with\\odd'#=[chars]"  # TOML's special characters (a control character is refused: test_cli_tokens)
    api.token = token
    assert main(["login", "--url", api.url + "/", "--token", token]) == 0
    cfg = tmp_path / "xdg" / "gpuportal" / "config.toml"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert stat.S_IMODE(cfg.parent.stat().st_mode) == 0o700
    assert tomllib.loads(cfg.read_text(encoding="utf-8")) == {"url": api.url, "token": token}
    assert api.calls("GET", "/me")[-1].headers["authorization"] == f"Bearer {token}"
    assert "as alice" in capsys.readouterr().out
    # The saved settings are used afterwards.
    assert main(["whoami"]) == 0
    assert len(api.calls("GET", "/me")) == 2


def test_login_reads_the_token_from_stdin(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "c" / "config.toml"
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n"))
    assert main(["login", "--url", api.url]) == 0
    assert tomllib.loads(cfg.read_text())["token"] == TOKEN
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600


def test_login_with_a_bad_token_writes_nothing(api, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "c" / "config.toml"
    monkeypatch.setenv("GPUPORTAL_CONFIG", str(cfg))
    assert main(["login", "--url", api.url, "--token", "wrong"]) == 1
    err = capsys.readouterr().err
    assert "hint: your token is missing, wrong, expired or revoked" in err
    assert f"{api.url}/account/tokens/" in err
    assert not cfg.exists()


# --- errors ---------------------------------------------------------------------------------------
def test_unauthorized_prints_the_token_hint(env, monkeypatch, capsys):
    monkeypatch.setenv("GPUPORTAL_TOKEN", "revoked")
    assert main(["ls"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: Invalid or missing API token.",
        f"hint: your token is missing, wrong, expired or revoked: create one on {env.url}/account/tokens/",
    ]
    assert env.requests[-1].headers["authorization"] == "Bearer revoked"


def test_connection_refused_is_one_clean_line(capsys):
    url = dead_url()
    assert main(["ls", "--url", url, "--token", "t"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err == f"error: cannot connect to the portal at {url}/api/v1/jobs?scope=active: connection refused (4 tries)\n"
    )


def test_non_json_error_page(env, capsys):
    env.script("GET", "/jobs", (404, "<html><body>Not here</body></html>"))
    assert main(["ls"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: HTTP 404 Not Found") and "not a JSON answer" in err
    assert len(err.splitlines()) == 1


def test_not_found(env, capsys):
    assert main(["show", "999"]) == 1
    assert capsys.readouterr().err == "error: Not found.\n"
    assert env.requests[-1].path == "/jobs/999"


# --- submit ----------------------------------------------------------------------------------------
YAML = "# my training job\nname: train\nresources:\n  gpus: 2   # Ünïcode comment\ncommand: python train.py\n"


def test_submit_sends_the_file_text_and_typed_overrides(env, tmp_path, capsys):
    f = tmp_path / "train.yaml"
    f.write_text(YAML, encoding="utf-8")
    argv = [
        "submit",
        str(f),
        "--set",
        "gpus=4",
        "--set",
        "partition=train",
        "--set",
        "memory_gb=1.5",
        "--set",
        "exclusive=true",
        "--set",
        "env=A=B",
        "--set",
        "account=007",
    ]
    assert main(argv) == 0
    [req] = env.calls("POST", "/jobs")
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    assert req.headers["content-type"] == "application/json"
    assert req.body == {
        "profile_yaml": YAML,
        "filename": "train.yaml",
        "overrides": {"gpus": 4, "partition": "train", "memory_gb": 1.5, "exclusive": True, "env": "A=B", "account": "007"},
    }
    assert capsys.readouterr().out.splitlines() == [
        'Submitted job 4242 "train" (PENDING)',
        "Follow it: gpuportal logs -f 4242",
        f"https://portal.example.org/jobs/{KEY_1}/",
    ]


def test_submit_validation_errors_show_field_and_line(env, tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text(YAML)
    env.script(
        "POST",
        "/jobs",
        (
            400,
            {
                "detail": "The profile is not valid.",
                "errors": [
                    {"field": "gpus", "message": "at most 8 GPUs per job", "line": 7},
                    {"field": "partition", "message": "unknown partition 'trian'", "line": None},
                ],
            },
        ),
    )
    assert main(["submit", str(f), "--set", "gpus=16"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: The profile is not valid.",
        "  gpus (line 7): at most 8 GPUs per job",
        "  partition: unknown partition 'trian'",
    ]
    assert env.calls("POST", "/jobs")[0].body["overrides"] == {"gpus": 16}


def test_submit_unreadable_file(env, tmp_path, capsys):
    assert main(["submit", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    assert main(["submit", str(tmp_path / "bin.yaml")]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert env.requests == []


def test_submit_json_and_submit_failed(env, tmp_path, capsys):
    f = tmp_path / "t.yaml"
    f.write_text(YAML)
    env.script("POST", "/jobs", (201, make_job(id=None, state="SUBMIT_FAILED", submit_error="sbatch: error: QOSMaxGRESPerUser")))
    assert main(["--json", "submit", str(f)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "SUBMIT_FAILED"
    assert "QOSMaxGRESPerUser" in captured.err


# --- ls / show / cancel -------------------------------------------------------------------------------
def test_ls_table(env, capsys):
    env.jobs[0].update(state="RUNNING", elapsed_s=3725, explanation="")
    env.jobs[1]["final"] = False
    assert main(["ls"]) == 0
    assert env.requests[-1].query == {"scope": "active"}
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "ID                                    NAME                 STATE          PARTITION  GPUS    TIME           NOTE",
        "4242                                  train                RUNNING        gpu        2 a100  1:02:05        -",
        f"{KEY_2}  eval-very-long-name  SUBMIT_FAILED  gpu        -       limit 1:00:00  sbatch: error: invalid partition",
    ]


def test_ls_names_the_cluster_when_the_jobs_are_on_several(env, capsys):
    """Slurm's ids are per cluster: job 8 on cluster1 and job 8 on cluster2 read as one twice."""
    env.jobs[0].update(id=8, slurm_ref="8", cluster="cluster1")
    env.jobs[1].update(id=8, slurm_ref="8", cluster="cluster2", final=False)
    assert main(["ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["ID", "CLUSTER", "NAME"], lines
    assert [line.split()[:2] for line in lines[1:]] == [["8", "cluster1"], ["8", "cluster2"]], lines


def test_ls_empty_and_scopes(env, capsys):
    env.jobs = []
    assert main(["ls", "--history"]) == 0
    assert capsys.readouterr().out == "No jobs.\n"
    assert main(["ls", "--all"]) == 0
    assert [r.query["scope"] for r in env.calls("GET", "/jobs")] == ["history", "all"]


@pytest.mark.parametrize("argv", [["--json", "ls", "--all"], ["ls", "--all", "--json"]])
def test_ls_json(env, capsys, argv):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {"items": env.jobs, "count": 2}
    assert out == json.dumps({"items": env.jobs, "count": 2}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_show(env, capsys):
    assert main(["show", KEY_1]) == 0
    out = capsys.readouterr().out
    assert env.requests[-1].path == f"/jobs/{KEY_1}"
    assert "id:" in out and "4242" in out
    assert any(
        line.startswith("explanation:") and line.endswith("3rd in line · waiting for 2 A100s") for line in out.splitlines()
    )
    assert any(line.startswith("time_limit_min:") and "4:00:00" in line for line in out.splitlines())


def test_ls_and_show_say_when_the_portals_figures_are_old(env, capsys):
    """The API's warning (the pages' notice: poller stopped, cluster unreachable, accounting
    unavailable) goes to stderr under the table; stdout stays the table."""
    line = "The cluster poller has not run since 14:05 UTC (is the Celery worker or beat stopped?); the last figures are from 2 min ago."
    env.script(
        "GET",
        "/jobs",
        (200, {"items": env.jobs, "count": 2, "warning": line}),
        (200, {"items": env.jobs, "count": 2, "warning": ""}),
    )
    assert main(["ls"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"warning: {line}\n" and captured.out.startswith("ID ")
    assert main(["ls"]) == 0  # fresh figures: no warning
    assert capsys.readouterr().err == ""
    stale = {"age_s": 130.0, "stale": True, "reasons": ["snapshot-stale"], "since": {}, "message": line}
    env.script("GET", f"/jobs/{KEY_1}", (200, {**env.jobs[0], "freshness": stale}))
    assert main(["show", KEY_1]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"warning: {line}\n" and "freshness" not in captured.out


def test_cancel(env, capsys):
    assert main(["cancel", "4242"]) == 0
    assert capsys.readouterr().out == 'Cancelling 4242 "train"\n'
    assert [(r.method, r.path) for r in env.requests] == [("POST", "/jobs/4242/cancel")]


def test_ls_marks_an_outside_array_and_cancel_takes_one_task(env, capsys):
    """A job submitted outside the portal (``origin`` outside) as the API lists it, an array
    with its tasks by state; ``cancel --task`` asks for one task."""
    tasks = [{"group": "running", "count": 2, "ids": "1-2"}, {"group": "pending", "count": 4, "ids": "3-6"}]
    env.jobs[0].update(state="RUNNING", origin="outside", kind="array", slurm_ref="4242_[1-6%2]", tasks=tasks, explanation="")
    env.jobs = env.jobs[:1]
    assert main(["ls"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.startswith("4242_[1-6%2]") and row.endswith("submitted outside the portal; 2 running, 4 pending")
    assert main(["cancel", "4242", "--task", "5"]) == 0
    assert capsys.readouterr().out == 'Cancelling task 5 of 4242 "train"\n'
    assert (env.requests[-1].path, env.requests[-1].query) == ("/jobs/4242/cancel", {"task": "5"})


def test_cancel_takes_slurm_s_one_task_name_as_the_task(env, capsys):
    """Slurm names one task of an array 123_7: ``cancel 4242_5`` is ``cancel 4242 --task 5``; with
    another --task it is refused before any request."""
    env.jobs[0].update(state="RUNNING", kind="array", slurm_ref="4242_[1-6%2]")
    assert main(["cancel", "4242_5"]) == 0
    assert capsys.readouterr().out == 'Cancelling task 5 of 4242 "train"\n'
    assert (env.requests[-1].path, env.requests[-1].query) == ("/jobs/4242/cancel", {"task": "5"})
    sent = len(env.requests)
    assert main(["cancel", "4242_5", "--task", "6"]) == 2
    assert "4242_5 names task 5 but --task 6 was given" in capsys.readouterr().err
    assert len(env.requests) == sent


@pytest.mark.parametrize("command", ["show", "cancel", "hold", "release", "logs"])
@pytest.mark.parametrize("ref", ["", "  ", "\t"])
def test_an_empty_job_ref_is_refused_before_any_request(env, capsys, command, ref):
    """``cancel ''`` once asked for ``/jobs//cancel``; an empty or blank REF is a usage error (exit 2)
    that says what to give, and nothing is sent."""
    assert main([command, ref]) == 2
    err = capsys.readouterr().err
    assert f"argument REF: no job given ({ref!r}): give the job's ID as `gpuportal ls` prints it (e.g. 123) or its key" in err
    assert env.requests == []


@pytest.mark.parametrize(
    "argv, what",
    [
        (["profiles", "run", ""], "argument ID: no profile given ('')"),
        (["sessions", "stop", " "], "argument NAME: no session given (' ')"),
        (["team-figures", ""], "argument TEAM: no team given ('')"),
    ],
)
def test_an_empty_profile_session_or_team_is_refused_before_any_request(env, capsys, argv, what):
    """Each made an address with an empty part (``/profiles//submit``, ``/sessions/``, ``/teams//figures``)."""
    assert main(argv) == 2
    assert what in capsys.readouterr().err
    assert env.requests == []


def test_a_job_ref_is_sent_without_the_spaces_around_it(env, capsys):
    assert main(["cancel", " 4242 "]) == 0
    assert [(r.method, r.path) for r in env.requests] == [("POST", "/jobs/4242/cancel")]


def test_cancel_of_an_ended_job_says_so(env, capsys):
    env.jobs[0].update(state="COMPLETED", final=True)
    assert main(["cancel", "4242"]) == 0
    assert capsys.readouterr().out == 'Job 4242 "train" has already ended (COMPLETED); nothing to cancel.\n'


def test_submit_waits_briefly_for_the_slurm_id(env, tmp_path, capsys, monkeypatch):
    """The portal answers before sbatch ran (state SUBMITTING, no id); the CLI asks again for the id."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    f = tmp_path / "train.yaml"
    f.write_text(YAML)
    submitting = make_job(id=None, state="SUBMITTING")
    env.script("POST", "/jobs", (201, submitting))
    env.script("GET", f"/jobs/{submitting['key']}", (200, submitting), (200, make_job(id=4242, state="PENDING")))
    assert main(["submit", str(f)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('Submitted job 4242 "train" (PENDING)') and "gpuportal logs -f 4242" in out
    assert len(env.calls("GET", f"/jobs/{submitting['key']}")) == 2


def test_ref_cannot_escape_its_path_segment(env, capsys):
    assert main(["cancel", "../sessions/lab-1"]) == 1
    assert env.requests[-1].raw_path == "/api/v1/jobs/..%2Fsessions%2Flab-1/cancel"  # one (encoded) segment
    assert capsys.readouterr().err == "error: Not found.\n"


# --- logs --------------------------------------------------------------------------------------------
def page(offset, data, next_offset, *, missing=False, final=False, state="RUNNING"):
    return {
        "stream": "out",
        "offset": offset,
        "data": data,
        "next_offset": next_offset,
        "missing": missing,
        "final": final,
        "state": state,
    }


@pytest.mark.parametrize("state, exit_code, status", [("COMPLETED", 0, 0), ("FAILED", 3, 1)])
def test_logs_follow_until_the_job_ends(env, capsys, state, exit_code, status):
    env.log_pages = [
        page(0, "", 0, missing=True, state="PENDING"),
        page(0, "", 0, missing=True, state="PENDING"),  # still pending: the notice is not repeated
        page(0, "hello\n", 6),
        page(6, "wörld\n", 13),
        page(13, "", 13, final=True, state=state),
    ]
    env.jobs[0].update(state=state, final=True, exit_code=exit_code)
    assert main(["logs", "-f", "--interval", "0.01", "4242"]) == status
    captured = capsys.readouterr()
    assert captured.out == "hello\nwörld\n"
    assert captured.err.splitlines() == [
        "waiting for the job to start (3rd in line · waiting for 2 A100s)",
        f"job 4242 ended: {state} (exit code {exit_code})",
    ]
    logs = env.calls("GET", "/jobs/4242/log")
    assert [r.query["offset"] for r in logs] == ["0", "0", "0", "6", "13"]
    assert {r.query["stream"] for r in logs} == {"out"}


@pytest.mark.parametrize("text", ["é" * 32767, "€" * 21845, "a" + "😀" * 16383])
def test_logs_follow_reads_a_full_page_of_non_ascii_text_on_without_sleeping(env, capsys, monkeypatch, text):
    """The server keeps back a character cut by its 64 KiB read, so a full page of 2-, 3- or 4-byte
    characters is 65,533 to 65,535 bytes: still full, the next page is read at once."""
    size = len(text.encode())
    env.log_pages = [page(0, text, size), page(size, "end\n", size + 4), page(size + 4, "", size + 4, final=True)]
    env.jobs[0].update(state="COMPLETED", exit_code=0)
    slept_after = []  # how many pages had been read at each sleep
    monkeypatch.setattr(time, "sleep", lambda s: slept_after.append(len(env.calls("GET", "/jobs/4242/log"))))
    assert main(["logs", "-f", "4242"]) == 0
    assert capsys.readouterr().out == text + "end\n"
    assert 65533 <= size < 65536 and slept_after == [2]  # only after the short page


def test_logs_follow_json_lines(env, capsys):
    pages = [page(0, "a", 1), page(1, "", 1, final=True, state="COMPLETED")]
    env.log_pages = list(pages)
    env.jobs[0].update(state="COMPLETED", exit_code=0)
    assert main(["logs", "4242", "-f", "--json", "--interval", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == pages


def test_logs_once_reads_all_pages(env, capsys):
    env.log_pages = [page(0, "x" * 10, 10), page(10, "y" * 5, 15), page(15, "", 15)]
    assert main(["logs", "--err", "4242"]) == 0
    assert capsys.readouterr().out == "x" * 10 + "y" * 5
    logs = env.calls("GET", "/jobs/4242/log")
    assert [(r.query["stream"], r.query["offset"]) for r in logs] == [("err", "0"), ("err", "10"), ("err", "15")]


def test_logs_tail_is_one_request_for_the_logs_last_bytes(env, capsys):
    """The server reads the file's last BYTES (``tail``, echoed in its answer): one request, however
    long the log, never a read from offset 0."""
    env.log_pages = [page(10, "ne2\nline3\n", 20) | {"tail": 10}]
    assert main(["logs", "--tail", "10", "4242"]) == 0
    assert capsys.readouterr() == ("ne2\nline3\n", "")
    assert [r.query for r in env.calls("GET", "/jobs/4242/log")] == [{"stream": "out", "tail": "10"}]


def test_logs_tail_follows_on_from_where_the_tail_ended(env, capsys):
    env.log_pages = [
        page(10, "ne2\nline3\n", 20) | {"tail": 10},
        page(20, "line4\n", 26),
        page(26, "", 26, final=True, state="COMPLETED"),
    ]
    env.jobs[0].update(state="COMPLETED", final=True, exit_code=0)
    assert main(["logs", "-f", "--tail", "10", "--interval", "0.01", "4242"]) == 0
    assert capsys.readouterr().out == "ne2\nline3\nline4\n"
    logs = env.calls("GET", "/jobs/4242/log")
    assert [(r.query.get("tail"), r.query.get("offset")) for r in logs] == [("10", None), (None, "20"), (None, "26")]


def test_logs_tail_of_more_than_a_page_reads_on_from_where_it_starts(env, capsys):
    """More than 64 KiB: the tail read (at most a page) says where the log ends, then the pages from
    BYTES before that are read; a character cut at that start (the server's U+FFFD, one per byte)
    is not printed."""
    text = "😀" * 50_000  # 200,000 bytes; the 99,999 bytes before the end start on a 😀's second byte
    env.log_pages = [
        page(134_464, text[33_616:], 200_000) | {"tail": 65_536},
        page(100_001, "\ufffd" * 3 + "😀" * 16_383, 165_536),  # as the server decodes bytes 100,001 to 165,536
        page(165_536, "😀" * 8_616, 200_000),
        page(200_000, "", 200_000),
    ]
    assert main(["logs", "--tail", "99999", "4242"]) == 0
    assert capsys.readouterr() == ("😀" * 24_999, "")
    logs = env.calls("GET", "/jobs/4242/log")
    assert [(r.query.get("tail"), r.query.get("offset")) for r in logs] == [
        ("65536", None),
        (None, "100001"),
        (None, "165536"),
        (None, "200000"),
    ]


def test_logs_tail(env, capsys):
    """A server older than tail reads answers the first page from offset 0 (no ``tail`` in it): the
    whole log is read on from there, as before, and its last BYTES printed."""
    env.log_pages = [page(0, "line1\nline2\n", 12), page(12, "line3\n", 18), page(18, "", 18)]
    assert main(["logs", "--tail", "8", "4242"]) == 0
    assert capsys.readouterr().out == "2\nline3\n"
    logs = env.calls("GET", "/jobs/4242/log")
    assert [(r.query.get("tail"), r.query.get("offset")) for r in logs] == [("8", None), (None, "12"), (None, "18")]


def test_logs_tail_the_server_could_not_read_is_read_whole_as_before(env, capsys):
    """A tail read that failed (a sudo rule without stat, say) falls back to reading the whole log;
    no file is no failure: said once, from the one request."""
    env.log_pages = [page(0, "", 0) | {"tail": 8, "error": "sudo: a password is required"}, page(0, "line1\n", 6), page(6, "", 6)]
    assert main(["logs", "--tail", "8", "4242"]) == 0
    assert capsys.readouterr() == ("line1\n", "")
    logs = env.calls("GET", "/jobs/4242/log")
    assert [(r.query.get("tail"), r.query.get("offset")) for r in logs] == [("8", None), (None, "0"), (None, "6")]
    env.requests.clear()
    env.log_pages = [page(0, "", 0, missing=True, state="PENDING") | {"tail": 8}]
    assert main(["logs", "--tail", "8", "4242"]) == 0
    assert capsys.readouterr() == ("", "job 4242 has no output yet (PENDING)\n")
    assert len(env.calls("GET", "/jobs/4242/log")) == 1


def test_logs_tail_says_why_it_printed_nothing_as_the_plain_read_does(env, capsys):
    denied = "dd: failed to open '/home/alice/slurm-4242.out': Permission denied"
    env.log_pages = [page(0, "", 0) | {"error": denied}]
    assert main(["logs", "--tail", "8", "4242"]) == 1
    assert capsys.readouterr() == ("", f"error: {denied}\n")
    env.log_pages = [page(0, "", 0, missing=True, state="PENDING")]
    assert main(["logs", "--tail", "8", "--err", "4242"]) == 0
    assert capsys.readouterr() == ("", "job 4242 has no stderr yet (PENDING)\n")


def test_logs_says_where_the_job_wrote_is_not_known_instead_of_no_output_yet(env, capsys):
    """The server's sentence (``message``) for a page with ``where_unknown``, read once, with -f, or --tail."""
    sentence = "Where this job wrote its output is not known: it ended before the portal saw it in the queue."
    unknown = page(0, "", 0, missing=True, final=True, state="FAILED") | {"where_unknown": True, "message": sentence}
    env.jobs[0].update(state="FAILED", final=True, exit_code=3)
    for args, status in ((["logs", "4242"], 0), (["logs", "--tail", "8", "4242"], 0), (["logs", "-f", "4242"], 1)):
        env.log_pages = [dict(unknown)]
        assert main(args) == status, args
        lines = capsys.readouterr().err.splitlines()
        assert lines[0] == sentence and not any("no output yet" in line for line in lines), args
    env.log_pages = [unknown | {"message": ""}]  # a server that gives no sentence
    assert main(["logs", "4242"]) == 0
    assert capsys.readouterr().err == "where job 4242 wrote its output is not known to the portal\n"


def test_logs_of_an_ended_job_without_a_file_do_not_say_yet(env, capsys):
    """A job that ended with no file at its log's path will not get one: said so, read once, with
    --tail or with -f (then followed by how it ended), not "has no output yet"."""
    gone = page(0, "", 0, missing=True, final=True, state="FAILED")
    env.jobs[0].update(state="FAILED", final=True, exit_code=1)
    why = "no {} file: it wrote none, or the file was moved or removed"
    for args, status in ((["logs", "4242"], 0), (["logs", "--tail", "8", "4242"], 0), (["logs", "--err", "4242"], 0)):
        env.log_pages = [dict(gone)]
        assert main(args) == status, args
        what = "stderr" if "--err" in args else "output"
        assert capsys.readouterr().err.splitlines() == [f"job 4242 ended (FAILED) and has {why.format(what)}"], args
    env.log_pages = [dict(gone)]  # -f: then how it ended, said once
    assert main(["logs", "-f", "4242"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"job 4242: {why.format('output')}", "job 4242 ended: FAILED (exit code 1)"]


def test_logs_read_errors(env, capsys):
    # The server may add "error" when it could not read the file this time: -f warns once and retries.
    env.log_pages = [
        page(0, "", 0) | {"error": "ssh: timeout"},
        page(0, "", 0) | {"error": "ssh: timeout"},
        page(0, "ok\n", 3),
        page(3, "", 3, final=True, state="COMPLETED"),
    ]
    env.jobs[0].update(state="COMPLETED", exit_code=0)
    assert main(["logs", "-f", "4242", "--interval", "0.01"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "ok\n"
    assert captured.err.splitlines() == ["warning: ssh: timeout", "job 4242 ended: COMPLETED (exit code 0)"]
    env.log_pages = [page(0, "", 0) | {"error": "ssh: timeout"}]
    assert main(["logs", "4242"]) == 1
    assert capsys.readouterr().err == "error: ssh: timeout\n"


def test_logs_ctrl_c_exits_130_quietly(env, capsys, monkeypatch):
    env.log_pages = [page(0, "partial\n", 8), page(8, "", 8)]

    def interrupt(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    assert main(["logs", "-f", "4242"]) == 130
    captured = capsys.readouterr()
    assert captured.out == "partial\n" and captured.err == ""


def test_submit_follow(env, tmp_path, capsys):
    f = tmp_path / "t.yaml"
    f.write_text(YAML)
    env.log_pages = [page(0, "done\n", 5, final=True, state="COMPLETED"), page(5, "", 5, final=True, state="COMPLETED")]
    env.jobs[0].update(state="COMPLETED", exit_code=0)
    assert main(["submit", str(f), "-f", "--interval", "0.01"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == 'Submitted job 4242 "train" (PENDING)'
    assert captured.out.endswith("done\n")
    assert "job 4242 ended: COMPLETED (exit code 0)" in captured.err


# --- notebook and sessions ----------------------------------------------------------------------------
def test_notebook_waits_until_running_and_prints_only_the_url(env, capsys):
    url = "https://hub.example.org/user/alice/lab-1/lab?token=abc"
    env.session_states = [
        make_session(state="STARTING", explanation="waiting for 1 GPU"),
        make_session(state="STARTING", explanation="waiting for 1 GPU"),
        make_session(state="RUNNING", url=url),
    ]
    argv = [
        "notebook",
        "--vscode",
        "--gpus",
        "1",
        "--gpu-type",
        "a100",
        "--hours",
        "2",
        "--memory-gb",
        "16",
        "--interval",
        "0.01",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == url + "\n"
    assert "lab-1: STARTING: waiting for 1 GPU" in captured.err
    assert captured.err.count("STARTING") == 1  # only changes are printed
    [post] = env.calls("POST", "/sessions")
    assert post.body == {"ide": "vscode", "gpus": 1, "gpu_type": "a100", "hours": 2, "memory_gb": 16}
    assert type(post.body["hours"]) is int  # whole numbers go as integers (the server types hours as int)
    assert len(env.calls("GET", "/sessions/lab-1")) == 3


def test_notebook_failed(env, capsys):
    env.session_states = [make_session(state="FAILED", message="spawner failed: no such partition")]
    assert main(["notebook", "--interval", "0.01"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "spawner failed: no such partition" in captured.err
    assert env.calls("POST", "/sessions")[0].body == {"ide": "lab"}


def test_notebook_bills_the_team_asked_for(env, capsys):
    env.session_states = [make_session(state="RUNNING", url="https://hub/x", account="nlp")]
    assert main(["notebook", "--account", "nlp", "--interval", "0.01"]) == 0
    assert env.calls("POST", "/sessions")[0].body == {"ide": "lab", "account": "nlp"}


def test_notebook_runs_on_the_cluster_asked_for_and_prints_the_portals_refusal_of_another(env, capsys):
    env.session_states = [make_session(state="RUNNING", url="https://hub/x", cluster="cluster2")]
    assert main(["notebook", "--cluster", "cluster2", "--interval", "0.01"]) == 0
    assert env.calls("POST", "/sessions")[0].body == {"ide": "lab", "cluster": "cluster2"}
    assert capsys.readouterr().out == "https://hub/x\n"
    refused = "There is no cluster called 'nope'. Choose one of: cluster1, cluster2 (the default is cluster1)."
    env.script("POST", "/sessions", (400, {"detail": "The session cannot be started; see errors.", "errors": [{"field": "cluster", "message": refused, "line": None}]}))  # fmt: skip
    assert main(["notebook", "--cluster", "nope", "--interval", "0.01"]) == 1
    assert f"  cluster: {refused}" in capsys.readouterr().err.splitlines()


def test_notebook_prints_the_portals_refusal_of_someone_in_no_team(env, capsys):
    no_team = "You are not in any team (Slurm account), so sessions cannot be billed to one. Ask your team lead to add you."
    detail = "The session cannot be started; see errors."
    env.script("POST", "/sessions", (400, {"detail": detail, "errors": [{"field": "account", "message": no_team, "line": None}]}))
    assert main(["notebook", "--interval", "0.01"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"error: {detail}", f"  account: {no_team}"]
    assert env.calls("GET", "/sessions/lab-1") == []  # nothing to wait for


def test_notebook_timeout_says_how_to_stop(env, capsys):
    env.session_states = [make_session(state="REQUESTED", explanation="2nd in line")]
    assert main(["notebook", "--interval", "0.01", "--timeout", "0.1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "still REQUESTED" in captured.err and "gpuportal sessions stop lab-1" in captured.err


def test_notebook_no_wait(env, capsys):
    assert main(["notebook", "--no-wait", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "REQUESTED"
    assert env.calls("GET", "/sessions/lab-1") == []


def test_sessions_ls_and_stop(env, capsys):
    assert main(["sessions"]) == 0
    assert capsys.readouterr().out == "No sessions.\n"
    env.session_states = [make_session(state="RUNNING", url="https://hub/x")]
    assert main(["sessions", "ls"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "IDE", "STATE", "PARTITION", "GPUS", "LIMIT", "URL/NOTE"]
    assert out[1].split() == ["lab-1", "lab", "RUNNING", "gpu", "1", "a100", "2:00:00", "https://hub/x"]
    assert main(["sessions", "stop", "lab-1"]) == 0
    assert capsys.readouterr().out == "Stopping session lab-1 (STOPPED)\n"
    assert env.requests[-1].method == "DELETE" and env.requests[-1].path == "/sessions/lab-1"


def test_sessions_kinds_is_the_apis_list(env, capsys):
    assert main(["sessions", "kinds"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["KIND", "LABEL", "AVAILABLE", "IMAGES", "NOTE"]
    assert out[1].split() == ["lab", "JupyterLab", "yes", "debian12-sklearn", "default"]
    assert out[2].split()[:5] == ["vscode", "VS", "Code", "no", "-"] and "code-server is not installed" in out[2]
    assert main(["--json", "sessions", "kinds"]) == 0
    assert json.loads(capsys.readouterr().out) == env.session_kinds


def test_notebook_kind_is_the_apis_default_or_the_one_asked_for(env, capsys):
    env.session_kinds = {
        "items": [
            {"name": "lab", "label": "JupyterLab", "available": True, "note": ""},
            {"name": "emacs", "label": "Emacs", "available": True, "note": ""},
        ],
        "count": 2,
        "default": "emacs",
    }
    assert main(["notebook", "--no-wait"]) == 0
    assert env.calls("POST", "/sessions")[-1].body == {"ide": "emacs"}
    assert len(env.calls("GET", "/sessions/kinds")) == 1
    assert main(["notebook", "--no-wait", "--kind", "lab"]) == 0
    assert env.calls("POST", "/sessions")[-1].body == {"ide": "lab"}
    assert len(env.calls("GET", "/sessions/kinds")) == 1  # a kind given is not looked up: the portal checks it
    # A site image for the session's server: sent by name, checked by the portal.
    assert main(["notebook", "--no-wait", "--kind", "lab", "--image", "debian12-sklearn"]) == 0
    assert env.calls("POST", "/sessions")[-1].body == {"ide": "lab", "image": "debian12-sklearn"}
    capsys.readouterr()


# --- profiles ---------------------------------------------------------------------------------------
def test_profiles(env, tmp_path, capsys):
    assert main(["profiles", "ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["ID", "NAME", "OWNER"]
    assert lines[2].split()[:5] == ["7", "shared-bert", "bob", "vision", "4"]
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    assert main(["profiles", "push", str(f), "--share", "vision"]) == 0
    assert env.calls("POST", "/profiles")[0].body == {"yaml": YAML, "team": "vision"}
    assert 'Saved profile 9 "resnet"' in capsys.readouterr().out
    assert main(["profiles", "run", "3", "--set", "gpus=1"]) == 0
    assert env.calls("POST", "/profiles/3/submit")[0].body == {"overrides": {"gpus": 1}}
    assert capsys.readouterr().out.startswith('Submitted job 4300 "resnet"')


def test_console_script_help():
    import subprocess
    import sys

    exe = os.path.join(os.path.dirname(sys.executable), "gpuportal")
    if not os.path.exists(exe):
        pytest.skip("the gpuportal console script is not installed (pip install -e .)")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "notebook" in result.stdout


# --- several clusters ------------------------------------------------------------------------------
CLUSTERS = {
    "items": [
        {
            "name": "cluster1",
            "label": "cluster1",
            "default": True,
            "sessions": True,
            "slurm_version": "22.05.8",
            "partitions": ["interactive", "small", "train"],
            "gpu_types": ["a100", "t4"],
            "freshness": {"age_s": 2.0, "stale": False, "reasons": [], "since": {}, "message": "Updated 2 s ago."},
        },
        {
            "name": "cluster2",
            "label": "cluster2",
            "default": False,
            "sessions": False,
            "slurm_version": "24.11.5",
            "partitions": ["gpu", "small"],
            "gpu_types": ["h100", "l40s"],
            "freshness": {
                "age_s": None,
                "stale": True,
                "reasons": ["cluster-unreachable"],
                "since": {},
                "message": "cluster2 unreachable since 14:05 UTC.",
            },
        },
    ],
    "count": 2,
}


def test_clusters_lists_them_with_their_partitions_and_freshness(env, capsys):
    env.script("GET", "/clusters", (200, CLUSTERS))
    assert main(["clusters"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SLURM", "PARTITIONS", "GPU", "TYPES", "SESSIONS", "NOTE"]
    assert lines[1].split()[:5] == ["cluster1", "(default)", "22.05.8", "interactive,small,train", "a100,t4"]
    assert "cluster2 unreachable since 14:05 UTC." in lines[2] and "24.11.5" in lines[2]


def test_cluster_is_passed_to_submit_ls_show_logs_and_cancel(env, tmp_path, capsys):
    f = tmp_path / "t.yaml"
    f.write_text(YAML)
    assert main(["submit", str(f), "--cluster", "cluster2"]) == 0
    assert env.calls("POST", "/jobs")[-1].body["overrides"] == {"cluster": "cluster2"}
    assert main(["ls", "--cluster", "cluster2"]) == 0
    assert env.calls("GET", "/jobs")[-1].query == {"scope": "active", "cluster": "cluster2"}
    for argv in (["show", "4242"], ["cancel", "4242"], ["logs", "4242"]):
        assert main([*argv, "--cluster", "cluster2"]) == 0, argv
    assert [r.query.get("cluster") for r in env.requests if r.path.startswith("/jobs/4242")][-3:] == ["cluster2"] * 3
    capsys.readouterr()


# --- hold and release ------------------------------------------------------------------------------
def test_hold_and_release(env, capsys):
    assert main(["hold", "4242"]) == 0
    assert (
        capsys.readouterr().out
        == 'Holding 4242 "train": it will not start until released. Release with `gpuportal release 4242`.\n'
    )
    assert main(["release", "4242", "--cluster", "cluster2"]) == 0
    assert capsys.readouterr().out == 'Releasing 4242 "train": it starts when Slurm can run it.\n'
    assert [(r.method, r.path, r.query) for r in env.requests] == [
        ("POST", "/jobs/4242/hold", {}),
        ("POST", "/jobs/4242/release", {"cluster": "cluster2"}),
    ]


def test_hold_and_release_print_the_portals_message(env, capsys):
    """The answer's ``message`` (an array whose tasks are partly running) is printed as the portal wrote it."""
    held = "Holding 2 pending tasks (3-4) of “sweep”: they will not start until you release them. The 1 running task (2) goes on."
    env.script("POST", "/jobs/4242/hold", (202, {"id": 4242, "name": "sweep", "state": "RUNNING", "message": held}))
    assert main(["hold", "4242"]) == 0
    assert capsys.readouterr().out == f"{held} Release with `gpuportal release 4242`.\n"
    released = "Releasing 2 held tasks (3-4) of “sweep”: they start when Slurm can run them. The 1 running task (2) goes on."
    env.script("POST", "/jobs/4242/release", (202, {"id": 4242, "name": "sweep", "state": "RUNNING", "message": released}))
    assert main(["release", "4242"]) == 0
    assert capsys.readouterr().out == f"{released}\n"


def test_hold_prints_the_portals_refusal(env, capsys):
    detail = "Only a pending job can be held: it is running, not waiting to start; cancel it if it should stop."
    env.script("POST", "/jobs/4242/hold", (400, {"detail": detail, "errors": [{"field": "job", "message": detail}]}))
    assert main(["hold", "4242"]) == 1
    assert capsys.readouterr().err == f"error: {detail}\n"  # once: the field error is the same sentence


def test_hold_of_another_users_job_is_not_found(env, capsys):
    assert main(["release", "999999"]) == 1
    assert capsys.readouterr().err == "error: Not found.\n"
    assert env.requests[-1].path == "/jobs/999999/release"


def test_hold_json_prints_the_job(env, capsys):
    assert main(["hold", "4242", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == 4242


def test_ls_follows_every_page_and_n_stops_early(env, capsys):
    """GET /jobs is paged; ls reads page after page until next_cursor is null."""
    pages = [
        (
            200,
            {
                "items": [make_job(id=1, slurm_ref="101", name="p1-a"), make_job(id=2, slurm_ref="102", name="p1-b")],
                "count": 2,
                "next_cursor": "c-2",
            },
        ),
        (200, {"items": [make_job(id=3, slurm_ref="103", name="p2-a")], "count": 1, "next_cursor": "c-3"}),
        (200, {"items": [make_job(id=4, slurm_ref="104", name="p3-a")], "count": 1, "next_cursor": None}),
    ]
    env.script("GET", "/jobs", *pages)
    assert main(["ls", "--all"]) == 0
    names = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == ["p1-a", "p1-b", "p2-a", "p3-a"]
    assert [r.query.get("cursor") for r in env.calls("GET", "/jobs")] == [None, "c-2", "c-3"]

    env.requests.clear()
    env.script("GET", "/jobs", *pages)
    assert main(["ls", "--all", "-n", "2"]) == 0
    captured = capsys.readouterr()
    assert [line.split()[1] for line in captured.out.splitlines()[1:]] == ["p1-a", "p1-b"]
    assert "the newest 2 jobs; more match" in captured.err
    assert len(env.calls("GET", "/jobs")) == 1  # no page read past what was asked for
    assert main(["ls", "-n", "0"]) == 2 and "-n/--limit takes a number of jobs, 1 or more" in capsys.readouterr().err


def test_submit_prints_the_portals_warning_on_stderr(env, tmp_path, capsys, monkeypatch):
    """POST /jobs answers ``warnings`` (a maintenance reservation in the way); the CLI says
    them on stderr, also after asking again for the Slurm id (GET /jobs/{key} has none)."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    f = tmp_path / "train.yaml"
    f.write_text(YAML)
    warning = "This job cannot start before 2026-12-03 12:00 UTC because it would run into maintenance"
    submitting = {**make_job(id=None, state="SUBMITTING"), "warnings": [warning]}
    env.script("POST", "/jobs", (201, submitting))
    env.script("GET", f"/jobs/{submitting['key']}", (200, make_job(id=4242, state="PENDING")))
    assert main(["submit", str(f)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"warning: {warning}\n" and captured.out.startswith('Submitted job 4242 "train" (PENDING)')
    env.script("POST", "/jobs", (201, submitting))
    env.script("GET", f"/jobs/{submitting['key']}", (200, make_job(id=4242, state="PENDING")))
    assert main(["--json", "submit", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == [warning]


def test_show_prints_a_pending_jobs_priority_in_words(env, capsys):
    text = (
        "Your job's priority is 4,210: 3,000 from your team's fair share, 900 from waiting 9 h, 310 from the partition. "
        "2 jobs ahead of it in gpu have higher priority: both from team nlp."
    )
    env.jobs[0]["priority"] = {"total": 4210, "partition": "gpu", "parts": [], "ahead": 2, "text": text}
    assert main(["show", KEY_1]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("priority:") and line.endswith(f" {text}") for line in lines), lines


def _parsers(parser):
    """``parser`` and every (sub)command's parser below it."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_commands_help_prints(capsys):
    """Each command's --help is argparse's text, never a traceback: a help string is a %-format
    (a literal % must be %%: ``123_[1-50%5]`` in the REF help once broke show, cancel, hold, release
    and logs --help)."""
    from gpuportal.cli import build_parser

    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10
    for parser in parsers:
        assert parser.format_help().startswith("usage: "), parser.prog
    assert main(["cancel", "--help"]) == 0
    assert "123_[1-50%5]" in capsys.readouterr().out


def test_cancel_prints_the_portals_message_when_its_answer_has_one(env, capsys):
    """The portal's cancel answer says what was sent, or why nothing was (an unknown state: not ended,
    yet nothing sent); the CLI prints it instead of guessing "Cancelling"."""
    said = "Nothing was sent to Slurm: the portal does not know whether job 4242 “train” still runs (state: Status unknown)."
    env.jobs[0].update(state="UNKNOWN", final=False, message=said)
    assert main(["cancel", "4242"]) == 0
    assert capsys.readouterr().out == said + "\n"


def test_a_401_that_says_why_and_where_gets_only_the_next_step_as_its_hint(env, monkeypatch, capsys):
    """The portal's 401 says why the token was refused and the Tokens page's address: the hint does
    not say it again, only what to do with the new token."""
    detail = f"This token (“laptop”, gpp_3fK9aQ2x…) expired on 2026-12-03 09:30 UTC: create a new one on the Tokens page ({env.url}/account/tokens/)."
    env.script("GET", "/jobs", (401, json.dumps({"detail": detail, "errors": []})))
    assert main(["ls"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {detail}",
        "hint: then give the new token to `gpuportal login` (or GPUPORTAL_TOKEN)",
    ]
