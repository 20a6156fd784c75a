"""Audit events: who changed what (a job, a team, a membership, a quota, a token), old and new values.

Every app writes through :func:`audit.services.audit`, inside the transaction of the change. This app
imports no other app of the portal (its foreign key to ``jobs.Job`` is named by string)."""
