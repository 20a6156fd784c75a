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

To read a new version: add ``vX_Y_Z.py`` with the functions above, import it here (:data:`ADAPTERS`
is built from the modules), add its release to :data:`.base.RELEASE_VERSIONS`, and record its outputs under ``tests/fixtures/slurm/<release>/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from . import v0_0_38, v0_0_40, v0_0_41, v0_0_42
from .base import (  # noqa: F401  (the adapter interface, read from here by the rest of slurm)
    PARTITIONS_EVERY,
    RELEASE_VERSIONS,
    OtherVersion,
    PollReading,
    document_version,
    expect_version,
    known_versions,
    version_of,
)

#: Output plugin version (``v0.0.38``; the ``db`` of sacct's ``dbv0.0.38`` dropped) -> adapter.
ADAPTERS: dict[str, ModuleType] = {m.VERSION: m for m in (v0_0_38, v0_0_40, v0_0_41, v0_0_42)}
#: Slurm release (``major.minor``, zero-padded as Slurm writes it) -> adapter, for documents whose
#: ``meta`` names no plugin.
RELEASES: dict[str, ModuleType] = {release: ADAPTERS[version] for release, version in RELEASE_VERSIONS.items()}
assert set(ADAPTERS) == set(RELEASE_VERSIONS.values()), "every adapter has its release in base.RELEASE_VERSIONS"


def adapter_named(version: str) -> ModuleType | None:
    """The adapter of output version ``version`` (``v0.0.42``), ``None`` when there is none."""
    return ADAPTERS.get(version)


def adapter_for(document: dict, *, argv: Sequence[str] = ()) -> ModuleType:
    """The adapter for this document (see the module docstring and :func:`.base.version_of`).
    ``argv``: the command that printed it, for the error. Raises
    :class:`~slurm.errors.SlurmVersionUnknown` when neither the plugin nor the release it names has
    an adapter."""
    return ADAPTERS[version_of(document, argv=argv)]
