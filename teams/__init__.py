"""Teams (= Slurm accounts), memberships and roles, GPU quotas and usage."""
