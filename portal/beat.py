"""The Celery beat scheduler the portal runs (``CELERY_BEAT_SCHEDULER``): RedBeat, made to survive
its Redis restarting.

RedBeat keeps the schedule and a lock (one sending beat however many run) in Redis. As shipped, a
beat whose Redis restarts dies: extending the lock raises ``LockNotOwnedError`` (the key went with
Redis's data) or ``ConnectionError`` (Redis is still down), and the beat process exits. With no beat,
nothing is polled and no lost submission is sent again until someone restarts it (as seen once: the
fault-injection test's submissions queued while Redis restarted stayed "Submitting").

:class:`Scheduler` keeps beating instead: while Redis cannot be reached it sends nothing and tries
again every :data:`RETRY_S` seconds; once Redis answers without its lock, it takes the lock again if
no other beat holds it, installs the schedule again (a Redis without persistence lost it too) and
goes on; if another beat took the lock meanwhile, this one waits as a standby and takes over when
that one's lock expires (``CELERY_REDBEAT_LOCK_TIMEOUT`` seconds)."""

from __future__ import annotations

import logging

import redis.exceptions
from redbeat import RedBeatScheduler

logger = logging.getLogger("celery.beat")

#: Seconds between tries while Redis cannot be reached or another beat holds the lock.
RETRY_S = 1.0


class Scheduler(RedBeatScheduler):
    """:class:`redbeat.RedBeatScheduler` whose :meth:`tick` outlives a Redis restart (see the module)."""

    _standby = False

    def tick(self, *args, **kwargs) -> float:
        """One beat loop: send what is due (RedBeat's tick). Returns the seconds to sleep before the
        next loop; :data:`RETRY_S` while Redis cannot be reached or this beat does not hold the lock.
        Never raises for Redis being down or its data lost."""
        try:
            if self._standby and not self._retake_lock():
                return RETRY_S
            return super().tick(*args, **kwargs)
        except redis.exceptions.LockNotOwnedError:
            logger.warning("beat: RedBeat's lock is gone from Redis (restarted, or expired); taking it again")
            if not self._retake_lock():
                return RETRY_S
            return super().tick(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            logger.warning("beat: Redis cannot be reached (%s); nothing is sent; trying again in %.0f s", exc, RETRY_S)
            return RETRY_S

    def _retake_lock(self) -> bool:
        """Take RedBeat's lock without waiting; on success install the schedule again (entries Redis
        still has keep their last run). Returns whether this beat holds the lock now; when not, it
        is a standby (another beat sends) until the lock is free."""
        if self.lock is None:  # no lock configured, or RedBeat could not take it at start
            return True
        if not self.lock.acquire(blocking=False):
            if not self._standby:
                logger.warning("beat: another beat holds RedBeat's lock; this one waits as a standby")
            self._standby = True
            return False
        self._standby = False
        self.setup_schedule()
        logger.info("beat: holds RedBeat's lock again; schedule installed (%d entries)", len(self.app.redbeat_conf.schedule))
        return True
