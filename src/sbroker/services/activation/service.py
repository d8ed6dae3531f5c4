"""Queue monitors and internal activation: the background service of a started broker.

The engine's hooks (message arrival, RECEIVE, waiting sessions, rollback, ALTER QUEUE) record
facts and wake the service; each pass re-evaluates the monitors (also every
``monitor_interval`` seconds on the broker's clock, and, on the system clock, when another
process commits) and starts procedure instances in worker threads or posts QUEUE_ACTIVATION
event notifications.  A queue with internal activation on is served by its procedure; a
queue without it but with a QUEUE_ACTIVATION subscription is activated externally.  The
monitors' facts about waiting sessions and empty results are this process's; one started
broker per database should run the monitors (two would both activate).
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sbroker.core.clock import SystemClock
from sbroker.core.errors import InvalidArgumentError
from sbroker.engine import stopping
from sbroker.engine.catalog import Queue
from sbroker.engine.hooks import EngineHooks
from sbroker.services.activation.monitor import EXTERNAL, INTERNAL, Monitor
from sbroker.services.loop import ClockLoop
from sbroker.storage.sqlite.sweeper import live

if TYPE_CHECKING:
    from sbroker.broker import Broker

log = logging.getLogger("sbroker.activation")
CROSS_PROCESS_POLL = 0.02  # seconds between checks for commits by other processes
STOP_TIMEOUT = 10.0  # how long broker.stop() waits for activated procedures to return
PUBLISH_SECONDS = 0.5  # monitor rows reach the database at most this often (views: at once)

_TASK_ROW = (
    "INSERT OR REPLACE INTO sb_activated_tasks(session_id, task_id, queue_id, procedure_name,"
    " started_at, thread_name) VALUES (?, ?, ?, ?, ?, ?)"
)
_TASK_GONE = "DELETE FROM sb_activated_tasks WHERE session_id = ? AND task_id = ?"
_MONITOR_ROW = (
    "INSERT OR REPLACE INTO sb_queue_monitors(session_id, queue_id, activation_kind, state,"
    " last_empty_rowset_time, last_activated_time, tasks_waiting, tasks_running,"
    " tasks_started, tasks_failed, notifications_sent, last_error)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_MONITORS_GONE = "DELETE FROM sb_queue_monitors WHERE session_id = ?"
_MONITOR_GONE = "DELETE FROM sb_queue_monitors WHERE session_id = ? AND queue_id = ?"
_MONITOR_FIELDS = ("queue_id", "activation_kind", "state", "last_empty_rowset_time",
                   "last_activated_time", "tasks_waiting", "tasks_running", "tasks_started",
                   "tasks_failed", "notifications_sent", "last_error")

_LOOK = (  # (any ready message, any ready message in a group no transaction holds)
    "SELECT EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = ?1 AND m.status = 1"
    f" AND {live('m')}),"
    " EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = ?1 AND m.status = 1"
    f" AND {live('m')}"
    " AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = m.group_id)"
    " AND m.group_id NOT IN (SELECT value FROM json_each(?2)))"  # locks not written yet
)


@dataclass
class ActivationContext:
    """What an activated procedure gets: ``procedure(ctx)``.  Return when the queue stays
    empty; return soon once ``stopping`` is set (the broker is stopping)."""

    broker: Broker
    queue: str
    task_id: int
    stopping: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Task:
    task_id: int
    queue_id: int
    queue_name: str
    procedure_name: str
    started_at: float
    ctx: ActivationContext
    thread: threading.Thread | None = None


def resolve_procedure(procedure: Callable[..., Any] | str) -> Callable[..., Any]:
    """A callable as is, or ``"package.module:function"`` imported now."""
    if callable(procedure):
        return procedure
    module_name, _, attr = procedure.partition(":")
    if not module_name or not attr:
        raise InvalidArgumentError(f"activation procedure {procedure!r}: use 'module:function'")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise InvalidArgumentError(f"activation procedure {procedure!r} is not callable")
    return target  # type: ignore[no-any-return]


class ActivationService(ClockLoop):
    """Queue monitors, activated tasks, and the two dynamic views that show them."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker.clock, "sbroker-activation")
        self.broker = broker
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self.stop_timeout = STOP_TIMEOUT
        self.internal = True  # False: monitor only external activation (the activator)
        self._monitors: dict[int, Monitor] = {}
        self._monitored: set[int] = set()
        self._tasks: dict[int, _Task] = {}
        self._task_ids = itertools.count(1)
        self._dirty = True
        self._next_due = 0.0
        self._poll_conn: sqlite3.Connection | None = None
        self._data_version: int | None = None
        self._published: dict[int, tuple[Any, ...]] = {}  # queue -> the row in the database
        self._published_at = 0.0
        self._publish_lock = threading.Lock()
        broker.hooks = _Hooks(self)
        broker.register_view_refresher("dm_broker_queue_monitors", self.publish)

    # -- facts ------------------------------------------------------------------------------
    def monitor(self, queue_id: int) -> Monitor:
        """The monitor record of a queue (created on first mention); call with ``lock`` held."""
        mon = self._monitors.get(queue_id)
        if mon is None:
            cat = self.broker._catalog  # no database access here: hooks call this
            q = cat.queues_by_id.get(queue_id) if cat is not None else None
            mon = Monitor(queue_id, q.name if q else f"#{queue_id}")
            self._monitors[queue_id] = mon
        return mon

    def touch(self, queue_ids: Iterable[int]) -> None:
        """Something happened: re-evaluate at once (if the service runs), unless it happened
        only in queues for which no pass could do anything now (see ``_moot``)."""
        self._dirty = True
        if self.running and not self._moot(queue_ids):
            self.wake()

    def _moot(self, queue_ids: Iterable[int]) -> bool:
        """True when every queue named (at least one) is one a pass cannot activate for
        because of this event: not monitored (a queue becomes monitored only by DDL, which
        wakes the service through ``altered``, or by another process, which the cross-process
        poll sees), or internally activated with readers running and nothing but time able to
        change the decision (``Monitor.event_may_activate``).  A busy executor then costs no
        monitor pass per message and RECEIVE."""
        ids = tuple(queue_ids)
        if not ids:
            return False
        now = self.broker.clock.now()
        interval = self.broker.monitor_interval
        with self.lock:
            for qid in ids:
                if qid not in self._monitored:
                    continue
                mon = self._monitors.get(qid)
                if mon is None or mon.event_may_activate(now, interval):
                    return False
        return True

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Wait (real time) until ``predicate()`` holds; it is re-checked, with the service's
        lock held, whenever a task starts or exits and after every monitor pass."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def running_tasks(self, queue: str | None = None) -> int:
        """How many activated procedures run now (for one queue, or all)."""
        with self.lock:
            return sum(1 for t in self._tasks.values() if queue in (None, t.queue_name))

    # -- views (kept in the database: instance-wide, as SQL Server's DMVs) --------------------
    def publish(self, *, force: bool = True) -> None:
        """Write this process's monitor rows where they changed (``force=False``: at most
        every PUBLISH_SECONDS; the views call it with force, so they are exact here)."""
        with self.lock:
            if self.running:
                rows = {q: tuple(self._monitors[q].row()[k] for k in _MONITOR_FIELDS)
                        for q in sorted(self._monitored) if q in self._monitors}
            else:
                rows = {}
        with self._publish_lock:
            if rows == self._published:
                return
            now = time.monotonic()
            if not force and now - self._published_at < PUBLISH_SECONDS:
                return
            session = self.broker.session_id
            gone = [q for q in self._published if q not in rows]
            changed = [(session, *row) for q, row in rows.items()
                       if self._published.get(q) != row]

            def write(conn: sqlite3.Connection) -> None:
                if not rows:
                    conn.execute(_MONITORS_GONE, (session,))
                    return
                conn.executemany(_MONITOR_GONE, [(session, q) for q in gone])
                conn.executemany(_MONITOR_ROW, changed)

            self.broker.db.writer.run(write, durable=False)
            self._published = rows
            self._published_at = now

    def _publish_task(self, task: _Task, *, running: bool) -> None:
        session = self.broker.session_id
        if running:
            row = (session, task.task_id, task.queue_id, task.procedure_name, task.started_at,
                   task.thread.name if task.thread else None)
            self.broker.db.writer.run(lambda conn: conn.execute(_TASK_ROW, row), durable=False)
        else:
            self.broker.db.writer.run(
                lambda conn: conn.execute(_TASK_GONE, (session, task.task_id)), durable=False)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._dirty = True
        with self.lock:
            for mon in self._monitors.values():
                mon.seen_empty = True
        super().start()

    def stop(self) -> None:
        """Stop the monitors, then ask the activated procedures to return and wait (bounded)."""
        super().stop()
        with self.lock:
            tasks = list(self._tasks.values())
            self._monitored = set()
        for task in tasks:
            task.ctx.stopping.set()
        if tasks:
            self.broker.notifier.bump()  # a procedure waiting in RECEIVE stops waiting
        end = time.monotonic() + self.stop_timeout
        for task in tasks:
            if task.thread is not None:
                task.thread.join(max(0.0, end - time.monotonic()))
        with self.lock:
            left = sorted(self._tasks)
        if left:
            log.warning("activated procedures still running after stop",
                        extra={"task_ids": left, "timeout": self.stop_timeout})
        if self._poll_conn is not None:
            self.broker.db.release(self._poll_conn)
            self._poll_conn = None
            self._data_version = None
        self.publish()  # no monitor rows while stopped

    # -- the monitor pass ---------------------------------------------------------------------
    def _changed_elsewhere(self) -> bool:
        """Whether some other connection committed since the last look (system clock only)."""
        if not isinstance(self.clock, SystemClock):
            return False
        if self._poll_conn is None:
            self._poll_conn = self.broker.db.acquire()
        version = int(self._poll_conn.execute("PRAGMA data_version").fetchone()[0])
        changed = version != self._data_version
        self._data_version = version
        return changed

    def run_once(self) -> float | None:
        now = self.clock.now()
        poll = isinstance(self.clock, SystemClock)
        changed = self._changed_elsewhere()
        if not (self._dirty or changed or now >= self._next_due):
            return min(self._next_due, now + CROSS_PROCESS_POLL) if poll else self._next_due
        self._dirty = False
        self._next_due = self.evaluate(now)
        self.publish(force=False)
        return min(self._next_due, now + CROSS_PROCESS_POLL) if poll else self._next_due

    def evaluate(self, now: float) -> float:
        """Re-evaluate every monitor; starts readers / posts notifications.  Next due time."""
        b = self.broker
        interval = b.monitor_interval
        cat = b.catalog
        notified = {qid for _, qid, event, _ in cat.notifications if event == "QUEUE_ACTIVATION"}
        monitored: dict[int, tuple[Queue, str]] = {}
        for q in cat.queues.values():
            if q.activation_defined and q.activation_status:
                if self.internal:
                    monitored[q.queue_id] = (q, INTERNAL)
            elif q.queue_id in notified:
                monitored[q.queue_id] = (q, EXTERNAL)
        with self.lock:
            self._monitored = set(monitored)
        next_due = now + interval
        for qid, (q, kind) in monitored.items():
            with self.lock:
                mon = self.monitor(qid)
                mon.queue_name, mon.kind = q.name, kind
                mon.max_readers = q.max_queue_readers
                look = q.status and mon.needs_look(now, interval, q.max_queue_readers)
                empties = mon.empty_receives
            ready, available = self._look(qid) if look else (None, None)
            with self.lock:
                if mon.empty_receives != empties:
                    # A RECEIVE came back empty while we looked: our look (messages waiting)
                    # and "the queue was found empty" would be mixed up as an arrival to an
                    # empty queue. Look again instead of deciding on it.
                    self._dirty = True
                    next_due = now
                    continue
                activate = mon.decide(now, interval, enabled=q.status, available=available,
                                      max_readers=q.max_queue_readers, ready=ready)
                next_due = min(next_due, mon.next_check(now, interval))
                task = self._new_task(q, mon, now) if activate and kind == INTERNAL else None
                self._changed.notify_all()
            if task is not None:
                self._launch(task)
            elif activate:
                self._notify(q, mon)
        return next_due

    def _look(self, queue_id: int) -> tuple[bool, bool]:
        lazy = json.dumps(self.broker.db.writer.lazy_groups())
        with self.broker.db.connection() as conn:
            ready, available = conn.execute(_LOOK, (queue_id, lazy)).fetchone()
        return bool(ready), bool(available)

    def _notify(self, q: Queue, mon: Monitor) -> None:
        from sbroker.engine import events

        try:
            sent = events.post_event(self.broker, q.name, "QUEUE_ACTIVATION")
        except Exception as exc:
            log.exception("QUEUE_ACTIVATION notification failed", extra={"queue": q.name})
            with self.lock:
                mon.last_error = f"{type(exc).__name__}: {exc}"
            return
        with self.lock:
            mon.notifications_sent += sent
        log.info("queue activation notified", extra={"queue": q.name, "notifications": sent})

    # -- internal activation -----------------------------------------------------------------
    def _new_task(self, q: Queue, mon: Monitor, now: float) -> _Task:
        task_id = next(self._task_ids)
        task = _Task(task_id, q.queue_id, q.name, q.activation_procedure or "?", now,
                     ActivationContext(self.broker, q.name, task_id))
        self._tasks[task_id] = task
        mon.tasks_running += 1
        mon.tasks_started += 1
        return task

    def _launch(self, task: _Task) -> None:
        thread = threading.Thread(target=self._run_task, args=(task,),
                                  name=f"sbroker-activated-{task.queue_name}-{task.task_id}",
                                  daemon=True)
        task.thread = thread
        log.info("activating procedure", extra={
            "queue": task.queue_name, "task_id": task.task_id, "procedure": task.procedure_name})
        self._publish_task(task, running=True)
        thread.start()

    def _run_task(self, task: _Task) -> None:
        error: str | None = None
        try:
            procedure = self.broker._procedures.get(task.queue_name, task.procedure_name)
            with stopping.bound(task.ctx.stopping):
                resolve_procedure(procedure)(task.ctx)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.exception("activated procedure failed", extra={
                "queue": task.queue_name, "task_id": task.task_id,
                "procedure": task.procedure_name})
        finally:
            try:
                self._publish_task(task, running=False)
            except Exception:  # the broker is closing under it: the close drops the rows
                log.debug("could not remove activated task row", exc_info=True)
            with self.lock:
                self._tasks.pop(task.task_id, None)
                mon = self.monitor(task.queue_id)
                mon.tasks_running -= 1
                mon.failed = error is not None
                if error is not None:
                    mon.tasks_failed += 1
                    mon.last_error = error
                all_exited = mon.tasks_running == 0
                self._changed.notify_all()
            if all_exited:
                self.touch((task.queue_id,))


class _Hooks(EngineHooks):
    """Engine callbacks: record the fact, wake the monitor pass; never touch the database."""

    def __init__(self, service: ActivationService) -> None:
        self.s = service

    def arrived(self, queue_ids: Iterable[int]) -> None:
        self.s.touch(queue_ids)

    def received(self, queue_id: int, *, empty: bool) -> None:
        s = self.s
        now = s.broker.clock.now()
        with s.lock:
            s.monitor(queue_id).note_receive(now, empty=empty)
        s.touch((queue_id,))

    def waiting(self, queue_id: int, delta: int) -> None:
        with self.s.lock:
            self.s.monitor(queue_id).tasks_waiting += delta
        self.s.touch((queue_id,))

    def rolled_back(self, queue_ids: Iterable[int]) -> None:
        self.s.touch(queue_ids)

    def altered(self, queue_name: str) -> None:
        self.s.touch(())
