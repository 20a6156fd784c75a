"""Reads for pages, from the snapshot and the rows only, never from Slurm: place in line, pending
reasons in plain words (the site's caps in its own figures, maintenance windows, node trouble),
freshness, the home page's overview, and a job's log tail (read as its owner)."""
