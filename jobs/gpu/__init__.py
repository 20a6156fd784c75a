"""GPU usage of jobs: the figures the poller reads per interval (gpu_usage), each ended job's summary (gpu_summary) and a team's GPU efficiency (efficiency), for pages to read."""
