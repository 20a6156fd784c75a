"""The sudo rule is a second wall behind the portal's system-account check: on the real host cluster,
with root put in the users group (what staff would do if a page told them to), the portal's service
user still cannot run a command as root through the gateway's ``sudo -n -u``, and the portal's own
lookup refuses root by its uid even with the deny list emptied. The group is restored in ``finally``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from accounts.claims import LoginRefused
from accounts.directory import cluster_user_lookup, parse_uid_min
from accounts.services import login_check
from slurm import get_gateway

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

SQUEUE = ["squeue", "--noheader", "--me", "--format=%i"]


def members(group: str) -> list[str]:
    out = subprocess.run(["getent", "group", group], capture_output=True, text=True, check=True).stdout
    return [m for m in out.strip().split(":")[3].split(",") if m]


@pytest.fixture
def root_in_users_group():
    """root is a member of the users group for the test only (gpasswd -a; removed again in finally,
    unless it was a member before)."""
    group = settings.PORTAL_SLURM_GATEWAY["users_group"]
    before = "root" in members(group)
    subprocess.run(["gpasswd", "-a", "root", group], capture_output=True, check=True)
    try:
        assert "slurmusers" in subprocess.run(["id", "-nG", "root"], capture_output=True, text=True).stdout.split()
        yield group
    finally:
        if not before:
            subprocess.run(["gpasswd", "-d", "root", group], capture_output=True, check=True)
    assert ("root" in members(group)) == before, "root's membership of the users group was not restored"


def test_the_service_user_cannot_run_a_command_as_root_even_in_the_users_group(root_in_users_group):
    gateway = get_gateway()
    as_alice = gateway.run(SQUEUE, as_user="alice", check=False)  # the rule works for a person
    assert as_alice.returncode == 0, as_alice.err
    as_root = gateway.run(SQUEUE, as_user="root", check=False)
    assert as_root.returncode != 0 and "a password is required" in as_root.err, (as_root.returncode, as_root.err)
    as_slurm = gateway.run(SQUEUE, as_user="slurm", check=False)  # not in the group: refused as before
    assert as_slurm.returncode != 0


def test_the_portal_refuses_root_by_its_uid_from_the_real_id(root_in_users_group, settings):
    settings.PORTAL_ACCOUNT_DENY = []  # only the uid from the submit host's id is left to catch it
    settings.PORTAL_ACCOUNT_UID_MIN = None  # the minimum is UID_MIN of the submit host's own login.defs
    with pytest.raises(LoginRefused) as refused:
        login_check(claims={"iss": "https://idp.example.org", "sub": "s-x", "posix_username": "root"}, existing=None)
    assert refused.value.code == "system_account"
    assert "(uid 0, below 1000," in refused.value.message and "to the group" not in refused.value.hint
    # The minimum came from the submit host's login.defs (the lab's submit host is this machine).
    host_uid_min = parse_uid_min(Path("/etc/login.defs").read_text())
    assert host_uid_min == 1000
    daemon = cluster_user_lookup("daemon")
    assert (daemon.uid, daemon.uid_min) == (1, host_uid_min)
