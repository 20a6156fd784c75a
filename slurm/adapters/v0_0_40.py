"""Adapter for Slurm 23.11's JSON: ``data_parser/v0.0.40`` (``squeue``, ``scontrol show node``,
``sacct --json``). The readers are :mod:`.data_parser`'s, shared with v0.0.41 and v0.0.42; this module
names the version and its commands.

v0.0.40 is the first of the three: from 22.05's ``v0.0.38`` it changed what :mod:`.data_parser`'s
docstring lists (states as lists, numbers as objects, the exit code object, ``sinfo`` per partition x
node group, squeue's ``-t`` honoured). Its own shapes that later versions changed, none read here:
squeue's ``job_resources`` is ``{nodes: "g1", allocated_cores, allocated_cpus, allocated_hosts,
allocated_nodes: [{nodename, cpus_used, memory_used, memory_allocated, sockets: {"0": {cores: {"0":
"allocated"}}}}]}``; ``scontrol show node`` has no ``gpu_spec``/``res_cores_per_gpu``; sacct has no
``stdout``/``stderr``/``time.planned``.

Recorded as what Slurm 24.11.5's data_parser writes for ``--json=v0.0.40`` (the local cluster2, by
``cluster/record_fixtures.py``), not from a Slurm 23.11: ``tests/fixtures/slurm/23.11/``.
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
VERSION = "v0.0.40"


def poll(gateway, *, previous=None, now: float, probe: dict | None = None):
    """One poll of a 23.11 cluster: :func:`slurm.adapters.data_parser.poll` with :data:`VERSION`."""
    return data_parser_poll(VERSION, gateway, previous=previous, now=now, probe=probe)
