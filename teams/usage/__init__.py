"""Each team's usage: read from Slurm per cluster, computed, cached for pages, summed across clusters."""
