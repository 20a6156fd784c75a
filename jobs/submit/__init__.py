"""Submitting a batch job and acting on it, the user's side: site policy and the names each surface
gives its fields, the checked request (a row before it is a Slurm job), cancel, hold and release, Run
again. What a worker then sends to Slurm is in jobs/worker/."""
