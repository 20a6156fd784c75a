"""Shared fixtures for profile and API tests: users in teams, and a stored snapshot of the recorded
cluster (partitions interactive, train, small; a100 and t4 nodes)."""

from __future__ import annotations

import pytest

from tests.jobs.test_job_pages import cluster, no_slurm  # noqa: F401  (fixtures: the recorded cluster's snapshot; any Slurm call fails)

EXAMPLE_TEXT = """version: 1
name: train-digits
resources:
  partition: small
  gpus_per_node: 0
  cpus: 2
  memory: 2G
  time_limit: "00:10:00"
run:
  workdir: gpuportal-examples/digits
  script: train_digits.py
  args: ["--epochs", "8"]
environment:
  python: "3.11"
  pip: [numpy==2.2.6, scikit-learn==1.7.2]
"""


@pytest.fixture
def people(django_user_model, clean_cache):
    """vision: alice (member), carol (lead); nlp: bob (member), nils (lead); dana: admin (no team)."""
    from teams.models import Membership, Role, Source, Team

    users = {
        n: django_user_model.objects.create(username=n, slurm_accounts=[t] if t else [])
        for n, t in [("alice", "vision"), ("carol", "vision"), ("bob", "nlp"), ("nils", "nlp"), ("dana", "")]
    }
    users["dana"].is_staff = True
    users["dana"].save()
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    for user, team, role in [
        ("alice", vision, Role.MEMBER),
        ("carol", vision, Role.LEAD),
        ("bob", nlp, Role.MEMBER),
        ("nils", nlp, Role.LEAD),
    ]:
        Membership.objects.create(user=users[user], team=team, role=role, source=Source.ADMIN)
    return users
