"""The executor: the activated procedure on QueueAsyncTarget that runs tasks (seed 002).

Each reader takes one AsyncSent message and marks its ExecutionLog row running in one
transaction (so the message is consumed exactly when the row says who runs it), runs the task
outside any transaction on an attempt thread it can walk away from (``attempts``: a cancel,
a timeout or the broker's stop ends the attempt whether or not its code returns), then
records the outcome and sends AsyncDone in the transaction that takes its next task (alone
when no task waits).  Readers pick the scheduler (conversation group) with the fewest tasks
running here, then the one served least recently, then the oldest waiting message: a
scheduler with a thousand queued tasks does not starve one with three.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import threading
import traceback
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.scheduler import schema
from sbroker.apps.scheduler.attempts import (
    GRACE,
    STOP_DRAIN,
    Attempt,
    Reader,
    Stop,
    code_traceback,
)
from sbroker.apps.scheduler.hooks import NO_HOOKS, TaskHooks, TaskScope
from sbroker.apps.scheduler.queries import read, sql
from sbroker.apps.spark import (
    Execution,
    PythonTask,
    Runner,
    Task,
    TaskStatus,
    execute,
    one_line_error,
    spark_ids_json,
    task_from_dict,
    task_to_json,
)
from sbroker.core import messages as m
from sbroker.core import threads
from sbroker.core.errors import (
    CommitConflictError,
    ConversationNotFoundError,
    ConversationStateError,
)
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

log = logging.getLogger("sbroker.executor")
# A reader returns after the queue stayed empty this long.  Seed 002 waits 30 s for the same
# reason: activation starts readers gradually (one per monitor_interval), so a reader kept for
# the next stage spares that stage the ramp.  Stopping the broker ends the wait at once.
IDLE_SECONDS = 30.0
CANCEL_POLL_SECONDS = 0.2
DIED = "the executor process died while running the task"
STOPPED = "the executor stopped while running the task"
#: ExecutionLog.CancelRequested: 1 asks for a cancel, 2 says the attempt timed out
CANCEL, TIMED_OUT = 1, 2
_EARLY_STOPS = 10_000  # stops asked for tasks not running here (yet) that are remembered
MAX_DETAILS = 64 * 1024  # characters of a failed task's traceback kept in ExecutionLog


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


@dataclass
class ExecutorState:
    """Per-broker executor state shared by its reader threads."""

    runner: Runner
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: Counter[str] = field(default_factory=Counter)  # conversation group -> tasks
    running_logs: dict[int, str] = field(default_factory=dict)  # log id -> group
    priorities: dict[str, int] = field(default_factory=dict)  # conversation id -> priority
    served: dict[str, int] = field(default_factory=dict)  # group -> when last served (a tick)
    tick: int = 0
    watcher: threading.Thread | None = None
    readers: int = 0  # threads of this process inside serve() now: the tasks have a reader
    stopping: threading.Event = field(default_factory=threading.Event)  # ends the watcher
    attempts: dict[int, Attempt[Execution]] = field(default_factory=dict)  # running here
    early_stops: OrderedDict[int, Stop] = field(default_factory=OrderedDict)  # not yet here
    abandoned: dict[int, Attempt[Execution]] = field(default_factory=dict)
    grace: float = GRACE  # seconds a stopped attempt gets to end before it is abandoned
    stop_drain: float = STOP_DRAIN  # seconds a running attempt gets when the broker stops

    def count_reader(self, delta: int) -> None:
        with self.lock:
            self.readers += delta

    def request_stop(self, log_id: int, why: Stop) -> bool:
        """Stop the attempt of ``log_id`` if it runs here (True), else remember the request
        for when it starts here."""
        with self.lock:
            attempt = self.attempts.get(log_id)
            if attempt is None:
                self.early_stops[log_id] = why
                while len(self.early_stops) > _EARLY_STOPS:
                    self.early_stops.popitem(last=False)
                return False
        return attempt.stop(why)

    def track(self, attempt: Attempt[Execution]) -> None:
        """An attempt starts here: cancel requests find it from now on."""
        with self.lock:
            self.attempts[attempt.log_id] = attempt
            early = self.early_stops.pop(attempt.log_id, None)
        if early is not None:
            attempt.stop(early)

    def untrack(self, attempt: Attempt[Execution]) -> None:
        """The attempt's outcome is decided; an abandoned one is kept in ``abandoned``
        until its code returns."""
        with self.lock:
            self.attempts.pop(attempt.log_id, None)
            if attempt.abandoned:
                self.abandoned[attempt.log_id] = attempt

    def stuck(self) -> list[int]:
        """Log ids of the attempts abandoned here whose code still runs."""
        with self.lock:
            for log_id in [i for i, a in self.abandoned.items() if a.done]:
                del self.abandoned[log_id]
            return sorted(self.abandoned)

    def close(self) -> None:
        """Stop and join the cancel watcher (the broker closes its executor state)."""
        self.stopping.set()
        with self.lock:
            watcher = self.watcher
        threads.join(watcher, 10)


def default_runner(broker: BrokerAPI) -> Runner:
    """A SparkRunner on the Spark settings stored by ``install_executor``."""
    from sbroker.apps.spark import SparkRunner

    return SparkRunner(schema.load_spark_config(broker))


def executor_state(broker: BrokerAPI) -> ExecutorState:
    """The executor state the broker owns (created on first use)."""
    state: ExecutorState = broker.executor_state()
    return state


def executor_procedure(ctx: Any) -> None:
    """Activation procedure: serve tasks until the queue stays empty for IDLE_SECONDS."""
    broker: BrokerAPI = ctx.broker
    state = executor_state(broker)
    recover_dead_tasks(broker)
    # The host first: executors of several hosts may serve one database (docs/postgresql.md).
    worker = f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"
    serve(broker, state, worker, wait=IDLE_SECONDS, stopping=getattr(ctx, "stopping", None),
          on_task=getattr(ctx, "request_reader", None))


@dataclass(frozen=True)
class Outcome:
    """A task's outcome, waiting for the transaction that records it and sends AsyncDone."""

    handle: str
    log_id: int
    status: str
    value: Any
    error: str | None
    job_ids: list[int]
    times: tuple[str, str] | None
    details: str | None = None  # the traceback of a failed task
    operation_ids: tuple[str, ...] = ()  # Spark Connect's, in place of job ids
    session: int | None = None  # the broker session whose reader ran it (None: not run)


def serve(broker: BrokerAPI, state: ExecutorState, worker: str, *, wait: float,
          stopping: threading.Event | None = None,
          on_task: Callable[[], None] | None = None) -> int:
    """Serve tasks until none came for ``wait`` seconds (or ``stopping`` is set); how many
    messages were handled.

    A task's outcome is recorded, and its AsyncDone sent, in the same transaction that takes
    the next task and marks it running: one commit per task instead of two while there is
    work.  When nothing is waiting, the outcome commits on its own at once.
    """
    outcome: Outcome | None = None
    handled = 0
    reader: Reader[Execution] = Reader(worker, grace=state.grace, drain=state.stop_drain)
    state.count_reader(+1)
    try:
        while stopping is None or not stopping.is_set():
            got = _take(broker, state, worker, outcome, wait=0.0 if outcome else wait)
            carried, outcome = outcome, None
            if got is None:
                if carried is None:
                    break
                continue  # the outcome is recorded: now wait for work
            handled += 1
            msg, payload = got
            if payload is not None:
                if on_task is not None:
                    on_task()  # more tasks may wait: another reader now, not after the ramp
                outcome = _run(broker, state, reader, msg, payload, stopping)
    finally:
        reader.close()
        state.count_reader(-1)
        if outcome is not None:
            _record(broker, outcome)
    return handled


def _record(broker: BrokerAPI, outcome: Outcome) -> None:
    """Record an outcome (and send its AsyncDone) in a transaction of its own; once more if
    its dialog ended before the commit (the AsyncDone then has no one to go to)."""
    try:
        with broker.transaction() as tx:
            _finish(broker, tx, outcome)
    except CommitConflictError:
        with broker.transaction() as tx:
            _finish(broker, tx, outcome)


def serve_one(broker: BrokerAPI, state: ExecutorState, worker: str, *, wait: float) -> bool:
    """Receive and run one task (or handle one control message); False if none came."""
    got = _take(broker, state, worker, None, wait=wait)
    if got is None:
        return False
    msg, payload = got
    if payload is not None:
        reader: Reader[Execution] = Reader(worker, grace=state.grace, drain=state.stop_drain)
        try:
            outcome = _run(broker, state, reader, msg, payload, None)
        finally:
            reader.close()
        _record(broker, outcome)
    return True


def _fair_groups(broker: BrokerAPI, tx: Transaction, state: ExecutorState) -> list[str]:
    """The ready groups, best first (read in the taking transaction: when it holds the
    writer, this costs no read snapshot of its own)."""
    groups = tx.ready_groups(schema.TARGET_QUEUE)
    unknown = {conv for _, _, _, conv in groups if conv not in state.priorities}
    if unknown:
        for conv, priority in tx.execute(sql(broker).scheduler_priorities):
            state.priorities[conv] = int(priority)
    with state.lock:
        ranked = sorted(
            groups,
            key=lambda g: (-state.priorities.get(g[3], 5), -g[1], state.running[g[0]],
                           state.served.get(g[0], 0), g[2]),
        )
    return [g[0] for g in ranked]


def _take(broker: BrokerAPI, state: ExecutorState, worker: str, outcome: Outcome | None, *,
          wait: float) -> tuple[m.Message, dict[str, Any] | None] | None:
    """One transaction: record ``outcome`` (if any), then take the next message fairly and
    mark its task running.  None when no message came (the outcome is recorded anyway).
    A task may outlive its dialog (its run recorded it timed out and ended): if the dialog
    ended before the commit, the outcome is recorded alone and the take made again."""
    if outcome is None:
        return _take_next(broker, state, worker, None, wait=wait)
    try:
        return _take_next(broker, state, worker, outcome, wait=wait)
    except CommitConflictError:
        _record(broker, outcome)
        return _take_next(broker, state, worker, None, wait=wait)


def _take_next(broker: BrokerAPI, state: ExecutorState, worker: str,
               outcome: Outcome | None, *,
               wait: float) -> tuple[m.Message, dict[str, Any] | None] | None:
    got = None
    with broker.transaction() as tx:
        if outcome is not None:
            _finish(broker, tx, outcome)  # first: the writer is held, reads below join it
        for group in [*_fair_groups(broker, tx, state), None]:
            msgs = tx.receive(schema.TARGET_QUEUE, top=1, conversation_group_id=group)
            if msgs:
                got = _started(broker, tx, worker, msgs[0])
                break
    if got is None and wait > 0:
        # Wait in a transaction of its own: the one above may hold group locks it took.
        with broker.transaction() as tx:
            msgs = tx.receive(schema.TARGET_QUEUE, top=1, timeout=wait)
            got = _started(broker, tx, worker, msgs[0]) if msgs else None
    if got is not None:
        msg, payload = got
        group = msg.conversation_group_id
        with state.lock:
            if payload is None:
                if msg.message_type_name in (m.END_DIALOG, m.ERROR):
                    state.served.pop(group, None)
            else:  # counted as running from here: the next fair choice sees it
                state.running[group] += 1
                state.running_logs[int(payload["log_id"])] = group
                state.tick += 1
                state.served[group] = state.tick
    return got


def _started(broker: BrokerAPI, tx: Transaction, worker: str,
             msg: m.Message) -> tuple[m.Message, dict[str, Any] | None]:
    """Handle a received message inside its transaction: mark its task running (payload
    returned), or end the dialog / cancel the task (None returned)."""
    if msg.message_type_name in (m.END_DIALOG, m.ERROR):
        tx.end_conversation(msg.conversation_handle)
        return msg, None
    payload: dict[str, Any] = msg.json()
    log_id = int(payload["log_id"])
    q = sql(broker)
    started = tx.execute(
        q.mark_started, (_now(), worker, broker.session_id, msg.conversation_handle,
                         msg.trace_context, log_id),
    ).rowcount
    if started:
        return msg, payload
    row = tx.execute(q.task_exists, (log_id,)).fetchone()
    why = "the task was removed" if row is None else "cancelled before it started"
    _finish(broker, tx, Outcome(msg.conversation_handle, log_id, "cancelled", None, why, [], None))
    return msg, None


def _run(broker: BrokerAPI, state: ExecutorState, reader: Reader[Execution], msg: m.Message,
         payload: dict[str, Any], stopping: threading.Event | None) -> Outcome:
    """Run the task outside any transaction; never raises for the task's own failure."""
    log_id = int(payload["log_id"])
    group = msg.conversation_group_id
    _ensure_watcher(broker, state)
    kind = payload["task"].get("type") if isinstance(payload.get("task"), dict) else None
    hooks = broker.instrumentation.hooks(TaskHooks) or NO_HOOKS
    scope = hooks.task(msg.trace_context, log_id, str(kind or "unknown"))
    start = dt.datetime.now(dt.UTC)
    try:
        task: Task = task_from_dict(payload["task"])
        timeout = _timeout(payload.get("timeout"))
    except Exception as exc:  # a broken message must still produce its AsyncDone
        log.exception("task %s could not run", log_id)
        execution = Execution(log_id, "failed", start, start, error=f"{type(exc).__name__}: {exc}",
                              details=traceback.format_exc())
    else:
        execution = _attempt(state, reader, stopping, log_id, task, timeout,
                             payload.get("pool"), scope)
    finally:
        with state.lock:
            state.running[group] -= 1
            if state.running[group] <= 0:
                del state.running[group]
            state.running_logs.pop(log_id, None)
    scope.ended(execution.status, execution.error, execution.spark_job_ids,
                execution.operation_ids)  # with an event per Spark job it started
    return Outcome(msg.conversation_handle, log_id, execution.status, execution.value,
                   execution.error, list(execution.spark_job_ids),
                   (execution.start_time.isoformat(), execution.end_time.isoformat()),
                   execution.details, tuple(execution.operation_ids), broker.session_id)


def _timeout(value: Any) -> float | None:
    """The task's timeout in seconds (``exec_async(..., timeout=)``), None when it has none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"a task's timeout must be a number of seconds > 0, not {value!r}")
    return float(value)


def _attempt(state: ExecutorState, reader: Reader[Execution], stopping: threading.Event | None,
             log_id: int, task: Task, timeout: float | None, pool: str | None,
             scope: TaskScope) -> Execution:
    """Run the task as an attempt this reader can stop, and judge its outcome: a stopped
    attempt is cancelled or failed whatever its code did or does later."""
    def work() -> Execution:
        with scope.current():  # in the attempt's thread: what the task does joins its trace
            return execute(state.runner, task, log_id=log_id, pool=pool)

    attempt = Attempt(log_id, work, interruptible=isinstance(task, PythonTask), timeout=timeout)
    start = dt.datetime.now(dt.UTC)
    state.track(attempt)
    try:
        reader.run(attempt, stopping=stopping, stop_jobs=state.runner.cancel)
    finally:
        state.untrack(attempt)
    return _judged(attempt, start, state.grace)


def _judged(attempt: Attempt[Execution], start: dt.datetime, grace: float) -> Execution:
    """The Execution an attempt ends with (see ``_attempt``)."""
    done, log_id, end = attempt.result, attempt.log_id, dt.datetime.now(dt.UTC)
    if attempt.why is None:
        if done is not None:
            return done
        exc = attempt.raised or RuntimeError("the attempt ended without an outcome")
        return Execution(log_id, "failed", start, end, error=one_line_error(exc),
                         details=code_traceback(exc))
    status: TaskStatus = "cancelled" if attempt.why is Stop.CANCELLED else "failed"
    if attempt.why is Stop.CANCELLED:
        error = "cancelled"
    elif attempt.why is Stop.TIMED_OUT:
        error = ("timed out" if attempt.timeout is None
                 else f"timed out after {attempt.timeout:g} s")
    else:
        error = STOPPED
    details = None
    if attempt.abandoned:
        error += (f" (its code did not return within {grace:g} s of the stop: its thread"
                  " was left behind and what it returns is dropped)")
        details = attempt.where
        log.warning("task %s: %s", log_id, error)
    elif attempt.raised is not None:
        details = code_traceback(attempt.raised)  # where its code was when stopped
    elif done is not None:
        details = done.details
    return Execution(log_id, status, start, end, error=error,
                     spark_job_ids=list(done.spark_job_ids) if done else [], details=details,
                     operation_ids=list(done.operation_ids) if done else [])


def _finish(broker: BrokerAPI, tx: Transaction, outcome: Outcome) -> None:
    """Record the outcome in ExecutionLog and send AsyncDone (in the caller's transaction)."""
    start, end = outcome.times or (None, _now())
    details = outcome.details
    if details is not None and len(details) > MAX_DETAILS:
        details = "…" + details[-MAX_DETAILS:]  # the end names the error: keep it
    row = (outcome.status, end, outcome.error, details,
           spark_ids_json(outcome.job_ids, list(outcome.operation_ids)),
           json.dumps(outcome.value), start or end, outcome.log_id)
    if outcome.session is None:
        tx.execute(sql(broker).mark_finished, row)
    elif tx.execute(sql(broker).mark_ran, (*row, outcome.session)).rowcount != 1:
        log.warning("task %s was reported failed while this executor ran it (its session was"
                    " judged dead): its outcome here is dropped", outcome.log_id)
        return
    # if the scheduler ended its dialog (it left), the row is all there is to record
    with contextlib.suppress(ConversationStateError, ConversationNotFoundError):
        tx.send(outcome.handle, schema.ASYNC_DONE, json.dumps({
            "log_id": outcome.log_id, "status": outcome.status, "error": outcome.error,
            "error_details": details, "value": outcome.value, "start_time": start or end,
            "end_time": end,
        }))


def _ensure_watcher(broker: BrokerAPI, state: ExecutorState) -> None:
    """A thread that passes cancel requests made by other processes to the attempts."""
    with state.lock:
        if state.watcher is not None and state.watcher.is_alive():
            return
        state.watcher = threading.Thread(target=_watch_cancels, args=(broker, state),
                                         name="sbroker-cancel-watcher", daemon=True)
        state.watcher.start()


def _watch_cancels(broker: BrokerAPI, state: ExecutorState) -> None:
    done: set[int] = set()
    while not state.stopping.is_set():
        with state.lock:
            running = list(state.running_logs)
        if not running:
            return
        try:
            rows = read(broker, sql(broker).cancel_requested, (json.dumps(running),))
        except Exception:  # the broker is closing
            return
        for log_id, code in rows:
            if log_id not in done:
                done.add(log_id)
                state.request_stop(log_id, Stop.TIMED_OUT if code == TIMED_OUT
                                   else Stop.CANCELLED)
        state.stopping.wait(CANCEL_POLL_SECONDS)


def recover_dead_tasks(broker: BrokerAPI) -> int:
    """Report as failed the tasks whose executor process died; how many this call reported
    (each is reported once, whichever process or host finds it first)."""
    q = sql(broker)
    running = read(broker, q.running_tasks)
    if not running:
        return 0
    alive = {row["session_id"] for row in broker.view("dm_broker_sessions")}  # reaps first
    reported = 0
    for log_id, handle, session in running:
        if session in alive or not handle:
            continue
        with broker.transaction() as tx:
            reported += report_dead_task(broker, tx, log_id, handle, session)
    return reported


def report_dead_task(broker: BrokerAPI, tx: Transaction, log_id: int, handle: str,
                     session: int) -> bool:
    """In ``tx``: mark the dead executor's task failed and tell its scheduler, if no one
    has yet (False then)."""
    if tx.execute(sql(broker).claim_dead_task, (log_id, session)).rowcount != 1:
        return False
    _finish(broker, tx, Outcome(handle, log_id, "failed", None, DIED, [], None))
    return True


def describe(task: Task | str) -> str:
    """The ExecutionLog ``Task`` text of a task."""
    return task_to_json(task)
