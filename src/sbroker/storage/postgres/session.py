"""Sessions and the change feed on PostgreSQL: what the processes on many hosts that share a
database know of each other.

- **Liveness** (:class:`LeaseLiveness`): a session is a row of ``sb_sessions`` (ids from an
  identity column: never reused) and an advisory lock that the session's own connection holds
  while the process lives.  A killed process's connection closes and its lock goes at once; a
  vanished host's goes when TCP keepalives give up (about 10 s).  The connection also beats
  every second, so that a session whose connection dropped for a moment (a server restart)
  is not taken for dead: a session is dead when it holds no lock and has not beaten for
  ``GRACE_SECONDS``.  Its rows are then reaped (activation DMV rows; the scheduler fails its
  running tasks).
- **Change feed** (:class:`ListenFeed`): after every commit a process sends ``NOTIFY sbroker``
  with its session id, coalesced to at most one per ``NOTIFY_SECONDS`` (5 ms: the first
  commit after a quiet spell is told at once) by a thread of its own; a commit that only
  received (it freed groups, it brought no new work) is told within ``QUIET_NOTIFY_SECONDS``
  (every process wakes at each NOTIFY, so with many processes receiving one queue the
  wake-ups, one per process per commit, cost more than the receives; ``python -m
  bench.multihost`` measures it)
  and outside the committing transaction (NOTIFY takes a database-wide lock at commit: only
  that thread's tiny transactions pay it).  The session's connection LISTENs and tells the
  subscribers when another session committed.  While it cannot (the server is away) the
  engine's waiters look again every 0.5 s anyway (engine.notify.RECHECK_SECONDS): polling as
  the safety net.  A broker alone on its database (the heartbeat tells) sends no NOTIFY; a
  new session's first NOTIFY ("hello") ends that at once.
- **Ghost cleanup** (cleanup.py): after each heartbeat the thread looks whether received
  messages' dead rows have piled up in ``sb_messages``, and if so starts a VACUUM beside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from sbroker.core import threads
from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.storage.postgres import cleanup
from sbroker.storage.postgres.connection import BACKEND, SQL
from sbroker.storage.postgres.connector import Connector
from sbroker.storage.subscribers import Subscribers

log = logging.getLogger("sbroker.storage")

HEARTBEAT_SECONDS = 1.0
GRACE_SECONDS = 3.0
NOTIFY_SECONDS = 0.005
QUIET_NOTIFY_SECONDS = 0.1
LISTEN_SLICE = 0.5  # the session thread looks at its stop flag at least this often
RECONNECT_MAX = 2.0


class ListenFeed:
    """The PostgreSQL :class:`~sbroker.storage.ports.ChangeFeed`: NOTIFY after local commits
    (one sender thread, coalesced), LISTEN on the session's connection
    (:class:`LeaseLiveness` runs it)."""

    def __init__(self, connector: Connector, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._connector = connector
        self._clock = clock
        self._subscribers = Subscribers(clock)
        self.session: int | None = None
        self._lock = threading.Lock()
        self._due = threading.Condition(self._lock)
        self._urgent = False  # a commit that other sessions should hear of at once
        self._quiet_at: float | None = None  # when a receive-only commit is to be told
        self._worker: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self.sent = 0
        self.noticed = 0  # every change noticed is told: a waiter never misses one
        # Whether another session has the database open (the heartbeat looks every second;
        # a session that opens meanwhile polls every 0.5 s until then): else no NOTIFY.
        self.others = True

    def subscribe(self, on_change: Any, *, min_interval: float = 0.0) -> None:
        self._subscribers.subscribe(on_change, min_interval=min_interval)

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """The session's connection always listens: nothing to start."""
        yield

    def changed(self, news: bool = True) -> None:
        """Another session committed (or we may have missed that it did)."""
        self._subscribers.tell(news)

    # -- sending -----------------------------------------------------------------------------
    def committed(self, *, quiet: bool = False) -> None:
        """This process committed: tell the others soon (coalesced); ``quiet``: it only
        received, so within QUIET_NOTIFY_SECONDS is soon enough."""
        if not self.others:
            return
        with self._due:
            if self._closed:
                return
            # Wake the sender only when its deadline moved: it already sleeps until a quiet
            # NOTIFY is due, and waking it at every commit cost each reader a thread switch.
            if not quiet:
                if self._urgent:
                    return
                self._urgent = True
            elif self._urgent or self._quiet_at is not None:
                return
            else:
                self._quiet_at = self._clock.monotonic() + QUIET_NOTIFY_SECONDS
            self._due.notify()
            if self._worker is None:
                self._worker = threading.Thread(target=self._send_loop, daemon=True,
                                                name="sbroker-pg-notify")
                self._worker.start()

    def next_notify(self, now: float) -> float | None:
        """Seconds until the next NOTIFY is due (0: at once), or None: nothing to tell."""
        if self._urgent:
            return 0.0
        if self._quiet_at is None:
            return None
        return max(0.0, self._quiet_at - now)

    def _send(self, payload: str) -> None:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._connector.connect_raw()
        self._conn.execute(BACKEND.notify, (payload,))
        self.sent += 1

    def _send_loop(self) -> None:
        while True:
            with self._due:
                while not self._closed:
                    wait = self.next_notify(self._clock.monotonic())
                    if wait == 0.0:
                        break
                    self._due.wait(wait)
                if self._closed:
                    break
                self._urgent, self._quiet_at = False, None
            try:
                self._send(str(self.session))
            except Exception:  # the server is away: the waiters poll meanwhile
                log.debug("could not NOTIFY", exc_info=True)
                self._drop_conn()
                self._clock.sleep(0.1)
            self._clock.sleep(NOTIFY_SECONDS)
        self._drop_conn()

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def wake_listener(self, session: int) -> None:
        """Cut the session thread's wait short (it is stopping)."""
        with contextlib.suppress(Exception), self._connector.read() as conn:
            conn.execute(BACKEND.notify, (f"bye {session}",))

    def close(self) -> None:
        with self._due:
            self._closed = True
            thread = self._worker
            self._due.notify()
        if thread is not None and thread is not threading.current_thread():
            threads.join(thread, 10)
        else:
            self._drop_conn()


class LeaseLiveness:
    """The PostgreSQL :class:`~sbroker.storage.ports.Liveness`; its thread (heartbeats and
    LISTEN on the session's own connection) starts at :meth:`register` and is joined by
    :meth:`close`."""

    def __init__(self, connector: Connector, feed: ListenFeed, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._connector = connector
        self._clock = clock
        self._feed = feed
        self._conn: psycopg.Connection[Any] | None = None
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self.session: int | None = None
        self._row: tuple[Any, ...] = ()
        self._cleanup = cleanup.Cleanup(connector.connect_raw)

    def register(self, now: float) -> int:
        pid = os.getpid()
        self._row = (pid, _start_token(pid), socket.gethostname(), now)
        conn = self._connector.connect_raw()
        try:
            row = conn.execute(SQL.register_session, self._row).fetchone()
            assert row is not None
            session = int(row[0])
            conn.execute(BACKEND.lock_session, (session,))
            conn.execute(BACKEND.listen)
            # Sessions alone on the database send no NOTIFY: tell them they are not now.
            conn.execute(BACKEND.notify, (f"hello {session}",))
        except BaseException:
            conn.close()
            raise
        self._conn, self.session, self._feed.session = conn, session, session
        self._connector.application_name = f"sbroker {session}"
        self._worker = threading.Thread(target=self._run, daemon=True,
                                        name="sbroker-pg-session")
        self._worker.start()
        return session

    def dead(self, own: int) -> list[int]:
        with self._connector.read() as conn:
            return [int(r[0]) for r in conn.query_all(BACKEND.dead_sessions,
                                                      (own, GRACE_SECONDS))]

    def alive(self, session: int) -> bool:
        with self._connector.read() as conn:
            row = conn.query_one(BACKEND.session_alive, (session, GRACE_SECONDS))
        return bool(row and row[0])

    # -- the session's thread ---------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.1
        clock = self._clock
        beat = clock.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.is_set():
            try:
                conn = self._conn or self._reconnect()
                backoff = 0.1
                wait = min(LISTEN_SLICE, max(0.0, beat - clock.monotonic()))
                for note in conn.notifies(timeout=wait):
                    if note.payload == f"bye {self.session}":
                        self._stop.set()
                        break
                    if note.payload != str(self.session):
                        self._feed.others = True
                        self._feed.changed()
                if clock.monotonic() >= beat and not self._stop.is_set():
                    self._beat(conn)
                    self._cleanup.after_heartbeat(conn)
                    beat = clock.monotonic() + HEARTBEAT_SECONDS
            except Exception:
                if self._stop.is_set():
                    break
                log.debug("the session's connection failed; reconnecting", exc_info=True)
                self._drop()
                self._feed.changed()  # we may have missed news: waiters look again
                self._stop.wait(backoff)
                backoff = min(2 * backoff, RECONNECT_MAX)
        self._drop()

    def _beat(self, conn: psycopg.Connection[Any]) -> bool:
        """Renew the session's heartbeat; False when its row is gone.  Tells the feed
        whether another session has the database open."""
        row = conn.execute(BACKEND.heartbeat, (self.session, self.session)).fetchone()
        self._feed.others = row is None or bool(row[0])
        return row is not None

    def _reconnect(self) -> psycopg.Connection[Any]:
        conn = self._connector.connect_raw()
        try:
            conn.execute(BACKEND.lock_session, (self.session,))
            if not self._beat(conn):
                log.warning("this broker's session %s was reaped while the server was away;"
                            " registering it again", self.session)
                conn.execute(BACKEND.reregister_session, (self.session, *self._row))
            conn.execute(BACKEND.listen)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._feed.changed()
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Stop the thread; the session's lock goes with its connection."""
        self._stop.set()
        thread, self._worker = self._worker, None
        if thread is not None and self.session is not None:
            self._feed.wake_listener(self.session)
            threads.join(thread, 10)
        self._drop()
        self._cleanup.close()


def _start_token(pid: int) -> str:
    """Something that changes if ``pid`` is reused (Linux: the process start time)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"
