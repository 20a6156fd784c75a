"""Reading known_hosts as OpenSSH does (slurm/transports/known_hosts.py): patterns, ports, hashed names,
negation, markers. The real sshd is in tests/slurm/test_ssh_transport.py."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from slurm.transports.known_hosts import HostKeyRefused, check_host_key, expected_key_types, host_matches, parse_known_hosts

A = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519key-a").decode()
B = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519key-b").decode()


def hashed(name: str, salt: bytes = b"0123456789abcdefghij") -> str:
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


@pytest.mark.parametrize(
    "patterns, host, port, expected",
    [
        (("login.example.org",), "login.example.org", 22, True),
        (("login.example.org",), "login.example.org", 2222, False),  # another port is another name
        (("[login.example.org]:2222",), "login.example.org", 2222, True),
        (("[127.0.0.1]:2222",), "127.0.0.1", 2222, True),  # brackets are literal, not a character class
        (("*.example.org",), "login.example.org", 22, True),
        (("login?.example.org",), "login2.example.org", 22, True),
        (("*.example.org", "!bad.example.org"), "bad.example.org", 22, False),
        (("LOGIN.example.org",), "login.example.org", 22, True),
        ((hashed("[127.0.0.1]:2222"),), "127.0.0.1", 2222, True),
        ((hashed("[127.0.0.1]:2222"),), "127.0.0.2", 2222, False),
        (("|1|bm90IGJhc2U2NA|x",), "127.0.0.1", 22, False),  # a broken hash never matches
    ],
)
def test_host_patterns(patterns, host, port, expected):
    assert host_matches(patterns, host, port) is expected


def test_lines_that_are_not_entries_are_skipped():
    entries = parse_known_hosts(
        f"# comment\n\n@bogus h ssh-ed25519 {A}\nh ssh-ed25519 not-base64!\nh ssh-ed25519\nh ssh-ed25519 {A} comment\n"
    )
    assert [(e.line, e.patterns) for e in entries] == [(6, ("h",))]


def test_any_listed_key_is_accepted_in_any_order():
    entries = parse_known_hosts(f"h ssh-ed25519 {A}\nh ssh-ed25519 {B}\n")
    for blob in (A, B):
        check_host_key(entries, "h", 22, "ssh-ed25519", base64.b64decode(blob), source="kh")
    assert expected_key_types(entries, "h", 22) == {"ssh-ed25519"}


def test_a_key_listed_for_another_host_is_not_accepted():
    entries = parse_known_hosts(f"other ssh-ed25519 {A}\nh ssh-ed25519 {B}\n")
    with pytest.raises(HostKeyRefused, match="CHANGED"):
        check_host_key(entries, "h", 22, "ssh-ed25519", base64.b64decode(A), source="kh")


def test_revoked_wins_over_a_plain_line():
    entries = parse_known_hosts(f"h ssh-ed25519 {A}\n@revoked h ssh-ed25519 {A}\n")
    with pytest.raises(HostKeyRefused, match="REVOKED"):
        check_host_key(entries, "h", 22, "ssh-ed25519", base64.b64decode(A), source="kh")
    assert expected_key_types(entries, "h", 22) == {"ssh-ed25519"}


def test_unknown_host_names_the_offered_key_and_the_file():
    with pytest.raises(HostKeyRefused) as refused:
        check_host_key([], "h", 22, "ssh-ed25519", base64.b64decode(A), source="/etc/kh")
    assert "not known: ssh-ed25519 SHA256:" in str(refused.value) and "/etc/kh" in str(refused.value)
