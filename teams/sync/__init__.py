"""The teams sync: Slurm's accounts, associations and QOS made to match the portal's teams on every cluster."""
