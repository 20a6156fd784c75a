"""Batch jobs: the Job rows (models), what a person submits and does with a job (submit/), what the
poller brings in from Slurm (poll/), the reads pages make (reads/), and the pages themselves (web/).
Celery tasks stay in tasks.py, where Celery finds them under their names."""
