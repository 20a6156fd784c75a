"""Checking the submit host's key against an OpenSSH ``known_hosts`` file, as OpenSSH does.

paramiko's own ``HostKeys`` keeps one key per host and type (a second ed25519 line for the same host
replaces the first), skips ``@revoked`` and ``@cert-authority`` lines, and so refused a valid key
listed second (round-robin login nodes, a key being rotated). Here:

- every line that names the host is kept, in any order; a key offered by the host is accepted when
  any plain line for that host lists exactly that key;
- host names may be plain, ``[host]:port`` (for a port other than 22), hashed (``|1|salt|hash``, as
  ``ssh-keygen -H`` writes them), patterns with ``*`` and ``?``, and negated (``!pattern``);
- an ``@revoked`` line for the host (or for ``*``) refuses that key wherever else it is listed;
- ``@cert-authority`` lines are understood but not supported (paramiko does not check host
  certificates): when only those name the host, the refusal says to list the host's key itself;
- nothing is ever written to the file.

A refusal (:class:`HostKeyRefused`) names the key type and SHA256 fingerprint offered and the ones
expected, with their line numbers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass

SSH_PORT = 22
MARKERS = ("@revoked", "@cert-authority")


class HostKeyRefused(Exception):
    """The host's key is not accepted; the message says which key was offered, which were expected
    (file and line) and what to do."""


@dataclass(frozen=True)
class KnownHost:
    """One line of a known_hosts file: ``marker`` is ``""``, ``"@revoked"`` or ``"@cert-authority"``;
    ``patterns`` the comma-separated host patterns; ``key_type`` (e.g. ``ssh-ed25519``) and ``blob``
    the public key's wire bytes; ``line`` 1-based."""

    marker: str
    patterns: tuple[str, ...]
    key_type: str
    blob: bytes
    line: int

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.blob)


def fingerprint_of(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a public key's wire bytes (``SHA256:`` + unpadded base64): the same
    text as paramiko's ``PKey.fingerprint``, also for key types paramiko cannot load (``sk-ssh-ed25519@...``)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_known_hosts(text: str) -> list[KnownHost]:
    """Every usable line of a known_hosts file. Blank lines, comments and lines that are not
    ``[marker] patterns keytype base64-key [comment]`` are skipped, as OpenSSH skips them."""
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = ""
        if fields[0].startswith("@"):
            marker, fields = fields[0], fields[1:]
            if marker not in MARKERS:
                continue
        if len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (binascii.Error, ValueError):
            continue
        entries.append(KnownHost(marker, tuple(p for p in fields[0].split(",") if p), fields[1], blob, number))
    return entries


def host_name(host: str, port: int) -> str:
    """How known_hosts names a host: ``host`` on port 22, ``[host]:port`` otherwise."""
    return host if port == SSH_PORT else f"[{host}]:{port}"


def _hashed_matches(pattern: str, name: str) -> bool:
    """``|1|<base64 salt>|<base64 HMAC-SHA1 of the name>``, as ``ssh-keygen -H`` writes it."""
    parts = pattern.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt, expected = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), expected)


def _wildcard(pattern: str) -> re.Pattern:
    """OpenSSH's host pattern: ``*`` and ``?`` are wildcards; everything else (``[``, ``]``, ``.``)
    is literal; case does not matter."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()))


def host_matches(patterns: tuple[str, ...], host: str, port: int) -> bool:
    """OpenSSH's rule: the name matches one pattern and no negated pattern (``!pattern``) matches."""
    name = host_name(host, port)
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        hit = (
            _hashed_matches(pattern, name) if pattern.startswith("|") else _wildcard(pattern).fullmatch(name.lower()) is not None
        )
        if hit and negated:
            return False
        matched = matched or hit
    return matched


def expected_key_types(entries: list[KnownHost], host: str, port: int) -> set[str]:
    """The key types listed (not revoked) for the host: the ones the portal asks the host for."""
    return {e.key_type for e in entries if not e.marker and host_matches(e.patterns, host, port)}


def check_host_key(entries: list[KnownHost], host: str, port: int, key_type: str, blob: bytes, *, source: str) -> None:
    """Accept the key ``key_type``/``blob`` the host offered, or raise :class:`HostKeyRefused`.

    ``source`` names the file in messages. Accepted: a plain line for the host with exactly this
    key, and no ``@revoked`` line for the host (or ``*``) with it."""
    offered = f"{key_type} {fingerprint_of(blob)}"
    for e in entries:
        if e.marker == "@revoked" and e.blob == blob and (host_matches(e.patterns, host, port) or "*" in e.patterns):
            raise HostKeyRefused(
                f"host key of {host_name(host, port)} is REVOKED in {source} (line {e.line}): {offered}. Refusing to connect; "
                "the cluster staff must give the host a new key, then list it in that file."
            )
    plain = [e for e in entries if not e.marker and host_matches(e.patterns, host, port)]
    if any(e.key_type == key_type and e.blob == blob for e in plain):
        return
    if not plain:
        if any(e.marker == "@cert-authority" and host_matches(e.patterns, host, port) for e in entries):
            raise HostKeyRefused(
                f"{source} trusts a certificate authority for {host_name(host, port)}, which the portal does not support "
                f"(host certificates are not checked). The host offered {offered}; list the host's own public key in that file."
            )
        raise HostKeyRefused(
            f"host key of {host_name(host, port)} is not known: {offered}. If that is the submit host's key, add it to "
            f"{source} (for example from the host's /etc/ssh/ssh_host_*_key.pub); the portal never adds keys by itself."
        )
    expected = "; ".join(f"{e.key_type} {e.fingerprint} (line {e.line})" for e in plain)
    raise HostKeyRefused(
        f"host key of {host_name(host, port)} CHANGED: offered {offered}, expected one of: {expected} (from {source}). "
        "Refusing to connect."
    )
