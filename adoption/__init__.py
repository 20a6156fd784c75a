"""Adoption figures for admins: weekly active users, jobs and sessions, GPU-hours through the
portal and outside it, waits, GPU allocation share, failures by kind; the anonymized job trace export."""
