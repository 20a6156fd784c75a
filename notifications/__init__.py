"""Notifications: one event row per thing a person is told (a unique key, sent once), shown in
the portal and mailed through Django's email backend, with per-user, per-kind preferences."""
