"""``broker.scheduler()``: one dialog from the caller to the executor for all its tasks
(GetScheduler on entry, ExecAsync, Synchronization, ReleaseScheduler on exit — seed 002)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import os
import threading
from collections import deque
from types import TracebackType

from sbroker.apps.scheduler import schema
from sbroker.apps.scheduler.attempts import Stop
from sbroker.apps.scheduler.executor import CANCEL, TIMED_OUT, recover_dead_tasks
from sbroker.apps.scheduler.queries import read, sql
from sbroker.apps.spark import (
    Runner,
    SparkProgress,
    Task,
    TaskFailed,
    TaskResult,
    as_task,
    task_to_dict,
)
from sbroker.core import messages as m
from sbroker.core.errors import BrokerError, InvalidArgumentError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

RECOVERY_SECONDS = 5.0  # while waiting, look for tasks whose executor died this often
NO_READER_SECONDS = 5.0  # a wait with no reader in sight is reported after this long
NOT_STARTED = ("no executor reader can run the queued tasks: the broker is not started."
               " Call broker.start() (or Broker.open(..., start=True)) before waiting, or run"
               " `sbroker serve` on this database")
log = logging.getLogger("sbroker.scheduler")
_names = itertools.count(1)


def _parse_time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


class Scheduler:
    """A caller's scheduler; use as ``with broker.scheduler() as s:``."""

    def __init__(self, broker: BrokerAPI, name: str | None = None, *,
                 max_concurrency: int | None = None, priority: int | None = None) -> None:
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise InvalidArgumentError("max_concurrency must be an int >= 1 or None")
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 10
        ):
            raise InvalidArgumentError("priority must be an int from 1 to 10 or None")
        if schema.TARGET_SERVICE not in broker.catalog.services:
            raise BrokerError(
                "the executor is not installed: call broker.install_executor() first"
            )
        self.broker = broker
        self._sql = sql(broker)
        self.name = name or f"scheduler-{os.getpid()}-{next(_names)}"
        self.max_concurrency = max_concurrency
        self.priority = priority or 5
        self.handle: str | None = None
        self._in_flight: set[int] = set()
        self._buffer: deque[TaskResult] = deque()  # received, not yet returned
        self._ended: str | None = None  # why the dialog ended under us, once it has
        self._collected: list[TaskResult] = []
        self._sent: dict[int, int] = {}  # log id -> place in the sending order, until waited
        self._started: dict[int, dt.datetime] = {}
        self._lock = threading.Lock()

    # -- GetScheduler / ReleaseScheduler ---------------------------------------------------
    def __enter__(self) -> Scheduler:
        with self.broker.transaction() as tx:
            self.handle = open_dialog(self.broker, tx, self.name, self.priority)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(cancel=exc_type is not None)

    def close(self, *, cancel: bool = False) -> None:
        """Release the scheduler: cancel what is still queued (if asked) and end the dialog."""
        if self.handle is None:
            return
        if cancel:
            for log_id in list(self._in_flight):
                self.cancel(log_id)
        try:
            with self.broker.transaction() as tx:
                close_dialog(self.broker, tx, self.handle)
        except BrokerError:
            pass  # ended already (e.g. by an administrator): nothing to release
        self.handle = None

    # -- ExecAsync ---------------------------------------------------------------------------
    def exec_async(self, task: Task | str, *, timeout: float | None = None) -> int:
        """Log the task in ExecutionLog and send it to the executor; returns its log id.
        ``timeout``: seconds the task may run once started; then it is stopped and reported
        failed ("timed out after N s") whether or not its code returns."""
        handle = self._need_handle()
        task = as_task(task)
        check_timeout(timeout)
        while self.max_concurrency is not None and len(self._in_flight) >= self.max_concurrency:
            self._buffer.extend(self._receive_done(None))  # the seed's semaphore
        with self.broker.transaction() as tx:
            log_id = send_task(self.broker, tx, handle, task, self.name, timeout=timeout)
        self._in_flight.add(log_id)
        self._sent[log_id] = len(self._sent)
        return log_id

    # -- Synchronization ---------------------------------------------------------------------
    def synchronize(self, timeout: float | None = None) -> TaskResult:
        """Wait for one task to finish and return its result (``TimeoutError`` after
        ``timeout`` seconds; a ``BrokerError`` at once when no reader can ever run it)."""
        if not self._buffer:
            if not self._in_flight:
                raise BrokerError("synchronize() with no task in flight would wait forever")
            self._buffer.extend(self._receive_done(timeout))
        result = self._buffer.popleft()
        self._collected.append(result)
        return result

    def wait_all(self, timeout: float | None = None) -> list[TaskResult]:
        """Results of every task sent since the last ``wait_all``, in the order the tasks were
        sent (``a, b = s.wait_all()``); ``TaskFailed`` if any failed, ``TimeoutError`` when
        they are not all in after ``timeout`` seconds (the results that came are kept for
        the next call)."""
        clock = self.broker.clock
        deadline = None if timeout is None else clock.now() + timeout
        while self._buffer or self._in_flight:
            left = None if deadline is None else max(0.0, deadline - clock.now())
            try:
                self.synchronize(left)
            except TimeoutError:
                raise TimeoutError(f"{len(self._in_flight)} task(s) of {self.name} still"
                                   f" queued or running after {timeout} s") from None
        sent, self._sent = self._sent, {}
        results, self._collected = self._collected, []
        results.sort(key=lambda r: sent.get(r.log_id, len(sent)))
        if any(r.status != "succeeded" for r in results):
            raise TaskFailed(results)
        return results

    def _receive_done(self, timeout: float | None) -> list[TaskResult]:
        """Every AsyncDone waiting (at least one), taken in one transaction."""
        if self._ended is not None:
            raise BrokerError(f"the scheduler's dialog ended unexpectedly: {self._ended}")
        handle = self._need_handle()
        clock = self.broker.clock
        started = clock.now()
        deadline = None if timeout is None else started + timeout
        wait = 0.0  # first look without waiting: what is done is taken at once
        warned = False
        while True:
            with self.broker.transaction() as tx:
                msgs = tx.receive(schema.INITIATOR_QUEUE, conversation_handle=handle,
                                  timeout=wait)
                if any(msg.message_type_name in (m.END_DIALOG, m.ERROR) for msg in msgs):
                    tx.end_conversation(handle)
            results: list[TaskResult] = []
            for msg in msgs:  # committed: now they are ours
                if msg.message_type_name == schema.ASYNC_DONE:
                    results.append(self._result(msg))
                    continue
                if msg.message_type_name in (m.END_DIALOG, m.ERROR):
                    self.handle = None
                self._ended = msg.error()[1] if msg.is_error else msg.message_type_name
            if results:  # an unexpected message taken with them is raised on the next call
                return results
            if self._ended is not None:
                raise BrokerError(f"the scheduler's dialog ended unexpectedly: {self._ended}")
            if deadline is not None and clock.now() >= deadline:
                raise TimeoutError(f"no task of {self.name} finished within {timeout} s")
            recover_dead_tasks(self.broker)
            alone = self._no_reader_in_sight()
            if alone is not None:
                if not alone:
                    raise BrokerError(NOT_STARTED)
                if not warned and clock.now() - started >= NO_READER_SECONDS:
                    warned = True
                    log.warning("%s: no executor reader has taken a task for %.0f s: is a"
                                " broker with the executor started on this database"
                                " (broker.start(), or `sbroker serve`)?", self.name,
                                clock.now() - started)
            wait = RECOVERY_SECONDS if deadline is None else min(
                RECOVERY_SECONDS, max(0.0, deadline - clock.now()))

    def _no_reader_in_sight(self) -> bool | None:
        """None while a reader may run our queued tasks (the broker is started, a reader of
        this process serves, or none of our tasks is still queued); else whether another
        process has the database open (it may run the executor: wait, but say so after a
        while). False means nothing can ever run them."""
        state = self.broker.executor_state(create=False)
        if self.broker.started or (state is not None and state.readers > 0) or (
                not self._in_flight):
            return None
        [(queued,)] = read(self.broker, self._sql.queued_among,
                           (json.dumps(sorted(self._in_flight)),))
        if not queued:
            return None
        me = self.broker.session_id
        return any(row["session_id"] != me for row in self.broker.view("dm_broker_sessions"))

    def _result(self, msg: m.Message) -> TaskResult:
        result = result_of(msg)
        self._in_flight.discard(result.log_id)
        return result

    # -- cancel and monitoring -----------------------------------------------------------------
    def cancel(self, log_id: int) -> None:
        """Cancel a queued or running task; its result comes back as ``cancelled`` (for a
        running one within about a second, whether or not its code returns)."""
        cancel_task(self.broker, log_id)

    def started_at(self, log_id: int) -> dt.datetime | None:
        """When the task started running (None while queued)."""
        rows = read(self.broker, self._sql.task_start, (log_id,))
        if not rows or rows[0][1] == "queued":
            return None
        return _parse_time(rows[0][0])

    def progress(self, log_id: int) -> SparkProgress | None:
        """Spark task progress of a running task, when this process runs it."""
        state = self.broker.executor_state(create=False)
        return None if state is None else state.runner.progress(log_id)

    def _need_handle(self) -> str:
        if self.handle is None:
            raise BrokerError("the scheduler is not open: use it as `with broker.scheduler():`")
        return self.handle


def check_timeout(timeout: float | None) -> None:
    """``InvalidArgumentError`` unless ``timeout`` is None or a number of seconds > 0."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(
            timeout, int | float) or not timeout > 0):
        raise InvalidArgumentError(f"timeout must be a number of seconds > 0 or None, not"
                                   f" {timeout!r}")


def send_task(broker: BrokerAPI, tx: Transaction, handle: str, task: Task | str, pool: str,
              *, timeout: float | None = None) -> int:
    """ExecAsync inside the caller's transaction ``tx``: an ExecutionLog row for ``task`` and
    its AsyncSent on the scheduler dialog ``handle``; returns the log id.  A caller that
    records more in the same transaction (a pipeline run's attempt) gets it all or nothing.
    ``timeout``: the executor stops the task that many seconds after it started and reports
    it failed ("timed out after N s")."""
    check_timeout(timeout)
    body = task_to_dict(as_task(task))
    log_id = int(tx.execute(
        sql(broker).log_task,
        (f"{os.getpid()}:{threading.current_thread().name}", handle, json.dumps(body),
         dt.datetime.now(dt.UTC).isoformat(), pool),
    ).fetchone()[0])
    sent: dict[str, object] = {"log_id": log_id, "task": body, "pool": pool}
    if timeout is not None:
        sent["timeout"] = timeout
    tx.send(handle, schema.ASYNC_SENT, json.dumps(sent))
    return log_id


def open_dialog(broker: BrokerAPI, tx: Transaction, name: str, priority: int = 5) -> str:
    """GetScheduler inside ``tx``: a dialog to the executor, registered for fair serving."""
    handle: str = tx.begin_dialog(schema.INITIATOR_SERVICE, schema.TARGET_SERVICE,
                                  schema.CONTRACT)
    tx.execute(sql(broker).add_scheduler, (handle, tx.conversation_id(handle), name, priority,
                                           dt.datetime.now(dt.UTC).isoformat()))
    return handle


def close_dialog(broker: BrokerAPI, tx: Transaction, handle: str) -> None:
    """ReleaseScheduler inside ``tx``: end the dialog and forget its registration."""
    tx.end_conversation(handle)
    tx.execute(sql(broker).drop_scheduler, (handle,))


def result_of(msg: m.Message) -> TaskResult:
    """The TaskResult an AsyncDone message carries."""
    data = msg.json()
    start = _parse_time(data.get("start_time")) or dt.datetime.now(dt.UTC)
    end = _parse_time(data.get("end_time")) or start
    return TaskResult(int(data["log_id"]), data["status"], data.get("error"), start, end,
                      data.get("value"), data.get("error_details"))


def cancel_task(broker: BrokerAPI, log_id: int, *, timed_out: bool = False) -> bool:
    """Cancel a queued or running task from any process (an administrator, the dashboard, a
    pipeline's driver): a queued task is cancelled at once and never starts; a running one
    is stopped by its executor (it watches ``CancelRequested``: at once in this process,
    within 0.2 s in another), its Spark jobs cancelled, and its AsyncDone sent within
    ``GRACE`` seconds more whether or not its code returns.  ``timed_out``: the caller stops
    it for its deadline; it is reported ``failed`` ("timed out"), not ``cancelled``.  False
    when the task is not queued or running."""
    q = sql(broker)
    state = broker.executor_state(create=False)
    if state is not None:  # first: once the request is in the log, this process knows it
        state.request_stop(log_id, Stop.TIMED_OUT if timed_out else Stop.CANCELLED)
    with broker.transaction() as tx:
        marked = tx.execute(q.cancel_queued, (dt.datetime.now(dt.UTC).isoformat(), log_id)
                            ).rowcount
        marked += tx.execute(q.request_cancel, (TIMED_OUT if timed_out else CANCEL, log_id)
                             ).rowcount
    return bool(marked)


def install_runner(broker: BrokerAPI, runner: Runner) -> None:
    """Use ``runner`` (e.g. a StubRunner) for this broker's executor instead of Spark."""
    broker.use_executor_runner(runner)
