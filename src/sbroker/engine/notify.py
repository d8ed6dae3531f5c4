"""Wake-ups for waiting RECEIVEs: a version counter bumped on every local commit that makes
work visible, and by the store's change feed when another process commits."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from sbroker.core.clock import Clock
from sbroker.storage.ports import ChangeFeed

RECHECK_SECONDS = 0.5  # waiters re-check even without news (dead lock holders)


class Notifier:
    """A condition with versions: waiters sleep until the version they watch moves (the
    global one, or one queue's) or a deadline, so a commit into queue A does not send the
    readers of queue B back to the database."""

    def __init__(self, clock: Clock, feed: ChangeFeed) -> None:
        self.clock = clock
        self.cond = threading.Condition(threading.Lock())  # not re-entrant: faster
        self.version = 0
        self._epoch = 0  # bumped when we cannot tell which queues changed
        self._queues: dict[int, int] = {}
        self._feed = feed
        self._closed = False
        self._waiters = 0  # threads in wait(): a bump with none notifies nobody
        feed.subscribe(self.bump)

    def bump(self, queue_ids: Iterable[int] | None = None) -> None:
        """Something changed: in these queues, or (None) anywhere."""
        with self.cond:
            self.version += 1
            if queue_ids is None:
                self._epoch += 1
            else:
                queues = self._queues
                for q in queue_ids:
                    queues[q] = queues.get(q, 0) + 1
            if self._waiters:
                self.cond.notify_all()

    def token(self, queue_id: int | None = None) -> tuple[int, object]:
        """What to pass to :meth:`wait`: the global version, or one queue's; and how many
        changes the feed had noticed."""
        with self.cond:
            return self._feed.noticed, self._token(queue_id)

    def _token(self, queue_id: int | None) -> object:
        if queue_id is None:
            return self.version
        return (self._epoch, self._queues.get(queue_id, 0))

    def wait(self, token: tuple[int, object], deadline: float | None,
             queue_id: int | None = None) -> None:
        """Return when the watched version differs from the ``token``'s, at ``deadline``, or
        after RECHECK_SECONDS (waiters re-check now and then: dead lock holders). Return at
        once when the feed noticed a change since the token without telling it: nobody
        watched then, and the caller may have looked at its queue before that commit."""
        noticed, seen = token
        with self._feed.watch(), self.cond:
            if self._feed.noticed != noticed:
                return
            limit = self.clock.now() + RECHECK_SECONDS
            if deadline is not None:
                limit = min(limit, deadline)
            self._waiters += 1
            try:
                while self._token(queue_id) == seen and not self._closed:
                    if self.clock.now() >= limit:
                        return
                    self.clock.wait(self.cond, limit)
            finally:
                self._waiters -= 1

    def close(self) -> None:
        with self.cond:
            self._closed = True
            self.cond.notify_all()
