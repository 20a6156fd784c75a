"""The team lead's monthly report: per member GPU-hours, billed units, cost, jobs, failures, waits,
energy, idle GPU-hours and GPU utilization, the team's share of each cluster and its rank, from one
``sacct -D`` read per cluster and month (docs/team-lead-guide.md, "The monthly report")."""
