"""What the adapters share and what reads a document's version, apart from the adapters themselves
(so that they import it without importing :mod:`slurm.adapters`, which imports them): the poll's
answer :class:`PollReading`, :class:`OtherVersion`, :func:`expect_version`, and which output version
a document is (:func:`document_version`, :func:`version_of`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import SlurmVersionUnknown
from ..records import Node, Partition, QueueJob, Reservation

#: Seconds between two reads of the partitions (they rarely change); a poll in between keeps the last.
PARTITIONS_EVERY = 60.0

#: Slurm release (``major.minor``, zero-padded as Slurm writes it) -> the output version it writes,
#: for the versions there are adapters for (``slurm.adapters.ADAPTERS``); used for documents whose
#: ``meta`` names no plugin.
RELEASE_VERSIONS: dict[str, str] = {"22.05": "v0.0.38", "23.11": "v0.0.40", "24.05": "v0.0.41", "24.11": "v0.0.42"}


@dataclass(frozen=True)
class PollReading:
    """What one poll read, in records: the answer of an adapter's ``poll(gateway, *, previous, now,
    probe)`` (``probe``: the ``sinfo --json`` document already fetched to find the version, or
    ``None``). ``partitions_at``: Unix seconds the partitions were read (kept from ``previous``
    within :data:`PARTITIONS_EVERY`); ``reservations`` are read with them (``scontrol show
    reservation``: the same cadence; ``[]`` when there are none)."""

    slurm_version: str
    output_version: str
    nodes: list[Node]
    partitions: list[Partition]
    partitions_at: float
    jobs: list[QueueJob]
    reservations: list[Reservation] = field(default_factory=list)


class OtherVersion(Exception):
    """Raised by an adapter's ``poll`` when a document names another output version than its own
    (the cluster was upgraded between two polls): ``version`` is that version (an adapter exists for
    it: ``slurm.adapters.adapter_named(version)``), ``document`` is it, ``argv`` the command that
    printed it (the new adapter's ``poll`` takes it as its ``probe`` only when it is
    ``sinfo --json``)."""

    def __init__(self, version: str, document: dict, argv: Sequence[str] = ()):
        self.version, self.document, self.argv = version, document, list(argv)
        super().__init__(f"the document is {version}")


#: ``openapi/dbv0.0.38``, ``data_parser/v0.0.42``, ``data_parser/v0.0.42+complex`` (data_parser's flags
#: after ``+`` change how values are written, not which fields there are) -> ``v0.0.NN``.
_PLUGIN_VERSION = re.compile(r"(?:db)?(v\d+\.\d+\.\d+)(?:\+[A-Za-z_,+-]*)?$")


def document_version(document: dict) -> tuple[str, str]:
    """(plugin version, Slurm release) named in ``document["meta"]``; ``""`` for what it does not
    name. E.g. 22.05.8's ``squeue --json`` gives ``("v0.0.38", "22.05")``."""
    meta = document.get("meta") if isinstance(document, dict) else None
    if not isinstance(meta, dict):
        return "", ""
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), dict) else {}
    plugins = meta.get("plugins") if isinstance(meta.get("plugins"), dict) else {}
    named = str(plugin.get("type") or plugin.get("data_parser") or plugins.get("data_parser") or "")
    match = _PLUGIN_VERSION.search(named)
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    version = slurm.get("version") if isinstance(slurm, dict) else None
    release = ""
    if isinstance(version, dict) and str(version.get("major", "")).isdigit() and str(version.get("minor", "")).isdigit():
        release = f"{int(version['major'])}.{int(version['minor']):02d}"
    return (match.group(1) if match else named), release


def known_versions() -> str:
    """The versions there are adapters for, as the error says them: ``Slurm 22.05 (v0.0.38), 23.11
    (v0.0.40), ...``."""
    return "Slurm " + ", ".join(f"{release} ({version})" for release, version in sorted(RELEASE_VERSIONS.items()))


def version_of(document: dict, *, argv: Sequence[str] = ()) -> str:
    """The output version (``v0.0.42``) whose adapter reads this document: the plugin its ``meta``
    names, else its Slurm release's. ``argv``: the command that printed it, for the error. Raises
    :class:`~slurm.errors.SlurmVersionUnknown` when neither has an adapter, with a sentence naming both
    and the known versions: "Slurm 26.05 output not understood yet: squeue printed JSON of output
    plugin 'v0.0.44' ..."."""
    plugin, release = document_version(document)
    if plugin in RELEASE_VERSIONS.values():
        return plugin
    if not plugin and release in RELEASE_VERSIONS:
        return RELEASE_VERSIONS[release]
    command = (list(argv) or ["Slurm"])[0]
    printed = f"output plugin {plugin!r}" if plugin else "no output plugin version"
    raise SlurmVersionUnknown(
        argv,
        None,
        message=(
            f"{f'Slurm {release}' if release else 'Slurm'} output not understood yet: {command} printed JSON of {printed}"
            f"{'' if release else ' and no Slurm release'}, and the portal reads only {known_versions()}. Nothing was read "
            "from it: this Slurm needs a portal release with an adapter for its version (slurm/adapters/)."
        ),
    )


def expect_version(version: str, document: dict, argv: Sequence[str]) -> dict:
    """``document``, after checking that it is of output ``version`` (the calling adapter's
    ``VERSION``); raises :class:`OtherVersion` (another known version) or
    :class:`SlurmVersionUnknown`."""
    found = version_of(document, argv=argv)
    if found != version:
        raise OtherVersion(found, document, argv)
    return document
