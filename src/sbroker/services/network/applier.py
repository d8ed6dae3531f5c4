"""Received messages applied on a thread of their own, in arrival order.

The transport's loop hands complete messages over and goes back to reading and decoding
while the handler commits them (an fsync, or a wait for another process's write lock);
whatever arrives meanwhile goes into the next commit, so batches grow when commits are slow
instead of the connection stalling. Outcomes go back to the loop thread through ``post``:
``applied(peer, messages)`` once they are durable (their acknowledgements may go), or
``refused(peer, messages)`` when the handler raised. After a refusal the peer's later
messages wait (they must not be applied over the gap) until the loop thread calls
:meth:`Applier.resume`, which returns them so that they are refused as well.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from uuid import UUID

from sbroker.core import threads
from sbroker.protocol.events import Message

__all__ = ["Applier"]

_log = logging.getLogger(__name__)

Outcome = Callable[[UUID, list[Message]], None]


class Applier:
    """One thread applying `deliver(peer, messages)` for every peer, in order per peer."""

    def __init__(
        self,
        deliver: Callable[[UUID, list[Message]], None],
        *,
        applied: Outcome,
        refused: Outcome,
        post: Callable[[Callable[[], None]], None],
    ) -> None:
        self._deliver = deliver
        self._applied = applied
        self._refused = refused
        self._post = post
        self._cond = threading.Condition()
        self._queue: dict[UUID, list[Message]] = {}
        self._blocked: set[UUID] = set()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="sbroker-applier", daemon=True)
        self._thread.start()

    def submit(self, peer: UUID, messages: list[Message]) -> None:
        """Queue `messages` (in order, after any queued before) for the next commit."""
        with self._cond:
            self._queue.setdefault(peer, []).extend(messages)
            self._cond.notify_all()

    def resume(self, peer: UUID) -> list[Message]:
        """After a refusal: take back what queued for `peer` meanwhile (to be refused too)
        and let what comes from now on be applied again."""
        with self._cond:
            self._blocked.discard(peer)
            stale = self._queue.pop(peer, [])
            self._cond.notify_all()
            return stale

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the commit under way and stop; messages still queued are dropped
        unacknowledged (the peer sends them again)."""
        self.close()
        self.join(timeout)

    def close(self) -> None:
        """Take nothing more (what is being applied still finishes)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def join(self, timeout: float) -> None:
        threads.join(self._thread, timeout)

    def _take(self) -> dict[UUID, list[Message]] | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                ready = [p for p in self._queue if p not in self._blocked]
                if ready:
                    return {p: self._queue.pop(p) for p in ready}
                self._cond.wait()

    def _run(self) -> None:
        while (work := self._take()) is not None:
            try:
                for peer, messages in work.items():
                    self._apply(peer, messages)
            finally:
                with self._cond:
                    self._cond.notify_all()

    def _apply(self, peer: UUID, messages: list[Message]) -> None:
        try:
            self._deliver(peer, messages)
        except Exception:  # not enqueued now: the peer retransmits them later
            with self._cond:
                self._blocked.add(peer)
            self._report(self._refused, peer, messages)
            return
        self._report(self._applied, peer, messages)

    def _report(self, outcome: Outcome, peer: UUID, messages: list[Message]) -> None:
        try:
            self._post(lambda: outcome(peer, messages))
        except RuntimeError:  # the loop is closed: the transport is stopping
            _log.debug("outcome of %d message(s) from %s dropped at shutdown", len(messages), peer)
