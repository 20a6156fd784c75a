# Production image of the portal (web, Celery worker and beat share it). The Slurm submit host, the
# IdP, PostgreSQL and Redis are outside; see docker-compose.yml and docs/production.md.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings.production
# gunicorn reads GUNICORN_CMD_ARGS itself; a site's .env may replace it (deploy/env.example: TLS).
ENV GUNICORN_CMD_ARGS="--bind=0.0.0.0:8000"
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir . && \
    PORTAL_SECRET_KEY=build-only PORTAL_OIDC_ISSUER=https://build.invalid PORTAL_OIDC_CLIENT_ID=x PORTAL_OIDC_CLIENT_SECRET=x \
    python manage.py collectstatic --noinput
RUN useradd --system --home /app portalapp && chown -R portalapp /app
USER portalapp
EXPOSE 8000
# The same command as compose's web service (tests/production checks that they agree).
CMD ["gunicorn", "portal.wsgi", "-c", "portal/gunicorn.conf.py"]
