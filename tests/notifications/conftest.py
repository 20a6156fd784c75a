"""Fixtures of the notification tests: a real SMTP server (aiosmtpd, notifications/sink.py) on a free
port of 127.0.0.1, Django's SMTP backend pointed at it, and people with addresses."""

from __future__ import annotations

import logging

import pytest
from aiosmtpd.controller import Controller

from notifications.sink import SinkHandler
from tests.conftest import free_port


@pytest.fixture
def smtp_sink(settings, tmp_path):
    """A running sink; ``.port`` its port, ``.messages`` what it accepted (also in ``tmp_path/mail``).
    Django's email backend is SMTP to it (pytest-django would use locmem)."""
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every SMTP line at INFO
    handler = SinkHandler(tmp_path / "mail")
    handler.port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=handler.port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", handler.port, 5
    settings.EMAIL_USE_TLS, settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = False, "", ""
    try:
        yield handler
    finally:
        handler.release.set()
        controller.stop()


@pytest.fixture
def smtp_down(settings):
    """Django's SMTP backend pointed at a port where nothing listens (SMTP down)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    return settings


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", email="alice@example.org", slurm_accounts=["vision"])


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create(username="bob", email="bob@example.org", slurm_accounts=["nlp"])
