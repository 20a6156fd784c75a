"""Celery tasks of the notifications app (names ``notifications.tasks.<function>``; the beat schedule in
``portal/settings/base.py`` names the sweep). Not retried by Celery: the sweep is the retry."""

from celery import shared_task

from .mail import SmtpUnavailable, notification_send, notifications_sweep


@shared_task(soft_time_limit=30, time_limit=45, ignore_result=True, max_retries=0)
def notification_send_task(notification_id: int) -> str:
    """Mail one notification row (:func:`notifications.mail.notification_send`)."""
    try:
        return notification_send(notification_id=notification_id)
    except SmtpUnavailable:
        return "unreachable"  # recorded on the row; the sweep tries again after the back-off


@shared_task(soft_time_limit=100, time_limit=120, ignore_result=True, max_retries=0)
def notifications_sweep_task() -> dict:
    """Beat task (every 30 s): send the rows that are due, SMTP back or a lease passed."""
    return notifications_sweep()
