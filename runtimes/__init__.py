"""Container runtimes (issue 22): the one place a job's or session's command is wrapped in an image's
runtime (Charliecloud ``ch-run``, Apptainer ``apptainer exec``, enroot/pyxis ``srun --container-image``).
Ground floor: imports no app."""
