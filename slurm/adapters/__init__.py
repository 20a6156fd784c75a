"""One adapter per Slurm JSON output version (``meta.plugin.type``, e.g. ``openapi/v0.0.38``).

Each adapter turns ``sinfo --json`` and ``squeue --json`` documents into the plain records of
:mod:`slurm.records`. :func:`adapter_for` picks one from a document's ``meta``.
"""
from __future__ import annotations

from types import ModuleType

from . import v0_0_38


def adapter_for(document: dict) -> ModuleType:
    """The adapter module for this document. 22.05 (``openapi/v0.0.38``) is the recorded baseline;
    newer plugins are read by the same adapter, which also accepts their shapes (``job_state`` as a
    list, numbers as ``{set, infinite, number}``)."""
    return v0_0_38
