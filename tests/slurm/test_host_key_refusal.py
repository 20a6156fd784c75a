"""The SSH transport's refusal of an unknown host key names the key as OpenSSH does (paramiko's own
fingerprint), without a real sshd (the refusal against the real one: test_ssh_transport.py)."""
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
