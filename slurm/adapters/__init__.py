"""One adapter per Slurm JSON output version, chosen from the document itself.

An adapter is a module that reads every document shape of its version into the plain records of
:mod:`slurm.records`, with the same meaning whatever the version: ``VERSION``; ``poll(gateway, *,
previous, now, probe)`` (:class:`PollReading`: the commands its version needs, three per poll);
``parse_nodes(document)`` (22.05: ``sinfo --json``; 23.11+: ``scontrol show node --json``),
``parse_jobs(squeue)``, ``parse_sacct_jobs(sacct)``, ``queue_job_by_comment(squeue, comment)`` and
``sacct_job_by_comment(sacct, comment)`` (the key look-up of a retried submission), plus
``parse_partitions(text)`` for ``scontrol show partition --oneliner``; ``failure_errors(document)``
and ``EMPTY_RESULT_ERRORS`` (which ``errors`` entries only mean "nothing found"). Values inside the
documents are read by :mod:`slurm.values`.

The adapters: :mod:`.v0_0_38` (Slurm 22.05, ``openapi/v0.0.38``) and, sharing :mod:`.data_parser`,
:mod:`.v0_0_40` (23.11), :mod:`.v0_0_41` (24.05) and :mod:`.v0_0_42` (24.11).

:func:`adapter_for` picks the adapter from the document's ``meta``: the output plugin it names
(22.05: ``meta.plugin.type`` ``openapi/v0.0.38`` or ``openapi/dbv0.0.38``; 23.02 and later:
``meta.plugins.data_parser`` / ``meta.plugin.data_parser`` ``data_parser/v0.0.NN``), else the Slurm
release (``meta.Slurm.version`` / ``meta.slurm.version``: ``{major, minor, micro}``). A version
without an adapter is a :class:`~slurm.errors.SlurmVersionUnknown` naming it, never a guess.

To read a new version: add ``vX_Y_Z.py`` with the functions above, register it in :data:`ADAPTERS`
(and its release in :data:`RELEASES`), and record its outputs under ``tests/fixtures/slurm/<release>/``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from ..errors import SlurmVersionUnknown
from ..records import Node, Partition, QueueJob

#: Seconds between two reads of the partitions (they rarely change); a poll in between keeps the last.
PARTITIONS_EVERY = 60.0


@dataclass(frozen=True)
class PollReading:
    """What one poll read, in records: the answer of an adapter's ``poll(gateway, *, previous, now,
    probe)`` (``probe``: the ``sinfo --json`` document already fetched to find the version, or
    ``None``). ``partitions_at``: Unix seconds the partitions were read (kept from ``previous``
    within :data:`PARTITIONS_EVERY`)."""

    slurm_version: str
    output_version: str
    nodes: list[Node]
    partitions: list[Partition]
    partitions_at: float
    jobs: list[QueueJob]


class OtherVersion(Exception):
    """Raised by an adapter's ``poll`` when a document names another output version than its own
    (the cluster was upgraded between two polls): ``adapter`` reads it, ``document`` is it, ``argv``
    the command that printed it (the new adapter's ``poll`` takes it as its ``probe`` only when it is
    ``sinfo --json``)."""

    def __init__(self, adapter: ModuleType, document: dict, argv: Sequence[str] = ()):
        self.adapter, self.document, self.argv = adapter, document, list(argv)
        super().__init__(f"the document is {getattr(adapter, 'VERSION', '?')}")


def expect_version(version: str, document: dict, argv: Sequence[str]) -> dict:
    """``document``, after checking that :func:`adapter_for` sends it to the adapter of output
    ``version`` (its module's ``VERSION``); raises :class:`OtherVersion` (another known version) or
    :class:`SlurmVersionUnknown`."""
    found = adapter_for(document, argv=argv)
    if found.VERSION != version:
        raise OtherVersion(found, document, argv)
    return document


from . import v0_0_38, v0_0_40, v0_0_41, v0_0_42  # noqa: E402  (the adapters use the names above)

#: Output plugin version (``v0.0.38``; the ``db`` of sacct's ``dbv0.0.38`` dropped) -> adapter.
ADAPTERS: dict[str, ModuleType] = {"v0.0.38": v0_0_38, "v0.0.40": v0_0_40, "v0.0.41": v0_0_41, "v0.0.42": v0_0_42}
#: Slurm release (``major.minor``, zero-padded as Slurm writes it) -> adapter, for documents whose
#: ``meta`` names no plugin.
RELEASES: dict[str, ModuleType] = {"22.05": v0_0_38, "23.11": v0_0_40, "24.05": v0_0_41, "24.11": v0_0_42}

#: ``openapi/dbv0.0.38``, ``data_parser/v0.0.42``, ``data_parser/v0.0.42+complex`` (data_parser's flags
#: after ``+`` change how values are written, not which fields there are) -> ``v0.0.NN``.
_PLUGIN_VERSION = re.compile(r"(?:db)?(v\d+\.\d+\.\d+)(?:\+[A-Za-z_,+-]*)?$")


def adapter_named(version: str) -> ModuleType | None:
    """The adapter of output version ``version`` (``v0.0.42``), ``None`` when there is none."""
    return ADAPTERS.get(version)


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
    return "Slurm " + ", ".join(f"{release} ({module.VERSION})" for release, module in sorted(RELEASES.items()))


def adapter_for(document: dict, *, argv: Sequence[str] = ()) -> ModuleType:
    """The adapter for this document (see the module docstring). ``argv``: the command that printed
    it, for the error. Raises :class:`~slurm.errors.SlurmVersionUnknown` when neither the plugin
    nor the release it names has an adapter, with a sentence naming both and the known versions:
    "Slurm 26.05 output not understood yet: squeue printed JSON of output plugin 'v0.0.44' ..."."""
    plugin, release = document_version(document)
    if plugin in ADAPTERS:
        return ADAPTERS[plugin]
    if not plugin and release in RELEASES:
        return RELEASES[release]
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
