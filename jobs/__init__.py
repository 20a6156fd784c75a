"""Slurm: the gateway, the cluster snapshot and (later) batch jobs."""
