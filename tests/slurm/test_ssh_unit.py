"""The SSH transport without a sshd (against the real one: test_ssh_transport.py): the refusal of an
unknown host key names the key as OpenSSH does (paramiko's own fingerprint); a dead pooled connection
is reopened once."""

import base64
import hashlib

import paramiko
import pytest

from slurm import SlurmUnreachable
from slurm.ssh import _KnownHostsPolicy


def test_unknown_host_key_is_refused_with_its_openssh_fingerprint():
    key = paramiko.ECDSAKey.generate()
    expected = "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")  # as ssh-keygen -l
    assert key.fingerprint == expected  # paramiko's own says the same (slurm.known_hosts.fingerprint_of)
    with pytest.raises(SlurmUnreachable) as info:
        _KnownHostsPolicy([], "/etc/portal/known_hosts", 22).missing_host_key(None, "submit.example", key)
    assert f"host key of submit.example is not known: ecdsa-sha2-nistp256 {expected}." in info.value.message
    assert "/etc/portal/known_hosts" in info.value.message


class _Pooled:
    """A pooled paramiko transport whose channel opens fail ``failures`` times."""

    def __init__(self, failures: int):
        self.failures = failures

    def open_session(self, timeout):
        if self.failures:
            self.failures -= 1
            raise paramiko.SSHException("connection dropped")
        return "channel"


@pytest.mark.parametrize("failures, fresh, opened", [(0, [False], True), (1, [False, True], True), (2, [False, True], False)])
def test_a_dead_pooled_connection_is_reopened_once(monkeypatch, failures, fresh, opened):
    """Unit side of test_connection_is_reopened_after_it_drops: tenacity's retry reconnects once."""
    from slurm.ssh import SSHTransport

    ssh = SSHTransport(host="submit.example", port=22, user="portal", key_file="k", known_hosts="kh")
    pooled, asked = _Pooled(failures), []
    monkeypatch.setattr(ssh, "_transport", lambda *, fresh=False: asked.append(fresh) or pooled)
    if opened:
        assert ssh._open_channel(["squeue"], 5) == "channel"
    else:
        with pytest.raises(SlurmUnreachable, match="cannot open an SSH channel: connection dropped"):
            ssh._open_channel(["squeue"], 5)
    assert asked == fresh
