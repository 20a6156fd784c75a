from tests.profiles.conftest import cluster, no_slurm, people  # noqa: F401  (shared fixtures)
