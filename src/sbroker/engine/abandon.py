"""A transaction dropped without COMMIT or ROLLBACK (no ``with``, an exception in user code
that skipped both, a notebook cell re-run) is rolled back when Python collects it, the way
SQL Server rolls back the transaction of a session that goes away.

Without this its conversation-group locks would stay until the broker closes, and a write
statement it ran with ``execute`` would keep the writer's connection, so every later commit
of the process would wait forever.  The roll back runs on a short-lived thread: the
collection can happen anywhere, even inside the writer's own batch.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from typing import TYPE_CHECKING, Any

from sbroker.core.errors import BrokerError

if TYPE_CHECKING:
    from sbroker.broker import Broker


class Leftovers:
    """What a live transaction holds that must be given back if it is dropped."""

    __slots__ = ("finalizer", "held", "queues")

    def __init__(self, queues: set[int]) -> None:
        self.held: sqlite3.Connection | None = None  # the writer's connection, if held
        self.queues = queues  # queues it received from (the set the transaction fills)
        self.finalizer: Any = None  # the weakref.finalize watching the transaction

    def done(self) -> None:
        """The transaction ended properly: nothing to do at collection."""
        if self.finalizer is not None:
            self.finalizer.detach()


def watch(tx: object, broker: Broker, owner: str, queues: set[int]) -> Leftovers:
    """Roll back what ``tx`` (identified by ``owner``) holds if it is collected while active."""
    left = Leftovers(queues)
    left.finalizer = weakref.finalize(tx, _abandoned, weakref.ref(broker), owner, left)
    left.finalizer.atexit = False  # at exit the broker's close drops the session anyway
    return left


def _abandoned(broker_ref: weakref.ref[Broker], owner: str, left: Leftovers) -> None:
    threading.Thread(target=_undo, args=(broker_ref, owner, left),
                     name="sbroker-abandoned-transaction", daemon=True).start()


def _undo(broker_ref: weakref.ref[Broker], owner: str, left: Leftovers) -> None:
    found = broker_ref()
    if found is None or found._closed:
        return
    broker = found
    writer = broker.db.writer
    with contextlib.suppress(BrokerError, sqlite3.Error):
        if left.held is not None:
            with contextlib.suppress(sqlite3.Error):
                left.held.execute("ROLLBACK")
            left.held = None
            writer.release_exclusive()

        def undo(conn: sqlite3.Connection) -> list[int]:
            writer.lazy_release(owner)
            conn.execute("DELETE FROM sb_group_locks WHERE owner = ?", (owner,))
            return broker._count_rollbacks(conn, left.queues)

        disabled = writer.run(undo, durable=False)
        broker._after_rollback(set(left.queues), True, disabled)
