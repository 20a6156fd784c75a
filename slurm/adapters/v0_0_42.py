"""Adapter for Slurm 24.11's JSON: ``data_parser/v0.0.42`` (``squeue``, ``scontrol show node``,
``sacct --json``). The readers are :mod:`.data_parser`'s, shared with v0.0.40 and v0.0.41; this module
names the version and its commands.

What v0.0.42 changed from v0.0.41, none of it read here (recorded: ``tests/fixtures/slurm/24.11/`` vs
``24.05/``): squeue drops ``exclusive``, ``oversubscribe``, ``show_flags`` and ``minimum_switches`` and
adds ``priority_by_partition`` and ``required_switches``; sacct adds ``restart_cnt`` and ``qosreq`` to
each job. Recorded from the local cluster2 (Slurm 24.11.5) by ``cluster/record_fixtures.py``.
"""

from __future__ import annotations

from .data_parser import (  # noqa: F401  (this version's readers: the adapter interface)
    EMPTY_RESULT_ERRORS,
    PARTITIONS,
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
VERSION = "v0.0.42"
#: The poll asks for this version by name with data_parser's ``complex`` flag: plain numbers and
#: ``null`` instead of ``{"set", "infinite", "number"}`` objects, so the queue document is about 40 %
#: smaller and cheaper to send and read (docs/benchmarks.md, "Several clusters"); naming the version
#: also keeps a newer Slurm answering in one the portal reads. The readers take both forms
#: (recorded pairs: ``tests/fixtures/slurm/24.11/complex/``).
JSON = f"--json={VERSION}+complex"
SQUEUE = ["squeue", JSON, "-t", "all"]
NODES = ["scontrol", "show", "node", JSON]
RESERVATIONS = ["scontrol", "show", "reservation", JSON]


def poll(gateway, *, previous=None, now: float, probe: dict | None = None):
    """One poll of a 24.11 cluster: :func:`slurm.adapters.data_parser.poll` with :data:`VERSION` and
    the commands :data:`SQUEUE`, :data:`NODES` and :data:`RESERVATIONS`."""
    return data_parser_poll(
        VERSION,
        gateway,
        previous=previous,
        now=now,
        probe=probe,
        squeue_argv=SQUEUE,
        nodes_argv=NODES,
        reservations_argv=RESERVATIONS,
    )
