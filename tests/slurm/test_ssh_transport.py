"""The SSH transport against the real portal sshd (127.0.0.1:2222) of the local cluster."""
from __future__ import annotations

import base64
import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings

from slurm import SlurmError, SlurmGateway, SlurmTimeout, SlurmUnreachable
from slurm.gateway import build_transport
from slurm.ssh import SSHTransport

pytestmark = pytest.mark.integration


def transport(**overrides) -> SSHTransport:
    """An SSH transport from the settings, with ``SLURM_GATEWAY`` keys overridden."""
    return build_transport({**settings.SLURM_GATEWAY, "ssh_connect_timeout": 5.0, **overrides})


@pytest.fixture
def gateway():
    gw = SlurmGateway(transport(), command_timeout=30)
    yield gw
    gw.close()


def host_key_fingerprint() -> str:
    """SHA256 fingerprint of the sshd's ed25519 host key, computed from the public key file."""
    blob = base64.b64decode(open("/etc/ssh/ssh_host_ed25519_key.pub").read().split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def test_runs_a_command_and_returns_exit_code(gateway):
    assert gateway.run(["echo", "hello"]).out == "hello\n"
    assert gateway.run(["false"], check=False).returncode == 1


def test_arguments_are_never_interpreted_by_the_remote_shell(gateway, tmp_path):
    target = "/tmp/portal-test-injection-marker"
    if os.path.exists(target):
        os.unlink(target)
    out = gateway.run(["echo", f"a; touch {target}", "$(id)", "`id`", "'quoted'", "*"]).out
    assert out == f"a; touch {target} $(id) `id` 'quoted' *\n"
    assert not os.path.exists(target)


def test_more_than_2_mib_on_both_streams_does_not_hang(gateway):
    size = 3 * 1024 * 1024
    script = f"head -c {size} /dev/zero; head -c {size} /dev/zero >&2; echo done >&2"
    result = gateway.run(["sh", "-c", script], timeout=60)
    assert len(result.stdout) == size
    assert len(result.stderr) == size + len(b"done\n")


def test_large_stdin_round_trips(gateway):
    payload = os.urandom(1024 * 1024)
    assert gateway.run(["cat"], stdin=payload, timeout=60).stdout == payload


@pytest.mark.parametrize("channels", [20, 4])
def test_twenty_commands_at_once_share_one_pooled_connection(channels):
    """All 20 run over one connection; with fewer channels than commands the rest wait their turn."""
    t = transport(ssh_max_channels=channels)
    gw = SlurmGateway(t)
    try:
        with ThreadPoolExecutor(max_workers=20) as pool:
            results = list(pool.map(lambda i: gw.run(["sh", "-c", f"sleep 0.3; echo {i}"]), range(20)))
        assert [r.out.strip() for r in results] == [str(i) for i in range(20)]
        assert t.connections_opened == 1
    finally:
        gw.close()


def test_unknown_host_key_is_refused_with_its_fingerprint(tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    gw = SlurmGateway(transport(ssh_known_hosts=str(empty)))
    with pytest.raises(SlurmUnreachable) as info:
        gw.run(["true"])
    assert host_key_fingerprint() in info.value.message
    assert "not known" in info.value.message
    assert empty.read_text() == ""  # never added


def test_changed_host_key_is_refused(tmp_path):
    conf = settings.SLURM_GATEWAY
    other_pub = open(conf["ssh_key_file"] + ".pub").read().split()  # some other ed25519 key
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{conf['ssh_host']}]:{conf['ssh_port']} {other_pub[0]} {other_pub[1]}\n")
    with pytest.raises(SlurmUnreachable, match="CHANGED"):
        SlurmGateway(transport(ssh_known_hosts=str(wrong))).run(["true"])


def test_wrong_port_is_unreachable_not_a_hang():
    with pytest.raises(SlurmUnreachable, match="cannot reach sshd"):
        SlurmGateway(transport(ssh_port=1)).run(["true"])


def test_deadline_stops_a_slow_command(gateway):
    started = time.monotonic()
    with pytest.raises(SlurmTimeout):
        gateway.run(["sleep", "20"], timeout=1.0)
    assert time.monotonic() - started < 15  # generous: the point is that it did not wait 20 s


def test_connection_is_reopened_after_it_drops(gateway):
    gateway.run(["true"])
    gateway.transport._client.get_transport().close()  # simulate sshd dropping us
    assert gateway.run(["echo", "back"]).out == "back\n"
    assert gateway.transport.connections_opened == 2


def test_failed_command_raises_slurm_error(gateway):
    with pytest.raises(SlurmError) as info:
        gateway.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert info.value.returncode == 3 and "oops" in info.value.stderr
