"""Adapter for Slurm 24.05's JSON: ``data_parser/v0.0.41`` (``squeue``, ``scontrol show node``,
``sacct --json``). The readers are :mod:`.data_parser`'s, shared with v0.0.40 and v0.0.42; this module
names the version and its commands.

What v0.0.41 changed from v0.0.40, none of it read here (recorded: ``tests/fixtures/slurm/24.05/`` vs
``23.11/``): squeue's ``job_resources`` became ``{select_type, nodes: {count, list, whole, allocation:
[...]}, cpus, threads_per_core}`` (``null`` while pending) instead of ``{nodes: "g1", allocated_nodes:
[...]}``; ``scontrol show node`` adds ``gpu_spec`` and ``res_cores_per_gpu``; sacct adds ``stdout``,
``stderr``, ``stdin`` (and ``*_expanded``) and ``time.planned``; partitions add ``select_type``.

Recorded as what Slurm 24.11.5's data_parser writes for ``--json=v0.0.41`` (the local cluster2, by
``cluster/record_fixtures.py``), not from a Slurm 24.05: ``tests/fixtures/slurm/24.05/``.
"""

from __future__ import annotations

from .data_parser import (  # noqa: F401  (this version's readers: the adapter interface)
    EMPTY_RESULT_ERRORS,
    NODES,
    PARTITIONS,
    RESERVATIONS,
    SQUEUE,
    failure_errors,
    parse_jobs,
    parse_nodes,
    parse_partitions,
    parse_reservations,
    parse_sacct_jobs,
    queue_job_by_comment,
    sacct_job_by_comment,
)
from .data_parser import poll as data_parser_poll

#: The output version this module reads.
VERSION = "v0.0.41"


def poll(gateway, *, previous=None, now: float, probe: dict | None = None):
    """One poll of a 24.05 cluster: :func:`slurm.adapters.data_parser.poll` with :data:`VERSION`."""
    return data_parser_poll(VERSION, gateway, previous=previous, now=now, probe=probe)
