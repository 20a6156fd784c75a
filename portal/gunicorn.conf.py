"""gunicorn's settings for the portal: ``gunicorn -c portal/gunicorn.conf.py portal.wsgi --bind ...``.
``make dev`` (scripts/dev.sh), the Dockerfile and docs/production.md use this file; flags on
the command line override it.

- ``worker_class``/``workers``/``threads``: a bounded number of threads, and so of PostgreSQL
  connections, however many people use the portal (bench/README.md).
- ``keepalive`` (seconds an idle kept-alive connection stays open): longer than any client's poll
  (the CLI's ``logs -f`` and ``notebook`` poll every 2 s, the pages' fragments every 2 to 5 s) and
  than the idle timeout of a proxy in front (nginx's upstream ``keepalive_timeout`` and AWS ALB's idle
  timeout are 60 s by default). The side that closes an idle connection must be the client (or the
  proxy), never gunicorn: with gunicorn's default of 2 s, a request sent on a connection just as
  gunicorn closed it was reset, and ``gpuportal logs -f`` died with "Connection reset by peer".
  Idle connections wait in the worker's poller, not in a thread.
"""

worker_class = "gthread"
workers = 2
threads = 8
keepalive = 75
