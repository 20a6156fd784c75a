"""A session's Slurm job, on the batch jobs' road: its script (:mod:`.script`, with the batch jobs'
``#SBATCH`` renderer) and sending, cancelling and reading it through the cluster's gateway (:mod:`.send`)."""
