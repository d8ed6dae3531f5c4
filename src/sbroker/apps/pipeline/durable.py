"""Durable runs (SPEC §13): a pipeline's tasks sent to the executor as soon as the tasks they
come after succeeded, retried with backoff, timed out, and recorded so that a run killed at
any moment is resumed where it stood.

A run keeps one scheduler dialog for its whole life.  Each attempt is sent (ExecutionLog row,
AsyncSent, ``PipelineAttempts`` row, task row) in one transaction; each AsyncDone is received
in the transaction that records its outcome, so a crash never records an outcome twice nor
loses one: an AsyncDone not yet recorded stays on the dialog for the resume to take.  A retry
waits on the dialog's conversation timer, holding no executor reader.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sbroker.apps.pipeline.command import pipeline_import_path
from sbroker.apps.pipeline.mapping import expand_ready, settle_mapped
from sbroker.apps.pipeline.model import Pipeline
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.rules import RUN_CONTEXT
from sbroker.apps.pipeline.runstate import (
    RunListener,
    RunState,
    TaskState,
    dependants,
)
from sbroker.apps.pipeline.values import attempt_task, definition, mapped_of
from sbroker.apps.scheduler import schema
from sbroker.apps.scheduler.client import (
    cancel_task,
    close_dialog,
    open_dialog,
    result_of,
    send_task,
)
from sbroker.apps.scheduler.executor import DIED, STOPPED, recover_dead_tasks
from sbroker.apps.spark.tasks import TaskResult
from sbroker.apps.sql import read, statements
from sbroker.core import messages as m
from sbroker.core import tracing
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = ["DurableRunner", "latest_unfinished", "resume_run", "start_run"]
log = logging.getLogger("sbroker.pipeline")
RECOVERY_SECONDS = 2.0  # while waiting, look for attempts whose executor died this often
DRAIN_SECONDS = 10.0  # after Ctrl-C, how long cancelled attempts are waited for
_FINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def latest_unfinished(broker: BrokerAPI, pipeline: str) -> int | None:
    """The newest run of ``pipeline`` that did not succeed, if any."""
    rows = read(broker, statements(broker, "sbroker.apps.pipeline").latest_unfinished,
                (pipeline,))
    return int(rows[0][0]) if rows else None


def start_run(broker: BrokerAPI, pipeline: Pipeline, *,
              listener: RunListener | None = None) -> RunState:
    """Run ``pipeline`` as a new durable run on ``broker`` (executor installed; started here
    or by `sbroker serve` on the same database) until it ends; returns its state."""
    runner = DurableRunner(broker, pipeline, listener=listener)
    with pipeline_import_path(pipeline):  # the file's own modules import, as `run` does
        return runner.drive(runner.create())


def resume_run(broker: BrokerAPI, pipeline: Pipeline, run_id: int | None = None, *,
               listener: RunListener | None = None) -> RunState:
    """Resume run ``run_id`` of ``pipeline`` (by default its newest run that did not
    succeed) until it ends; ``PipelineError`` when there is no such run."""
    if run_id is None:
        run_id = latest_unfinished(broker, pipeline.name)
        if run_id is None:
            raise PipelineError(f"no run of pipeline {pipeline.name!r} to resume",
                                path=pipeline.path)
    runner = DurableRunner(broker, pipeline, listener=listener)
    with pipeline_import_path(pipeline):
        return runner.drive(runner.resume(run_id))


class DurableRunner:
    """Drives one run of ``pipeline`` on ``broker`` (whose executor is installed)."""

    def __init__(self, broker: BrokerAPI, pipeline: Pipeline, *,
                 listener: RunListener | None = None, schedule: str | None = None) -> None:
        self.broker = broker
        self.pipeline = pipeline
        self.listener = listener or RunListener()
        self.schedule = schedule
        self.sql = statements(broker, "sbroker.apps.pipeline")
        self.clock = broker.clock
        self._interrupting = False
        self._trace: tracing.RunTrace | None = None  # the run's spans, while tracing is on
        self._positions = {spec.name: i for i, spec in enumerate(pipeline.dag)}
        self._stored: dict[str, tuple[TaskState, str]] = {}  # a resume's recorded instances
        self._mapped = tuple(s.name for s in pipeline.dag if s.map is not None)

    # -- creating and resuming ---------------------------------------------------------------
    def create(self, tx: Transaction | None = None) -> RunState:
        """Record a new run and its tasks (all pending), with a dialog of its own; in ``tx``
        when given (a schedule creates its due runs in the transaction of its timer)."""
        if tx is None:
            with self.broker.transaction() as own:
                return self.create(own)
        dag = self.pipeline.dag
        handle = open_dialog(self.broker, tx, self.pipeline.name)
        run_id = int(tx.execute(self.sql.insert_run, (
            self.pipeline.name, self.pipeline.source or str(self.pipeline.path or ""),
            json.dumps(dict(self.pipeline.params), default=str),
            _iso(self.clock.now()), handle, self.schedule)).fetchone()[0])
        for i, spec in enumerate(dag):
            tx.execute(self.sql.insert_run_task, (run_id, spec.name, i,
                                                  json.dumps(spec.after), definition(spec)))
        return RunState(run_id, self.pipeline, handle, {s.name: TaskState(s) for s in dag},
                        scheduled_for=_iso(self.clock.now()))

    def resume(self, run_id: int) -> RunState:
        """Take up run ``run_id``: succeeded tasks keep their outcome unless their definition
        (or one before them) changed; attempts still open are waited for; the rest runs."""
        rows = read(self.broker, self.sql.run_by_id, (run_id,))
        if not rows:
            raise PipelineError(f"there is no run {run_id} to resume", path=self.pipeline.path)
        _, name, _, _, status, start, _, handle = rows[0]
        if name != self.pipeline.name:
            raise PipelineError(f"run {run_id} is a run of pipeline {name!r}, not of "
                                f"{self.pipeline.name!r}", path=self.pipeline.path)
        if status == "succeeded":
            return self._load(run_id, handle, "succeeded")
        with self.broker.transaction() as tx:
            handle = handle or open_dialog(self.broker, tx, self.pipeline.name)
            state = self._reconcile(tx, run_id, handle)
            tx.execute(self.sql.set_run, ("running", None, handle, run_id))
        state.resumed, state.scheduled_for = True, start
        return state

    def _load(self, run_id: int, handle: str | None, status: str) -> RunState:
        state = RunState(run_id, self.pipeline, handle, {}, status, resumed=True)
        specs = {s.name: s for s in self.pipeline.dag}
        for row in read(self.broker, self.sql.run_tasks, (run_id,)):
            spec = specs.get(row[0]) or _instance_spec(specs, row[0])
            if spec is not None:
                state.tasks[row[0]] = self._task_from_row(spec, row)
        return state

    @staticmethod
    def _task_from_row(spec: Any, row: Any) -> TaskState:
        _, _, _, _, status, attempts, failures, nxt, start, end, value, error = row
        return TaskState(spec, status, int(attempts), int(failures), nxt, start, end,
                         json.loads(value) if value else None, error,
                         kept=status == "succeeded")

    def _reconcile(self, tx: Transaction, run_id: int, handle: str) -> RunState:
        """Inside ``tx``: the stored tasks brought to the file's definitions."""
        dag = self.pipeline.dag
        stored = {row[0]: row for row in tx.execute(self.sql.run_tasks, (run_id,)).fetchall()}
        open_ = {task: (int(log_id), deadline) for log_id, task, deadline
                 in tx.execute(self.sql.open_attempts, (run_id,)).fetchall()}
        changed = {s.name for s in dag if s.name not in stored
                   or stored[s.name][3] != definition(s)}
        rerun = dependants(dag, changed)
        state = RunState(run_id, self.pipeline, handle, {})
        for i, spec in enumerate(dag):
            row = stored.pop(spec.name, None)
            if row is None:
                tx.execute(self.sql.insert_run_task, (run_id, spec.name, i,
                                                      json.dumps(spec.after), definition(spec)))
            else:
                tx.execute(self.sql.redefine_task, (i, json.dumps(spec.after),
                                                    definition(spec), run_id, spec.name))
            task = TaskState(spec) if row is None else self._task_from_row(spec, row)
            task.kept = task.status == "succeeded" and spec.name not in rerun
            attempt = open_.get(spec.name)
            if attempt is not None and spec.name not in changed:
                task.status, task.log_id, task.deadline = "running", attempt[0], attempt[1]
            elif not task.kept:
                if attempt is not None:  # superseded: its outcome, when it comes, is ignored
                    tx.execute(self.sql.close_attempt, ("superseded", attempt[0]))
                    cancel_task(self.broker, attempt[0])
                task.status, task.failures, task.next_attempt = "pending", 0, None
                task.end_time, task.error, task.value = None, None, None
            tx.execute(self.sql.set_task, task.row(run_id))
            state.tasks[spec.name] = task
        self._reconcile_instances(tx, state, stored, open_, rerun)
        return state

    def _reconcile_instances(self, tx: Transaction, state: RunState, stored: dict[str, Any],
                             open_: dict[str, tuple[int, Any]], rerun: set[str]) -> None:
        """Inside ``tx``: the rows left over from the file's tasks. A kept mapped task keeps
        its instances as they are; one that runs again from the same list of items gets
        its recorded instances back when it is expanded (``_stored``); the rest goes."""
        specs = {s.name: s for s in self.pipeline.dag}
        kept: dict[str, list[TaskState]] = {}
        for name, row in stored.items():
            of, spec = mapped_of(name), _instance_spec(specs, name)
            parent = state.tasks.get(of[0]) if of is not None else None
            if spec is None or parent is None or parent.name in rerun:
                attempt = open_.get(name)
                if attempt is not None:
                    tx.execute(self.sql.close_attempt, ("superseded", attempt[0]))
                    cancel_task(self.broker, attempt[0])
                tx.execute(self.sql.delete_run_task, (state.run_id, name))
                continue
            task = self._task_from_row(spec, row)
            if parent.kept:
                kept.setdefault(parent.name, []).append(task)
                continue
            attempt = open_.get(name)
            if attempt is not None:
                task.status, task.log_id, task.deadline = "running", attempt[0], attempt[1]
            self._stored[name] = (task, row[3])
        for mapped, instances in kept.items():  # after their task, in item order
            ordered = sorted(instances, key=lambda t: (mapped_of(t.name) or ("", 0))[1])
            tasks = list(state.tasks.items())
            at = next(i for i, (n, _) in enumerate(tasks) if n == mapped) + 1
            state.tasks.clear()
            state.tasks.update([*tasks[:at], *((t.name, t) for t in ordered), *tasks[at:]])

    # -- driving -------------------------------------------------------------------------------
    def drive(self, state: RunState, stop: threading.Event | None = None) -> RunState:
        """Run ``state`` until every task ended; Ctrl-C cancels what runs and leaves the run
        ``cancelled`` (resumable); ``stop`` (a server stopping) leaves it as it stands, for a
        resume.  Never raises for a failed task.  Traced, the run is one trace (SPEC §15)."""
        if tracing.TRACER is None:
            return self._drive(state, stop)
        trace = self._trace = tracing.RunTrace(tracing.TRACER, state.run_id,
                                               self.pipeline.name, resumed=state.resumed)
        try:
            with tracing.current(trace.run):
                return self._drive(state, stop)
        finally:
            trace.finish(state.status, {n: (t.status, t.error) for n, t in state.tasks.items()})
            self._trace = None

    def _drive(self, state: RunState, stop: threading.Event | None) -> RunState:
        self.listener.run_started(state)
        if state.status == "succeeded":
            state.finished_at = state.started_at
            self.listener.run_finished(state)
            return state
        recover_dead_tasks(self.broker)
        last_recovery = self.clock.monotonic()
        try:
            while not state.done:
                if stop is not None and stop.is_set():
                    return state
                self._start_ready(state)
                if state.done:
                    break
                self._wait(state)
                self._enforce_timeouts(state)
                if self.clock.monotonic() - last_recovery >= RECOVERY_SECONDS:
                    recover_dead_tasks(self.broker)
                    last_recovery = self.clock.monotonic()
            if state.status == "running":
                with self.broker.transaction() as tx:
                    self._finish(tx, state)
        except KeyboardInterrupt:
            self._interrupt(state)
        state.finished_at = self.clock.monotonic()
        self.listener.run_finished(state)
        return state

    def _start_ready(self, state: RunState) -> None:
        expandable = bool(self._mapped) and any(
            state.tasks[n].status == "pending" for n in self._mapped)
        if not self._ready(state) and not expandable:
            return
        with self.broker.transaction() as tx:
            ended = self._expand(tx, state)
            started = self._send_ready(tx, state)
        for task in ended:
            task.finished_at = self.clock.monotonic()
            self.listener.task_finished(state, task)
        self._started(state, started)

    def _expand(self, tx: Transaction, state: RunState) -> list[TaskState]:
        """Inside ``tx``: the mapped tasks now free to start expanded into their instances
        (rows inserted), those that ended settled, the tasks after a failed one skipped;
        the tasks that ended (mapping.py)."""
        if not self._mapped:  # nothing to expand or settle: no cost per outcome
            return []
        end = _iso(self.clock.now())
        done = expand_ready(state, end, self._stored)
        for task in done.changed:  # a mapped task's time runs from its expansion
            if task.spec.map is not None and task.started_at is None:
                task.started_at = self.clock.monotonic()
        ended = [t for t in done.changed if t.spec.map is not None and t.status != "running"]
        ended += settle_mapped(state, end)
        if ended and not self._interrupting:
            ended += state.skip_after_failures(end)
        for task in done.new:
            position = self._positions[(mapped_of(task.name) or (task.name, 0))[0]]
            tx.execute(self.sql.insert_run_task, (state.run_id, task.name, position,
                                                  json.dumps(task.spec.after),
                                                  definition(task.spec)))
        for task in [*done.new, *done.changed, *ended]:
            if task.spec.map is None and mapped_of(task.name) is not None:
                tx.execute(self.sql.redefine_task, (
                    self._positions[(mapped_of(task.name) or (task.name, 0))[0]],
                    json.dumps(task.spec.after), definition(task.spec), state.run_id,
                    task.name))
            tx.execute(self.sql.set_task, task.row(state.run_id))
        for name in [n for n in self._stored if n not in state.tasks]:
            tx.execute(self.sql.delete_run_task, (state.run_id, name))  # the list shrank
            del self._stored[name]
        return ended

    def _ready(self, state: RunState) -> list[TaskState]:
        ready = state.ready(self.clock.now())
        limit = self.pipeline.options.concurrency
        return ready if limit is None else ready[:max(0, limit - state.running())]

    def _send_ready(self, tx: Transaction, state: RunState) -> list[TaskState]:
        """Inside ``tx``: an attempt of every task that may start now; the tasks sent."""
        ready = self._ready(state)
        if not ready:
            return []
        now, handle = self.clock.now(), state.handle
        assert handle is not None
        context = self._context(state)
        for task in ready:
            trace = self._trace
            values = {n: state.tasks[n].value for n in task.spec.inputs if n in state.tasks}
            sent = attempt_task(task.spec, values, context)
            if trace is None:
                log_id = send_task(self.broker, tx, handle, sent, self.pipeline.name)
            else:  # the attempt's span is current while it is sent: its spans join it
                span = trace.start_attempt(task.name, task.attempts + 1)
                with tracing.current(span):
                    log_id = send_task(self.broker, tx, handle, sent, self.pipeline.name)
                trace.sent(span, log_id)
            task.attempts += 1
            task.status, task.log_id, task.timed_out = "running", log_id, False
            task.deadline = None if task.spec.timeout is None else now + task.spec.timeout
            task.start_time = task.start_time or _iso(now)
            task.next_attempt = None
            tx.execute(self.sql.insert_attempt, (log_id, state.run_id, task.name,
                                                 task.attempts, task.deadline))
            tx.execute(self.sql.set_task, task.row(state.run_id))
        return ready

    def _context(self, state: RunState) -> dict[str, Any]:
        """The run's ``scheduled_for`` and ``scheduled_date``: ``-p`` values, else the
        run's start time (seconds precision, with its UTC offset)."""
        params = self.pipeline.params
        start = dt.datetime.fromisoformat(state.scheduled_for or _iso(self.clock.now()))
        scheduled = str(params.get("scheduled_for") or
                        start.replace(microsecond=0).isoformat())
        return {RUN_CONTEXT[0]: scheduled,
                RUN_CONTEXT[1]: str(params.get("scheduled_date") or scheduled[:10])}

    def _started(self, state: RunState, tasks: list[TaskState]) -> None:
        """After the commit that sent them: tell the listener."""
        for task in tasks:
            task.started_at = task.started_at or self.clock.monotonic()
            self.listener.task_started(state, task)

    def _wait_seconds(self, state: RunState, now: float) -> float:
        due = [t.deadline for t in state.tasks.values() if t.deadline is not None]
        due += [t.next_attempt for t in state.tasks.values()
                if t.status == "retrying" and t.next_attempt is not None]
        wait = RECOVERY_SECONDS if not due else min(due) - now
        return max(0.0, min(wait, RECOVERY_SECONDS))

    def _wait(self, state: RunState, wait: float | None = None) -> list[TaskState]:
        """Receive what came on the run's dialog (waiting up to ``wait`` seconds) and record
        it in the same transaction; the tasks whose attempt ended."""
        assert state.handle is not None
        now = self.clock.now()
        wait = self._wait_seconds(state, now) if wait is None else wait
        ended: list[TaskState] = []
        started: list[TaskState] = []
        with self.broker.transaction() as tx:
            msgs = tx.receive(schema.INITIATOR_QUEUE, conversation_handle=state.handle,
                              timeout=wait)
            for msg in msgs:
                if msg.message_type_name == schema.ASYNC_DONE:
                    result = result_of(msg)
                    task = self._record(tx, state, result)
                    if task is not None:
                        ended.append(task)
                        self._trace_attempt(task, result)
                elif msg.message_type_name in (m.END_DIALOG, m.ERROR):
                    raise BrokerError(f"the dialog of run {state.run_id} ended under it")
            if ended:
                if not self._interrupting:  # then the rest ends cancelled, not skipped
                    ended += self._expand(tx, state)
                    ended += state.skip_after_failures(_iso(self.clock.now()))
                for task in ended:
                    tx.execute(self.sql.set_task, task.row(state.run_id))
                self._set_timer(tx, state)
                if not self._interrupting:  # the tasks now free to start, in the same commit
                    started = self._send_ready(tx, state)
        for task in ended:
            task.finished_at = self.clock.monotonic()
            self.listener.task_finished(state, task)
            if self._trace is not None and task.status in _FINAL:
                self._trace.task_ended(task.name, task.status, task.error)
        self._started(state, started)
        return ended

    def _trace_attempt(self, task: TaskState, result: TaskResult) -> None:
        """An attempt's outcome in the run's trace, and the wait before its retry."""
        if self._trace is not None:
            retry_in = None if task.status != "retrying" or task.next_attempt is None else (
                max(0.0, task.next_attempt - self.clock.now()))
            self._trace.attempt_ended(task.name, result.log_id, result.status, result.error,
                                      retry_in)

    def _record(self, tx: Transaction, state: RunState, result: TaskResult) -> TaskState | None:
        """Inside the receiving transaction: an attempt's outcome, once."""
        outcome = "succeeded" if result.status == "succeeded" else "failed"
        if tx.execute(self.sql.close_attempt, (outcome, result.log_id)).rowcount != 1:
            return None  # superseded, or an outcome recorded already
        task = next((t for t in state.tasks.values() if t.log_id == result.log_id), None)
        if task is None:
            return None
        task.log_id, task.deadline = None, None
        task.last_log_id, task.details = result.log_id, result.error_details
        end = (result.end_time or dt.datetime.now(dt.UTC)).isoformat()
        if result.status == "succeeded":
            task.status, task.value, task.error = "succeeded", result.value, None
            task.end_time = end
            return task
        task.error = (f"timed out after {task.spec.timeout:g} s" if task.timed_out
                      else result.error or result.status)
        if self._interrupting:
            task.status, task.end_time = "cancelled", end
        elif result.error in (DIED, STOPPED):
            task.status = "pending"  # its executor died or stopped: again, no retry spent
        elif task.failures < task.spec.retry.retries:
            task.failures += 1
            task.status = "retrying"
            task.next_attempt = self.clock.now() + task.spec.retry.delay_before(task.failures)
        else:
            task.failures += 1
            task.status, task.end_time = "failed", end
        return task

    def _set_timer(self, tx: Transaction, state: RunState) -> None:
        """The dialog's timer at the next retry due (a DialogTimer wakes the wait)."""
        due = [t.next_attempt for t in state.tasks.values()
               if t.status == "retrying" and t.next_attempt is not None]
        if due:
            tx.begin_conversation_timer(state.handle, max(0.001, min(due) - self.clock.now()))

    def _enforce_timeouts(self, state: RunState) -> None:
        now = self.clock.now()
        for task in state.tasks.values():
            if task.log_id is not None and task.deadline is not None and task.deadline <= now:
                task.timed_out, task.deadline = True, None
                cancel_task(self.broker, task.log_id)

    def _finish(self, tx: Transaction, state: RunState) -> None:
        """Inside ``tx``: the run's verdict, and its dialog released."""
        ok = all(t.status == "succeeded" for t in state.tasks.values())
        state.status = "succeeded" if ok else "failed"
        if state.handle is not None:
            close_dialog(self.broker, tx, state.handle)
        state.handle = None
        tx.execute(self.sql.set_run, (state.status, _iso(self.clock.now()), None,
                                      state.run_id))

    def _interrupt(self, state: RunState) -> None:
        """Cancel the attempts in flight, record what comes back for a few seconds, and
        leave the run ``cancelled`` with its dialog kept for the resume."""
        state.interrupted = True
        self._interrupting = True
        for task in state.tasks.values():
            if task.log_id is not None:
                cancel_task(self.broker, task.log_id)
        deadline = self.clock.monotonic() + DRAIN_SECONDS
        with _ignoring_interrupts():
            while state.running() and self.clock.monotonic() < deadline:
                self._wait(state, wait=min(0.5, deadline - self.clock.monotonic()))
            end = _iso(self.clock.now())
            with self.broker.transaction() as tx:
                for task in state.tasks.values():
                    if task.status in ("pending", "retrying") or (
                            task.status == "running" and task.log_id is None):
                        task.status, task.end_time = "cancelled", end
                        tx.execute(self.sql.set_task, task.row(state.run_id))
                state.status = "cancelled"
                tx.execute(self.sql.set_run, ("cancelled", end, state.handle, state.run_id))


def _instance_spec(specs: dict[str, Any], name: str) -> Any:
    """The spec of a recorded instance ``task[i]`` of a mapped task of ``specs`` (its item
    is only known once expanded), or None."""
    of = mapped_of(name)
    parent = specs.get(of[0]) if of is not None else None
    if parent is None or parent.map is None:
        return None
    return dataclasses.replace(parent, name=name, map=None)


@contextmanager
def _ignoring_interrupts() -> Iterator[None]:
    """A second Ctrl-C while the run is being put away ends the wait, not the bookkeeping."""
    try:
        yield
    except KeyboardInterrupt:
        log.warning("interrupted again while cancelling: the run is left for --resume")
