"""The SSH transport against the real portal sshd (127.0.0.1:2222) of the local cluster."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko
import pytest
from django.conf import settings

from slurm import SlurmError, SlurmGateway, SlurmTimeout, SlurmUnreachable
from slurm.gateway import build_transport
from slurm.transports.ssh import GCM_CIPHERS, SSHTransport, _gcm_first
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def transport(**overrides) -> SSHTransport:
    """An SSH transport from the settings, with ``PORTAL_SLURM_GATEWAY`` keys overridden."""
    return build_transport({**settings.PORTAL_SLURM_GATEWAY, "ssh_connect_timeout": 5.0, **overrides})


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


@pytest.mark.parametrize("stdin", [None, b"x" * 100, os.urandom(3 * 1024 * 1024)], ids=["no-stdin", "100-bytes", "3-MiB"])
def test_commands_that_end_before_their_stdin_is_written_never_drop_the_connection(stdin):
    """400 commands on eight threads, each ending without reading its stdin (``true``; a 3 MiB
    stdin outlasts the send window): a write that reached sshd after the channel's CLOSE made sshd
    drop the whole connection ("ieof packet referred to nonexistent channel"), and the commands
    running on it ended with no exit status (-1). Before the writes were ordered with the CLOSE
    (slurm/transports/ssh_writes.py) 3 to 29 of 400 failed and the connection was opened 2 to 5
    times. Every command now answers 0, on one connection."""
    count = 400 if stdin is None or len(stdin) < 1024 else 80
    t = transport(ssh_max_channels=8)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(lambda _: t.execute(["true"], stdin=stdin, timeout=60).returncode, range(count)))
        assert codes == [0] * count, f"{count - codes.count(0)} of {count} commands failed: {sorted(set(codes))}"
        assert t.connections_opened == 1
    finally:
        t.close()


def test_stdin_is_written_whole_while_other_commands_end_beside_it():
    """A 3 MiB stdin on one channel arrives whole (``wc -c``) while ``head -c 10`` on the channels
    beside it stops reading theirs and ends: the ordered writes keep every byte and the EOF."""
    data = os.urandom(3 * 1024 * 1024)
    t = transport(ssh_max_channels=8)

    def one(i: int):
        argv = ["wc", "-c"] if i % 2 else ["head", "-c", "10"]
        result = t.execute(argv, stdin=data, timeout=60)
        return result.returncode, result.out.strip() if i % 2 else len(result.stdout)

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = set(pool.map(one, range(40)))
        assert results == {(0, str(len(data))), (0, 10)}
        assert t.connections_opened == 1
    finally:
        t.close()


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
    conf = settings.PORTAL_SLURM_GATEWAY
    other_pub = open(conf["ssh_key_file"] + ".pub").read().split()  # some other ed25519 key
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{conf['ssh_host']}]:{conf['ssh_port']} {other_pub[0]} {other_pub[1]}\n")
    with pytest.raises(SlurmUnreachable, match="CHANGED"):
        SlurmGateway(transport(ssh_known_hosts=str(wrong))).run(["true"])


def test_aes_gcm_is_offered_first_and_chosen_by_the_lab_sshd(gateway):
    """AES-GCM first (no HMAC pass over every byte received), paramiko's other ciphers after it."""
    gateway.run(["true"])
    negotiated = gateway.transport._client.get_transport()
    assert (negotiated.local_cipher, negotiated.remote_cipher) == ("aes128-gcm@openssh.com",) * 2
    with socket.socket() as sock:
        offered = _gcm_first(sock).get_security_options().ciphers
    rest = [c for c in paramiko.Transport._preferred_ciphers if c not in GCM_CIPHERS]
    assert list(offered) == [*GCM_CIPHERS, *rest], offered


def test_without_aes_gcm_the_next_cipher_is_chosen():
    """A server (here: a client told not to offer it) without AES-GCM gets paramiko's usual first choice."""
    with socket.create_connection(
        (settings.PORTAL_SLURM_GATEWAY["ssh_host"], int(settings.PORTAL_SLURM_GATEWAY["ssh_port"])), timeout=5
    ) as sock:
        t = _gcm_first(sock, disabled_algorithms={"ciphers": list(GCM_CIPHERS)})
        try:
            t.start_client(timeout=5)
            assert (t.local_cipher, t.remote_cipher) == ("aes128-ctr", "aes128-ctr")
        finally:
            t.close()


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


def test_a_refused_channel_leaves_the_other_commands_running(gateway, monkeypatch):
    """sshd refusing one channel on a live connection (the pooled connection's next channel open
    raises paramiko's ChannelException, as sshd's "open failed" answer does) while another command
    runs on it: the refused command runs on the second attempt on the same connection, and the
    running one finishes (closing the connection to reconnect would cut it off mid-command)."""
    gateway.run(["true"])
    live = gateway.transport._client.get_transport()
    shared = Path(tempfile.mkdtemp(prefix="ssh-refusal-"))  # pytest's tmp_path is not the portal user's to enter
    shared.chmod(0o777)
    started, go = shared / "started", shared / "go"
    script = f"touch {started}; while [ ! -e {go} ]; do sleep 0.1; done; echo finished"
    refusals, real_open = [paramiko.ChannelException(1, "open failed")], live.open_session

    def open_session(**kwargs):
        if refusals:
            raise refusals.pop()
        return real_open(**kwargs)

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(gateway.run, ["sh", "-c", script])
        wait_for("the first command to start", started.exists, timeout=20)
        monkeypatch.setattr(live, "open_session", open_session)
        assert gateway.run(["echo", "second"]).out == "second\n"
        assert not refusals  # the refusal happened
        go.touch()
        assert running.result(timeout=30).out == "finished\n"
    shutil.rmtree(shared, ignore_errors=True)
    assert gateway.transport.connections_opened == 1


def test_failed_command_raises_slurm_error(gateway):
    with pytest.raises(SlurmError) as info:
        gateway.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert info.value.returncode == 3 and "oops" in info.value.stderr


# --- known_hosts as OpenSSH reads it (slurm/transports/known_hosts.py), against the real sshd ---------------------
def host_key_line(pattern: str) -> str:
    kind, blob = open("/etc/ssh/ssh_host_ed25519_key.pub").read().split()[:2]
    return f"{pattern} {kind} {blob}"


def other_key_line(pattern: str, tmp_path, name: str = "other") -> str:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    return f"{pattern} {kind} {blob}"


def host_pattern() -> str:
    conf = settings.PORTAL_SLURM_GATEWAY
    return f"[{conf['ssh_host']}]:{conf['ssh_port']}"


@pytest.mark.parametrize("order", ["right key first", "right key second"])
def test_two_listed_keys_for_the_host_either_order_connects(tmp_path, order):
    """Round-robin login nodes or a key being rotated: two ed25519 keys for one host (OpenSSH connects)."""
    lines = [host_key_line(host_pattern()), other_key_line(host_pattern(), tmp_path)]
    if order == "right key second":
        lines.reverse()
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    before = known.read_text()
    gw = SlurmGateway(transport(ssh_known_hosts=str(known)))
    try:
        assert gw.run(["echo", "ok"]).out == "ok\n"
    finally:
        gw.close()
    assert known.read_text() == before  # never written
    ssh = subprocess.run(
        [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={known}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=yes",
            "-p",
            str(settings.PORTAL_SLURM_GATEWAY["ssh_port"]),
            "-i",
            settings.PORTAL_SLURM_GATEWAY["ssh_key_file"],
            f"{settings.PORTAL_SLURM_GATEWAY['ssh_user']}@{settings.PORTAL_SLURM_GATEWAY['ssh_host']}",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ssh.returncode == 0, ssh.stderr  # OpenSSH agrees with the same file


def test_hashed_host_name_and_other_key_types_connect(tmp_path):
    known = tmp_path / "known_hosts"
    rsa = tmp_path / "rsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa)], check=True)
    rsa_line = f"{host_pattern()} " + " ".join(rsa.with_suffix(".pub").read_text().split()[:2])
    known.write_text(rsa_line + "\n" + host_key_line(host_pattern()) + "\n")
    subprocess.run(
        ["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True
    )  # hash the names, as many sites do
    assert host_pattern() not in known.read_text() and "|1|" in known.read_text()
    gw = SlurmGateway(transport(ssh_known_hosts=str(known)))
    try:
        assert gw.run(["true"]).returncode == 0
    finally:
        gw.close()


def test_revoked_key_is_refused_even_when_listed(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(host_key_line(host_pattern()) + "\n@revoked " + host_key_line("*") + "\n")
    with pytest.raises(SlurmUnreachable, match="REVOKED") as info:
        SlurmGateway(transport(ssh_known_hosts=str(known))).run(["true"])
    assert host_key_fingerprint() in info.value.message and "line 2" in info.value.message


def test_changed_key_refusal_names_offered_and_expected_keys(tmp_path):
    known = tmp_path / "known_hosts"
    first, second = other_key_line(host_pattern(), tmp_path, "a"), other_key_line(host_pattern(), tmp_path, "b")
    known.write_text(first + "\n" + second + "\n")
    with pytest.raises(SlurmUnreachable, match="CHANGED") as info:
        SlurmGateway(transport(ssh_known_hosts=str(known))).run(["true"])
    message = info.value.message
    assert f"offered ssh-ed25519 {host_key_fingerprint()}" in message and "(line 1)" in message and "(line 2)" in message


def test_cert_authority_only_is_refused_with_a_clear_sentence(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("@cert-authority " + other_key_line("*", tmp_path) + "\n")
    with pytest.raises(SlurmUnreachable, match="certificate authority") as info:
        SlurmGateway(transport(ssh_known_hosts=str(known))).run(["true"])
    assert "list the host's own public key" in info.value.message


def test_accounting_with_nothing_to_report_is_an_empty_list_on_the_real_cluster(gateway):
    """sacct --json for an id accounting never saw: the real 22.05 answer reads as no jobs, not an error."""
    from slurm.adapters import adapter_for

    doc = gateway.run_json(["sacct", "--json", "-j", "99999999"], as_user="alice")
    assert adapter_for(doc).parse_sacct_jobs(doc) == []
