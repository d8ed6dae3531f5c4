"""The executor: the activated procedure on QueueAsyncTarget that runs tasks (seed 002).

Each reader takes one AsyncSent message and marks its ExecutionLog row running in one
transaction (so the message is consumed exactly when the row says who runs it), runs the task
outside any transaction, then records the outcome and sends AsyncDone in another.  Readers pick
the scheduler (conversation group) with the fewest tasks running here, then the one served
least recently, then the oldest waiting message: a scheduler with a thousand queued tasks does
not starve one with three.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import messages as m
from ..spark import Runner, Task, execute, task_from_dict, task_to_json
from . import schema

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("sbroker.executor")
IDLE_SECONDS = 2.0  # a reader returns after the queue stayed empty this long
CANCEL_POLL_SECONDS = 0.2
DIED = "the executor process died while running the task"


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


def executor_state(broker: Broker) -> ExecutorState:
    """The broker's executor state, creating a SparkRunner from the stored config if needed."""
    state: ExecutorState | None = getattr(broker, "_executor_state", None)
    if state is None:
        from ..spark import SparkRunner

        state = ExecutorState(SparkRunner(schema.load_spark_config(broker)))
        broker._executor_state = state  # type: ignore[attr-defined]
    return state


def executor_procedure(ctx: Any) -> None:
    """Activation procedure: serve tasks until the queue stays empty for IDLE_SECONDS."""
    broker: Broker = ctx.broker
    state = executor_state(broker)
    recover_dead_tasks(broker)
    worker = f"{os.getpid()}:{threading.current_thread().name}"
    stopping: threading.Event | None = getattr(ctx, "stopping", None)
    while not (stopping is not None and stopping.is_set()) and serve_one(
            broker, state, worker, wait=IDLE_SECONDS):
        pass


def _fair_groups(broker: Broker, state: ExecutorState) -> list[str]:
    groups = broker._ready_groups(schema.TARGET_QUEUE)
    unknown = {conv for _, _, _, conv in groups if conv not in state.priorities}
    if unknown:
        for row in broker.view("Schedulers"):
            state.priorities[row["ConversationId"]] = int(row["Priority"])
    with state.lock:
        ranked = sorted(
            groups,
            key=lambda g: (-state.priorities.get(g[3], 5), -g[1], state.running[g[0]],
                           state.served.get(g[0], 0), g[2]),
        )
    return [g[0] for g in ranked]


def _receive_one(broker: Broker, state: ExecutorState, worker: str,
                 wait: float) -> tuple[m.Message, dict[str, Any] | None] | None:
    """Take the next message fairly and mark its task running; None when nothing came."""
    candidates: list[str | None] = [*_fair_groups(broker, state), None]
    for group in candidates:
        with broker.transaction() as tx:
            if group is None:
                msgs = tx.receive(schema.TARGET_QUEUE, top=1, timeout=wait)
            else:
                msgs = tx.receive(schema.TARGET_QUEUE, top=1, conversation_group_id=group)
            if not msgs:
                continue
            msg = msgs[0]
            if msg.message_type_name in (m.END_DIALOG, m.ERROR):
                tx.end_conversation(msg.conversation_handle)
                with state.lock:
                    state.served.pop(msg.conversation_group_id, None)
                return msg, None
            payload: dict[str, Any] = msg.json()
            log_id = int(payload["log_id"])
            row = tx.execute(
                "SELECT Status, CancelRequested FROM ExecutionLog WHERE LogID = ?", (log_id,)
            ).fetchone()
            if row is None or row[0] != "queued" or row[1]:
                why = "the task was removed" if row is None else "cancelled before it started"
                _finish(tx, msg.conversation_handle, log_id, "cancelled", None, why, [], None)
                return msg, None
            tx.execute(
                "UPDATE ExecutionLog SET Status = 'running', StartTime = ?, Worker = ?,"
                " WorkerSession = ?, TargetHandle = ? WHERE LogID = ?",
                (_now(), worker, broker.session_id, msg.conversation_handle, log_id),
            )
            return msg, payload
    return None


def serve_one(broker: Broker, state: ExecutorState, worker: str, *, wait: float) -> bool:
    """Receive and run one task (or handle one control message); False if none came."""
    got = _receive_one(broker, state, worker, wait)
    if got is None:
        return False
    msg, payload = got
    if payload is None:
        return True
    log_id = int(payload["log_id"])
    group = msg.conversation_group_id
    with state.lock:
        state.running[group] += 1
        state.running_logs[log_id] = group
        state.tick += 1
        state.served[group] = state.tick
    _ensure_watcher(broker, state)
    try:
        task: Task = task_from_dict(payload["task"])
        execution = execute(state.runner, task, log_id=log_id, pool=payload.get("pool"))
        status, error, value = execution.status, execution.error, execution.value
        job_ids = list(execution.spark_job_ids)
        start, end = execution.start_time.isoformat(), execution.end_time.isoformat()
    except Exception as exc:  # a broken message must still produce its AsyncDone
        log.exception("task %s could not run", log_id)
        status, error, value, job_ids, start, end = (
            "failed", f"{type(exc).__name__}: {exc}", None, [], _now(), _now())
    finally:
        with state.lock:
            state.running[group] -= 1
            if state.running[group] <= 0:
                del state.running[group]
            state.running_logs.pop(log_id, None)
    with broker.transaction() as tx:
        _finish(tx, msg.conversation_handle, log_id, status, value, error, job_ids,
                (start, end))
    return True


def _finish(tx: Any, handle: str, log_id: int, status: str, value: Any, error: str | None,
            job_ids: list[int], times: tuple[str, str] | None) -> None:
    """Record the outcome in ExecutionLog and send AsyncDone (one transaction)."""
    start, end = times or (None, _now())
    tx.execute(
        "UPDATE ExecutionLog SET Status = ?, EndTime = ?, Error = ?, SparkJobIds = ?,"
        " Value = ?, StartTime = COALESCE(StartTime, ?) WHERE LogID = ?",
        (status, end, error, json.dumps(job_ids), json.dumps(value), start or end, log_id),
    )
    tx.send(handle, schema.ASYNC_DONE, json.dumps({
        "log_id": log_id, "status": status, "error": error, "value": value,
        "start_time": start or end, "end_time": end,
    }))


def _ensure_watcher(broker: Broker, state: ExecutorState) -> None:
    """A thread that passes cancel requests made by other processes to the runner."""
    with state.lock:
        if state.watcher is not None and state.watcher.is_alive():
            return
        state.watcher = threading.Thread(target=_watch_cancels, args=(broker, state),
                                         name="sbroker-cancel-watcher", daemon=True)
        state.watcher.start()


def _watch_cancels(broker: Broker, state: ExecutorState) -> None:
    stop = threading.Event()
    done: set[int] = set()
    while True:
        with state.lock:
            running = list(state.running_logs)
        if not running:
            return
        marks = ",".join("?" * len(running))
        try:
            with broker.db.connection() as conn:
                rows = conn.execute(
                    f"SELECT LogID FROM ExecutionLog WHERE CancelRequested = 1"
                    f" AND LogID IN ({marks})", running,
                ).fetchall()
        except Exception:  # the broker is closing
            return
        for (log_id,) in rows:
            if log_id not in done:
                done.add(log_id)
                state.runner.cancel(log_id)
        stop.wait(CANCEL_POLL_SECONDS)


def recover_dead_tasks(broker: Broker) -> int:
    """Report as failed the tasks whose executor process died; how many there were."""
    with broker.db.connection() as conn:
        broker.reap_dead_sessions(conn, force=True)
        rows = conn.execute(
            "SELECT LogID, TargetHandle FROM ExecutionLog WHERE Status = 'running'"
            " AND WorkerSession NOT IN (SELECT session_id FROM sb_sessions)"
        ).fetchall()
    for log_id, handle in rows:
        with broker.transaction() as tx:
            still = tx.execute(
                "SELECT 1 FROM ExecutionLog WHERE LogID = ? AND Status = 'running'", (log_id,)
            ).fetchone()
            if still and handle:
                _finish(tx, handle, log_id, "failed", None, DIED, [], None)
    return len(rows)


def describe(task: Task | str) -> str:
    """The ExecutionLog ``Task`` text of a task."""
    return task_to_json(task)
