# The README's commands. Everything is idempotent; run as root on a Debian 12 machine.
.PHONY: dev stop test test-fast cluster cluster-stop check
# Python caches compiled modules and pytest its rewritten test modules in __pycache__ (ignored by git);
# a shell that sets PYTHONDONTWRITEBYTECODE makes every pytest process compile all of them again
# (about 15 s of make test-fast's 95 s on two cores; docs/testing.md)
unexport PYTHONDONTWRITEBYTECODE

dev:            ## set up and run everything (portal, Celery, dev IdP, local Slurm) on http://127.0.0.1:8000/
	bash scripts/dev.sh

stop:           ## stop everything make dev started, including the local cluster
	bash scripts/stop.sh

test:           ## run all tests against the real stack (sets up what they need first)
	bash scripts/test.sh

test-fast:      ## import layers, ruff, sizes, then unit tests on two workers (no cluster, IdP or browser needed; PostgreSQL, Redis and the Jupyter venv still are)
	bash scripts/lint.sh
	.venv/bin/pytest -n 2 -m "not integration and not e2e" --reuse-db

cluster:        ## start the local Slurm cluster (+ portal sshd and sudo rule) only
	bash cluster/up.sh

cluster-stop:
	bash cluster/down.sh

check:          ## check the whole path from the portal to Slurm
	.venv/bin/python manage.py cluster_check
