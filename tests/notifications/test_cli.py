"""``gpuportal notifications``: the installed CLI (a process of its own, HTTP only) against the live
portal: the list with the unread mark, ``--unread``, ``--read ID``, ``--read-all``, ``--json``; bob's
token never lists or marks alice's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.tokens import token_create
from notifications.models import Notification, NotificationKind
from notifications.services import notify

pytestmark = pytest.mark.django_db(transaction=True)

GPUPORTAL = str(Path(sys.executable).with_name("gpuportal"))


def run_as(live_server, user, tmp_path):
    raw = token_create(user=user, name="cli", scopes=["read"], days=1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(GPUPORTAL_URL=live_server.url, GPUPORTAL_TOKEN=raw, XDG_CONFIG_HOME=str(tmp_path / user.username))
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

    def cli(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([GPUPORTAL, "notifications", *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    return cli


def test_list_mark_one_and_all_and_only_ones_own(live_server, django_user_model, tmp_path):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
    first = notify(user=alice, kind=NotificationKind.JOB_FAILED, key="k:1", subject="Failed: job 11 (exit code 3)")[0]
    notify(user=alice, kind=NotificationKind.JOB_PENDING, key="k:2", subject="Still pending after 61 min: job 12")
    theirs = notify(user=bob, kind=NotificationKind.JOB_FAILED, key="k:3", subject="bob's job 13")[0]
    cli = run_as(live_server, alice, tmp_path)
    listed = cli().stdout
    assert "Failed: job 11 (exit code 3)" in listed and "job_pending" in listed and "2 unread." in listed
    assert "bob's job" not in listed
    assert cli("--read", str(first.pk)).stdout.strip() == "Marked 1 read."
    unread = json.loads(cli("--unread", "--json").stdout)
    assert unread["unread"] == 1 and [n["key"] for n in unread["items"]] == ["k:2"]
    as_bob = run_as(live_server, bob, tmp_path)
    assert as_bob("--read-all").stdout.strip() == "Marked 1 read."
    assert Notification.objects.filter(user=alice, read_at__isnull=True).count() == 1  # bob's "all" is his
    assert cli("--read-all").stdout.strip() == "Marked 1 read."
    assert "0 unread." in cli().stdout
    theirs.refresh_from_db()
    assert theirs.read_at is not None


def test_a_bad_id_is_refused_by_the_cli_with_why(live_server, django_user_model, tmp_path):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    raw = token_create(user=alice, name="cli", scopes=["read"], days=1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(GPUPORTAL_URL=live_server.url, GPUPORTAL_TOKEN=raw, XDG_CONFIG_HOME=str(tmp_path))
    done = subprocess.run([GPUPORTAL, "notifications", "--read", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "must be 1 or more: '0'" in done.stderr
