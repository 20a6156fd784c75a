"""``manage.py trace_export``: the anonymized job trace (:mod:`adoption.trace`)."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime, time

from django.core.management.base import BaseCommand, CommandError

from adoption.trace import csv_lines, hidden_exits, jsonl_lines, trace_key, trace_read, trace_row
from jobs.worker.finish import exit_hidden
from slurm import SlurmError
from slurm.clusters import cluster_get, cluster_names
from slurm.errors import SlurmVersionUnknown
from slurm.gateway import get_gateway

FORMATS = {"csv": csv_lines, "jsonl": jsonl_lines}


def _day(text: str, option: str) -> datetime:
    try:
        return datetime.combine(date.fromisoformat(text), time.min, tzinfo=UTC)
    except ValueError:
        raise CommandError(f"{option} {text!r} is not a date: write it YYYY-MM-DD, e.g. {option} 2026-11-01.") from None


class Command(BaseCommand):
    help = (
        "Write every user's jobs submitted in a window (from sacct, all users) as an anonymized trace: users and "
        "accounts as keyed hashes (PORTAL_TRACE_SECRET), no job names, comments or paths. Dates are UTC days; "
        "--until is exclusive (default: now)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="first day, YYYY-MM-DD (UTC)")
        parser.add_argument("--until", help="day after the last, YYYY-MM-DD (UTC); default: now")
        parser.add_argument("--cluster", help="one configured cluster (default: every one)")
        parser.add_argument("--format", default="csv", help="csv or jsonl (default csv)")
        parser.add_argument("--output", help="file to write (default: standard output)")

    def handle(self, *args, since, until=None, cluster=None, format="csv", output=None, **options):
        if format not in FORMATS:
            raise CommandError(f"--format {format!r} is not known: use csv or jsonl.")
        start = _day(since, "--since")
        now = datetime.now(UTC)
        end = _day(until, "--until") if until else now
        if start >= now:
            raise CommandError(f"--since {since} is in the future: nothing was submitted yet.")
        if end <= start:
            raise CommandError(
                f"--until {until or 'now'} is not after --since {since}: give a later --until or an earlier --since."
            )
        if cluster is not None and cluster_get(cluster) is None:
            raise CommandError(f"--cluster {cluster!r} is not configured: use one of {', '.join(cluster_names())}.")
        names = [cluster] if cluster else cluster_names()
        key = trace_key()
        rows = []
        for name in names:
            gateway = get_gateway(name)
            try:
                records = trace_read(gateway, since=start, until=min(end, now), now=now)
                exits = hidden_exits(gateway, records)
            except (SlurmError, SlurmVersionUnknown, ValueError) as exc:
                raise CommandError(f"accounting (sacct) of cluster {name} could not be read: {exc}") from exc
            records.sort(key=lambda f: (f.submit or 0, f.job_id, f.array_task_id or 0, f.het_job_offset or 0))
            rows += [trace_row(f, cluster=name, key=key, exit=exits.get(f.job_id) if exit_hidden(f) else None) for f in records]
        lines = FORMATS[format](rows)
        if output:
            try:
                with open(output, "w", encoding="utf-8", newline="") as fh:
                    fh.writelines(lines)
            except OSError as exc:
                raise CommandError(f"--output {output}: {exc.strerror}; give a path to a file in a writable folder.") from exc
            self.stderr.write(f"{len(rows)} jobs written to {output}")
        else:
            out = self.stdout if self.stdout else sys.stdout
            for line in lines:
                out.write(line, ending="")
