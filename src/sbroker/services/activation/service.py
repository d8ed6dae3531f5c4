"""Queue monitors and internal activation: the background service of a started broker.

The engine's hooks (message arrival, RECEIVE, waiting sessions, rollback, ALTER QUEUE) record
facts and wake the service; each pass re-evaluates the monitors (also every
``monitor_interval`` seconds on the broker's clock, and when the store's change feed
says another process committed) and starts procedure instances in worker threads or posts
QUEUE_ACTIVATION event notifications.  A queue with internal activation on is served by its
procedure; a queue without it but with a QUEUE_ACTIVATION subscription is activated
externally.  The
monitors' facts about waiting sessions and empty results are this process's; one started
broker per database should run the monitors (two would both activate).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sbroker.core import threads, tracing
from sbroker.core.catalog import Queue
from sbroker.core.clock import SYSTEM_CLOCK
from sbroker.core.errors import BrokerError, InvalidArgumentError
from sbroker.engine import stopping
from sbroker.engine.api import BrokerAPI, EngineAPI
from sbroker.engine.listeners import Listener
from sbroker.services.activation.monitor import EXTERNAL, INTERNAL, Monitor
from sbroker.services.loop import ClockLoop
from sbroker.storage.ports import Connection

log = logging.getLogger("sbroker.activation")
CROSS_PROCESS_POLL = 0.02  # seconds between checks for commits by other processes
STOP_TIMEOUT = 10.0  # how long broker.stop() waits for activated procedures to return
PUBLISH_SECONDS = 0.5  # monitor rows reach the database at most this often (views: at once)

_MONITOR_FIELDS = ("queue_id", "activation_kind", "state", "last_empty_rowset_time",
                   "last_activated_time", "tasks_waiting", "tasks_running", "tasks_started",
                   "tasks_failed", "notifications_sent", "last_error")


@dataclass
class ActivationContext:
    """What an activated procedure gets: ``procedure(ctx)``.  Return when the queue stays
    empty; return soon once ``stopping`` is set (the broker is stopping)."""

    broker: BrokerAPI
    queue: str
    task_id: int
    stopping: threading.Event = field(default_factory=threading.Event)
    _request: Callable[[], None] = field(default=lambda: None, repr=False)

    def request_reader(self) -> None:
        """Ask for another instance of this procedure now — started when the queue has
        messages no reader has taken and fewer than ``max_queue_readers`` run — instead of
        waiting for the monitor's ramp of one reader per ``monitor_interval``.  Cheap when
        nothing is needed; the task scheduler's executor calls it after each task it takes."""
        self._request()


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

    def __init__(self, engine: EngineAPI, facade: BrokerAPI, monitor_interval: float) -> None:
        super().__init__(engine.clock, "sbroker-activation")
        self.engine = engine
        self.facade = facade  # what activated procedures get as ctx.broker
        self.monitor_interval = monitor_interval
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
        self._watching = contextlib.ExitStack()  # the change feed's watch while running
        self._published: dict[int, tuple[Any, ...]] = {}  # queue -> the row in the database
        self._published_at = 0.0
        self._publish_lock = threading.Lock()
        engine.listeners.add(_Hooks(self))
        engine.views.before_read(["dm_broker_queue_monitors"], self.publish)
        engine.store.feed.subscribe(self._changed_elsewhere, min_interval=CROSS_PROCESS_POLL)

    # -- facts ------------------------------------------------------------------------------
    def monitor(self, queue_id: int) -> Monitor:
        """The monitor record of a queue (created on first mention); call with ``lock`` held."""
        mon = self._monitors.get(queue_id)
        if mon is None:
            cat = self.engine.current_catalog  # no database access here: hooks call this
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
        now = self.engine.clock.now()
        interval = self.monitor_interval
        with self.lock:
            for qid in ids:
                if qid not in self._monitored:
                    continue
                mon = self._monitors.get(qid)
                if mon is None or mon.event_may_activate(now, interval):
                    return False
        return True

    def request_reader(self, queue_id: int) -> None:
        """A running procedure of the queue wants another reader now (monitor rule c)."""
        with self.lock:
            mon = self._monitors.get(queue_id)
            if mon is None or (mon.max_readers is not None
                               and mon.tasks_running >= mon.max_readers):
                return  # no room: nothing to do, and no pass
            mon.wanted = True
        self.touch((queue_id,))

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
    def publish(self, *, force: bool = True) -> float | None:
        """Write this process's monitor rows where they changed (``force=False``: at most
        every PUBLISH_SECONDS; the views call it with force, so they are exact here).
        Returns the seconds until rows held back by that limit may be written, else None."""
        with self.lock:
            if self.running:
                rows = {q: tuple(self._monitors[q].row()[k] for k in _MONITOR_FIELDS)
                        for q in sorted(self._monitored) if q in self._monitors}
            else:
                rows = {}
        with self._publish_lock:
            if rows == self._published:
                return None
            now = self.clock.monotonic()
            if not force and now - self._published_at < PUBLISH_SECONDS:
                return self._published_at + PUBLISH_SECONDS - now
            session = self.engine.session_id
            gone = [q for q in self._published if q not in rows]
            changed = [(session, *row) for q, row in rows.items()
                       if self._published.get(q) != row]

            def write(conn: Connection) -> None:
                if not rows:
                    conn.execute(conn.sql.drop_session_monitors, (session,))
                    return
                conn.executemany(conn.sql.drop_monitor, [(session, q) for q in gone])
                conn.executemany(conn.sql.save_monitor, changed)

            self.engine.store.commit_path.run(write, durable=False)
            self._published = rows
            self._published_at = now
            return None

    def _publish_task(self, task: _Task, *, running: bool) -> None:
        session = self.engine.session_id
        run = self.engine.store.commit_path.run
        if running:
            row = (session, task.task_id, task.queue_id, task.procedure_name, task.started_at,
                   task.thread.name if task.thread else None)
            run(lambda conn: conn.execute(conn.sql.save_activated_task, row), durable=False)
        else:
            run(lambda conn: conn.execute(conn.sql.drop_activated_task, (session, task.task_id)),
                durable=False)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._dirty = True
        with self.lock:
            for mon in self._monitors.values():
                mon.seen_empty = True
        # While running, other processes' commits matter: keep the change feed looking.
        self._watching.enter_context(self.engine.store.feed.watch())
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
            self.engine.notifier.bump()  # a procedure waiting in RECEIVE stops waiting
        # Real time on purpose, whatever the broker's clock: threads join in real time.
        end = SYSTEM_CLOCK.monotonic() + self.stop_timeout
        for task in tasks:
            threads.join(task.thread, max(0.0, end - SYSTEM_CLOCK.monotonic()))
        with self.lock:
            left = sorted(self._tasks)
        if left:
            log.warning("activated procedures still running after stop (%d after %g s: tasks"
                        " %s)", len(left), self.stop_timeout, left,
                        extra={"task_ids": left, "timeout": self.stop_timeout})
        self._watching.close()
        self.publish()  # no monitor rows while stopped

    # -- the monitor pass ---------------------------------------------------------------------
    def _changed_elsewhere(self) -> None:
        """The change feed: some other connection committed (another process, or a commit
        of this one by another connection): look again."""
        self._dirty = True
        if self.running:
            self.wake()

    def run_once(self) -> float | None:
        now = self.clock.now()
        if self._dirty or now >= self._next_due:
            self._dirty = False
            self._next_due = self.evaluate(now)
        # Rows the rate limit held back are written by a later pass, not left stale in the
        # other brokers' views until the next decision (up to monitor_interval away).
        held_back = self.publish(force=False)
        if held_back is None:
            return self._next_due
        return min(self._next_due, now + held_back)

    def evaluate(self, now: float) -> float:
        """Re-evaluate every monitor; starts readers / posts notifications.  Next due time."""
        interval = self.monitor_interval
        cat = self.engine.catalog()
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
                self._notify(q, mon, now, interval)
        return next_due

    def _look(self, queue_id: int) -> tuple[bool, bool]:
        store = self.engine.store
        pending = store.pending_locks()
        with store.read() as conn:
            ready, available = conn.execute(conn.sql.queue_look, (queue_id, pending)).fetchone()
        return bool(ready), bool(available)

    def _notify(self, q: Queue, mon: Monitor, now: float, interval: float) -> None:
        from sbroker.engine import events

        claim = (q.queue_id, self.engine.session_id, now, now - interval)
        try:
            if not self.engine.store.commit_path.run(
                    lambda conn: conn.execute(conn.sql.claim_activation_notice,
                                              claim).rowcount == 1, durable=False):
                # Another broker on this database notified within monitor_interval: one
                # notification, as from one broker (its monitor takes the next).
                log.info("queue activation notified by another broker", extra={"queue": q.name})
                return
            sent = events.post_event(self.engine, q.name, "QUEUE_ACTIVATION")
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
                     ActivationContext(self.facade, q.name, task_id,
                                       _request=lambda: self.request_reader(q.queue_id)))
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
            procedure = self.engine.procedures.get(task.queue_name, task.procedure_name)
            traced = contextlib.nullcontext() if tracing.TRACER is None else (
                tracing.activated(task.queue_name))  # its work: "process" spans
            with stopping.bound(task.ctx.stopping), traced:
                resolve_procedure(procedure)(task.ctx)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            where = {"queue": task.queue_name, "task_id": task.task_id,
                     "procedure": task.procedure_name}
            if isinstance(exc, BrokerError):  # says what failed: no traceback to read
                log.error("activated procedure failed: %s", exc, extra=where)
            else:
                log.exception("activated procedure failed", extra=where)
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


class _Hooks(Listener):
    """Engine callbacks: record the fact, wake the monitor pass; never touch the database."""

    def __init__(self, service: ActivationService) -> None:
        self.s = service

    def arrived(self, queue_ids: Iterable[int]) -> None:
        self.s.touch(queue_ids)

    def received(self, queue_id: int, *, empty: bool) -> None:
        s = self.s
        now = s.engine.clock.now()
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
