"""What the Celery workers run for batch jobs (through jobs/tasks.py): sending a job to Slurm with its
rendered batch script, cancel, hold and release there; the poller's service that takes each cluster's
snapshot and brings the Job rows up to it (jobs submitted outside the portal, ends read from
accounting); telling owners what happened; Slurm's command latency for /metrics."""
