"""The durable runner (docs/pipelines.md): a pipeline's tasks sent to the executor as soon as
the tasks they come after succeeded, retried with backoff, timed out at their deadline, and
recorded so that a run whose driver stops at any moment is taken up where it stood.

A run keeps one scheduler dialog for its whole life.  Each attempt is sent (ExecutionLog row,
AsyncSent, ``PipelineAttempts`` row, task row) in one transaction; each AsyncDone is received
in the transaction that records its outcome, so an outcome is never recorded twice nor lost:
an AsyncDone not yet recorded stays on the dialog for the next driver to take.  A retry waits
on the dialog's conversation timer, holding no executor reader.  Every bookkeeping commit is
fenced by the driver's lease (leases.py): a driver that lost it records nothing more.  The
runner knows nothing of terminals: listeners (listeners.py) hear what it committed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from sbroker.apps.pipeline import leases
from sbroker.apps.pipeline.intervals import bind_task, format_time, run_context, tick_key
from sbroker.apps.pipeline.listeners import RunListener, listeners_for
from sbroker.apps.pipeline.mapping import (
    expand_ready,
    instance_spec,
    reconcile_instances,
    record_expansion,
    settle_mapped,
)
from sbroker.apps.pipeline.model import Pipeline, RunStatus, TaskStatus
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runs import scheduled_for_of_row as _scheduled_for
from sbroker.apps.pipeline.runstate import (
    AttemptEnd,
    Lease,
    RunState,
    TaskState,
    dependants,
    task_from_row,
)
from sbroker.apps.pipeline.store import RunStore
from sbroker.apps.pipeline.values import attempt_task, definition
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
from sbroker.core import messages as m
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = ["DurableRunner", "pipeline_import_path", "resume_run", "start_run"]
log = logging.getLogger("sbroker.pipeline")
RECOVERY_SECONDS = 2.0  # while waiting, look for attempts whose executor died this often
DRAIN_SECONDS = 10.0  # after Ctrl-C, how long cancelled attempts are waited for


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


@contextlib.contextmanager
def pipeline_import_path(pipeline: Pipeline) -> Iterator[None]:
    """Put the pipeline file's folder first on ``sys.path`` so ``python =`` targets import."""
    folder = str(pipeline.base_dir)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def start_run(broker: BrokerAPI, pipeline: Pipeline, *,
              listener: RunListener | None = None) -> RunState:
    """Run ``pipeline`` as a new durable run on ``broker`` (executor installed; started here
    or by `sbroker serve` on the same database) until it ends; returns its state."""
    runner = DurableRunner(broker, pipeline, listener=listener)
    with pipeline_import_path(pipeline):  # the file's own modules import, as `run` does
        return runner.drive(runner.create())


def resume_run(broker: BrokerAPI, pipeline: Pipeline, run_id: int | None = None, *,
               listener: RunListener | None = None, rerun_from: str | None = None) -> RunState:
    """Resume run ``run_id`` of ``pipeline`` (by default its newest run that did not
    succeed) until it ends; ``PipelineError`` when there is no such run, ``LeaseHeld`` when
    a live process drives it."""
    if run_id is None:
        run_id = RunStore(broker).latest_unfinished(pipeline.name)
        if run_id is None:
            raise PipelineError(f"no run of pipeline {pipeline.name!r} to resume",
                                path=pipeline.path)
    runner = DurableRunner(broker, pipeline, listener=listener)
    with pipeline_import_path(pipeline):
        return runner.drive(runner.resume(run_id, rerun_from=rerun_from))


class DurableRunner:
    """Drives runs of ``pipeline`` on ``broker`` (whose executor is installed)."""

    def __init__(self, broker: BrokerAPI, pipeline: Pipeline, *,
                 listener: RunListener | None = None, schedule: str | None = None) -> None:
        self.broker = broker
        self.pipeline = pipeline
        self.listener = listeners_for(listener, broker.instrumentation)
        self.schedule = schedule
        self.store = RunStore(broker)
        self.clock = broker.clock
        self._interrupting = False
        self._fenced_at = 0.0
        self._stored: dict[str, tuple[TaskState, str]] = {}  # a resume's recorded instances
        self._mapped = tuple(s.name for s in pipeline.dag if s.map is not None)

    # -- creating and taking up -----------------------------------------------------------------
    def create(self, tx: Transaction | None = None, *, driven: bool = True,
               tick: float | None = None, timezone: str | None = None) -> RunState:
        """Record a new run and its tasks (all pending), with a dialog of its own and, when
        ``driven``, its lease held by this process; in ``tx`` when given (a schedule creates
        its due runs in the transaction of its timer).  A run of the schedule's ``tick`` is
        for that tick (in ``timezone``; ``TickTaken`` when the tick has a run); any other
        for ``-p scheduled_for``, else its start."""
        if tx is None:
            with self.broker.transaction() as own:
                return self.create(own, driven=driven, tick=tick, timezone=timezone)
        now = self.clock.now()
        scheduled_for = (format_time(tick, timezone or self.pipeline.timezone)
                         if tick is not None else self.pipeline.scheduled_for
                         or format_time(now, self.pipeline.timezone))
        handle = open_dialog(self.broker, tx, self.pipeline.name)
        driver = leases.Driver.of(self.broker).row() if driven else None
        run_id, token = self.store.insert_run(
            tx, self.pipeline, handle, self.schedule, _iso(now), driver,
            scheduled_for=scheduled_for, tick=None if tick is None else tick_key(tick))
        for i, spec in enumerate(self.pipeline.dag):
            self.store.insert_task(tx, run_id, spec, i)
        lease = Lease(run_id, token, self.pipeline.options.lease) if driven else None
        return RunState(run_id, self.pipeline, handle,
                        {s.name: TaskState(s) for s in self.pipeline.dag}, lease=lease,
                        schedule=self.schedule, scheduled_for=scheduled_for)

    def resume(self, run_id: int, *, rerun_from: str | None = None,
               takeover: bool = False, rerun_all: bool = False) -> RunState:
        """Take up run ``run_id`` and its lease (``LeaseHeld`` while a live driver holds it):
        succeeded tasks keep their outcome unless their definition (or one before them)
        changed, or they come at or after ``rerun_from`` (every task: ``rerun_all``);
        attempts still open are waited for; the rest runs.  A succeeded run with nothing to
        run again is only loaded.  The run keeps the time it is for."""
        names = {s.name for s in self.pipeline.dag}
        if rerun_from is not None and rerun_from not in names:
            raise PipelineError(f"--from names {rerun_from!r}, which is not a task of pipeline"
                                f" {self.pipeline.name!r}", path=self.pipeline.path)
        leases.forget_dead_sessions(self.broker)  # a dead driver's lease is free at once
        to_cancel: list[int] = []
        with self.broker.transaction() as tx:
            row = self._run_row(tx, run_id)
            if row["status"] == RunStatus.SUCCEEDED and rerun_from is None and not rerun_all:
                return self._load(tx, row)
            lease = leases.acquire(self.broker, tx, run_id, self.pipeline.options.lease)
            handle = row["handle"] or open_dialog(self.broker, tx, self.pipeline.name)
            again = {s.name for s in self.pipeline.dag} if rerun_all else set()
            if rerun_from is not None:
                again.add(rerun_from)
            state = self._reconcile(tx, run_id, handle, again, to_cancel)
            self.store.set_run(tx, run_id, RunStatus.RUNNING, None, handle)
            if takeover:  # a cancel asked of the driver that died is still to be done
                state.cancel_requested = bool(row["cancel_requested"])
            else:
                tx.execute(self.store.sql.clear_cancel, (run_id,))
        for log_id in to_cancel:
            cancel_task(self.broker, log_id)
        state.lease, state.resumed, state.takeover = lease, True, takeover
        state.schedule, state.scheduled_for = row["schedule"], _scheduled_for(row)
        return state

    def _run_row(self, tx: Transaction, run_id: int) -> dict[str, Any]:
        row = self.store.run(run_id, tx)
        if row is None:
            raise PipelineError(f"there is no run {run_id} to resume", path=self.pipeline.path)
        if row["pipeline"] != self.pipeline.name:
            raise PipelineError(f"run {run_id} is a run of pipeline {row['pipeline']!r}, not of"
                                f" {self.pipeline.name!r}", path=self.pipeline.path)
        wanted = self.pipeline.scheduled_for
        if wanted is not None and wanted != _scheduled_for(row):
            raise PipelineError(f"run {run_id} is for {_scheduled_for(row)}, and a run resumed"
                                " keeps the time it is for: drop -p scheduled_for",
                                path=self.pipeline.path)
        return row

    def _load(self, tx: Transaction, row: dict[str, Any]) -> RunState:
        state = RunState(int(row["run_id"]), self.pipeline, row["handle"], {},
                         RunStatus(row["status"]), resumed=True, schedule=row["schedule"],
                         scheduled_for=_scheduled_for(row))
        specs = {s.name: s for s in self.pipeline.dag}
        for task in self.store.tasks(state.run_id, tx):
            spec = specs.get(task["name"]) or instance_spec(specs, task["name"])
            if spec is not None:
                state.tasks[task["name"]] = task_from_row(spec, task)
        return state

    def _reconcile(self, tx: Transaction, run_id: int, handle: str, rerun_from: set[str],
                   to_cancel: list[int]) -> RunState:
        """Inside ``tx``: the stored tasks brought to the file's definitions, those of
        ``rerun_from`` and every task after them to run again."""
        dag = self.pipeline.dag
        stored = {row["name"]: row for row in self.store.tasks(run_id, tx)}
        open_ = self.store.open_attempts(tx, run_id)
        again = {s.name for s in dag if s.name not in stored
                 or stored[s.name]["definition"] != definition(s)}
        rerun = dependants(dag, again | rerun_from)
        state = RunState(run_id, self.pipeline, handle, {})
        for i, spec in enumerate(dag):
            row = stored.pop(spec.name, None)
            if row is None:
                self.store.insert_task(tx, run_id, spec, i)
            else:
                self.store.redefine_task(tx, run_id, spec, i)
            task = TaskState(spec) if row is None else task_from_row(spec, row)
            task.kept = task.status == TaskStatus.SUCCEEDED and spec.name not in rerun
            attempt = open_.get(spec.name)
            if attempt is not None and spec.name not in rerun:
                task.status, task.log_id = TaskStatus.RUNNING, int(attempt["log_id"])
                task.deadline = attempt["deadline"]
            elif not task.kept:
                if attempt is not None:  # superseded: its outcome, when it comes, is ignored
                    self.store.close_attempt(tx, int(attempt["log_id"]), "superseded")
                    to_cancel.append(int(attempt["log_id"]))
                task.status, task.failures, task.next_attempt = TaskStatus.PENDING, 0, None
                task.end_time, task.error, task.value = None, None, None
            self.store.set_task(tx, run_id, task)
            state.tasks[spec.name] = task
        self._stored = reconcile_instances(self.store, tx, state, stored, open_, rerun,
                                           to_cancel)
        return state

    # -- driving -------------------------------------------------------------------------------
    def drive(self, state: RunState, stop: threading.Event | None = None) -> RunState:
        """Run ``state`` until every task ended.  Ctrl-C cancels what runs and leaves the run
        ``cancelled`` (resumable); ``stop`` (a server stopping) hands the run back for
        another driver; a lost lease lets it go.  Never raises for a failed task."""
        with self.listener.driving(state):
            return self._drive(state, stop)

    def _drive(self, state: RunState, stop: threading.Event | None) -> RunState:
        self.listener.run_started(state)
        if state.status == RunStatus.RUNNING:
            try:
                try:
                    self._loop(state, stop)
                except KeyboardInterrupt:
                    self._interrupt(state)
            except leases.LeaseLost:
                self._let_go(state)
            except BrokerError:  # its dialog ended under it: by a driver that took it over?
                if self._holds(state):
                    raise
                self._let_go(state)
        state.finished_at = self.clock.monotonic()
        self.listener.run_finished(state)
        return state

    def _holds(self, state: RunState) -> bool:
        """Whether this driver still holds the run's lease (renewing it)."""
        try:
            self.renew(state)
        except leases.LeaseLost:
            return False
        return True

    def _let_go(self, state: RunState) -> None:
        state.lost = True
        log.warning("run %s of pipeline %s: another process drives it now (this one's lease"
                    " expired); letting it go", state.run_id, self.pipeline.name)

    def _loop(self, state: RunState, stop: threading.Event | None) -> None:
        recover_dead_tasks(self.broker)
        last_recovery = self._fenced_at = self.clock.monotonic()
        while not state.done:
            if stop is not None and stop.is_set():
                self.hand_back(state)
                return
            if state.cancel_requested:
                self._cancel(state, "cancelled (sbroker runs cancel)")
                return
            self._start_ready(state)
            if state.done:
                break
            self._wait(state)
            self._expire(state)
            now = self.clock.monotonic()
            if state.lease is not None and now - self._fenced_at >= leases.renew_every(
                    state.lease):
                self.renew(state)
            if now - last_recovery >= RECOVERY_SECONDS:
                recover_dead_tasks(self.broker)
                last_recovery = now
        if state.cancel_requested:
            self._cancel(state, "cancelled (sbroker runs cancel)")
        else:
            self._finish(state)

    def _fence(self, tx: Transaction, state: RunState) -> None:
        """Last in a bookkeeping transaction: the lease still ours (renewed), else the
        transaction rolls back with ``LeaseLost``; and whether a cancel was asked."""
        if state.lease is not None:
            if leases.fence(self.broker, tx, state.lease):
                state.cancel_requested = True
            self._fenced_at = self.clock.monotonic()

    def _start_ready(self, state: RunState) -> None:
        expandable = bool(self._mapped) and any(
            state.tasks[n].status == TaskStatus.PENDING for n in self._mapped)
        if not self._ready(state) and not expandable:
            return
        with self.broker.transaction() as tx:
            ended = self._expand(tx, state)
            started = self._send_ready(tx, state)
            self._fence(tx, state)
        self._ended(state, ended)
        self._started(state, started)

    def _expand(self, tx: Transaction, state: RunState) -> list[TaskState]:
        """Inside ``tx``: the mapped tasks now free to start expanded into their instances
        (rows inserted), those whose instances all ended settled, the tasks after a failed
        one skipped; the tasks that ended (mapping.py)."""
        if not self._mapped:  # nothing to expand or settle: no cost per outcome
            return []
        end = _iso(self.clock.now())
        done = expand_ready(state, end, self._stored)
        for task in done.changed:  # a mapped task's time runs from its expansion
            if task.spec.map is not None and task.started_at is None:
                task.started_at = self.clock.monotonic()
        ended = [t for t in done.changed
                 if t.spec.map is not None and t.status != TaskStatus.RUNNING]
        ended += settle_mapped(state, end)
        if ended and not self._interrupting:
            ended += state.skip_after_failures(end)
        record_expansion(self.store, tx, state, done, ended, self._stored)
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
        context = run_context(state.scheduled_for or format_time(now, self.pipeline.timezone))
        for task in ready:
            task.attempts += 1
            values = {n: state.tasks[n].value for n in task.spec.inputs if n in state.tasks}
            sent = attempt_task(task.spec, values, context)
            with self.listener.sending(state, task):  # the executor stops it at its timeout
                task.log_id = send_task(self.broker, tx, handle, bind_task(sent, context),
                                        self.pipeline.name,
                                        timeout=task.spec.timeout)
            task.status, task.ended, task.next_attempt = TaskStatus.RUNNING, None, None
            task.deadline = None if task.spec.timeout is None else now + task.spec.timeout
            task.start_time = task.start_time or _iso(now)
            self.store.insert_attempt(tx, state.run_id, task,
                                      0 if state.lease is None else state.lease.token)
            self.store.set_task(tx, state.run_id, task)
        return ready

    def _started(self, state: RunState, tasks: list[TaskState]) -> None:
        """After the commit that sent them: tell the listener."""
        for task in tasks:
            task.started_at = task.started_at or self.clock.monotonic()
            self.listener.task_started(state, task)

    def _ended(self, state: RunState, tasks: list[TaskState]) -> None:
        """After the commit that recorded them: tell the listener."""
        for task in tasks:
            task.finished_at = self.clock.monotonic()
            self.listener.task_finished(state, task)

    def _wait_seconds(self, state: RunState, now: float) -> float:
        due = [t.deadline for t in state.open_attempts() if t.deadline is not None]
        due += [t.next_attempt for t in state.retrying() if t.next_attempt is not None]
        most = RECOVERY_SECONDS if state.lease is None else leases.renew_every(state.lease)
        return max(0.0, min([most, *(d - now for d in due)]))

    def _wait(self, state: RunState, wait: float | None = None) -> None:
        """Receive what came on the run's dialog (waiting up to ``wait`` seconds) and record
        it in the same transaction, with the tasks it frees sent."""
        assert state.handle is not None
        wait = self._wait_seconds(state, self.clock.now()) if wait is None else wait
        ended: list[TaskState] = []
        started: list[TaskState] = []
        with self.broker.transaction() as tx:
            msgs = tx.receive(schema.INITIATOR_QUEUE, conversation_handle=state.handle,
                              timeout=wait)
            for msg in msgs:
                if msg.message_type_name == schema.ASYNC_DONE:
                    task = self._record(tx, state, result_of(msg))
                    if task is not None:
                        ended.append(task)
                elif msg.message_type_name in (m.END_DIALOG, m.ERROR):
                    raise BrokerError(f"the dialog of run {state.run_id} ended under it")
            if ended:
                started = self._after_ended(tx, state, ended)
            if msgs:  # a DialogTimer too: `runs cancel` wakes the driver with one
                self._fence(tx, state)
        self._ended(state, ended)
        self._started(state, started)

    def _after_ended(self, tx: Transaction, state: RunState,
                     ended: list[TaskState]) -> list[TaskState]:
        """Inside ``tx``, once attempts ended: skip what can no longer run, record the tasks,
        set the retry timer, and send the tasks now free to start (in the same commit)."""
        if not self._interrupting:  # then the rest ends cancelled, not skipped
            ended += self._expand(tx, state)
            ended += state.skip_after_failures(_iso(self.clock.now()))
        for task in ended:
            self.store.set_task(tx, state.run_id, task)
        self._set_timer(tx, state)
        return [] if self._interrupting else self._send_ready(tx, state)

    def _record(self, tx: Transaction, state: RunState, result: TaskResult) -> TaskState | None:
        """Inside the receiving transaction: an attempt's outcome, once."""
        outcome = "succeeded" if result.status == "succeeded" else "failed"
        if not self.store.close_attempt(tx, result.log_id, outcome):
            return None  # superseded, timed out, cancelled, or an outcome recorded already
        task = state.attempt(result.log_id)
        if task is None:
            return None
        end = (result.end_time or dt.datetime.now(dt.UTC)).isoformat()
        task.details = result.error_details
        return self._settle(task, result.status, result.error or result.status, end,
                            value=result.value, died=result.error in (DIED, STOPPED))

    def _settle(self, task: TaskState, status: str, error: str, end: str, *,
                value: Any = None, died: bool = False) -> TaskState:
        """An attempt of ``task`` ended with ``status``: the task succeeded, is retried, runs
        again (its executor died: no retry spent), or failed for good."""
        log_id = task.log_id
        assert log_id is not None
        task.log_id, task.deadline, task.last_log_id = None, None, log_id
        retry_in = None
        if status == "succeeded":
            task.status, task.value, task.error, task.end_time = (
                TaskStatus.SUCCEEDED, value, None, end)
        elif self._interrupting:
            task.status, task.error, task.end_time = TaskStatus.CANCELLED, error, end
        elif died:  # its executor died or stopped: it runs again, no retry spent
            task.status, task.error = TaskStatus.PENDING, error
        elif task.failures < task.spec.retry.retries:
            task.failures += 1
            retry_in = task.spec.retry.delay_before(task.failures)
            task.status, task.error = TaskStatus.RETRYING, error
            task.next_attempt = self.clock.now() + retry_in
        else:
            task.failures += 1
            task.status, task.error, task.end_time = TaskStatus.FAILED, error, end
        task.ended = AttemptEnd(log_id, status, None if status == "succeeded" else error,
                                retry_in)
        return task

    def _set_timer(self, tx: Transaction, state: RunState) -> None:
        """The dialog's timer at the next retry due (a DialogTimer wakes the wait)."""
        due = [t.next_attempt for t in state.retrying() if t.next_attempt is not None]
        if due:
            tx.begin_conversation_timer(state.handle, max(0.001, min(due) - self.clock.now()))

    def _expire(self, state: RunState) -> None:
        """Attempts past their deadline end now, failed, whether or not their code returns
        (the executor is asked to stop them); the run goes on."""
        now = self.clock.now()
        due = state.in_order([t for t in state.open_attempts()
                              if t.deadline is not None and t.deadline <= now])
        if not due:
            return
        stopped = [t.log_id for t in due if t.log_id is not None]
        with self.broker.transaction() as tx:
            ended = [self._settle(t, "failed", f"timed out after {t.spec.timeout:g} s",
                                  _iso(now))
                     for t in due if t.log_id is not None
                     and self.store.close_attempt(tx, t.log_id, "failed")]
            started = self._after_ended(tx, state, ended)
            self._fence(tx, state)
        for log_id in stopped:
            cancel_task(self.broker, log_id, timed_out=True)
        self._ended(state, ended)
        self._started(state, started)

    def _finish(self, state: RunState) -> None:
        """The run's verdict, its dialog released and its lease ended."""
        ok = all(t.status == TaskStatus.SUCCEEDED for t in state.tasks.values())
        with self.broker.transaction() as tx:
            if state.handle is not None:
                close_dialog(self.broker, tx, state.handle)
            status = RunStatus.SUCCEEDED if ok else RunStatus.FAILED
            self.store.set_run(tx, state.run_id, status, _iso(self.clock.now()), None)
            self._fence(tx, state)
            self._release(tx, state)
        state.status, state.handle = status, None

    def _release(self, tx: Transaction, state: RunState) -> None:
        if state.lease is not None:
            leases.release(self.broker, tx, state.lease)

    def renew(self, state: RunState) -> None:
        """Renew the run's lease (``LeaseLost`` when another process took it)."""
        with self.broker.transaction() as tx:
            self._fence(tx, state)

    def hand_back(self, state: RunState) -> None:
        """The driving server stops: the run's lease ends now, for another to take."""
        with self.broker.transaction() as tx:
            self._release(tx, state)
        state.handed_back = True
        log.info("run %s of pipeline %s handed back", state.run_id, self.pipeline.name)

    def _cancel(self, state: RunState, reason: str) -> None:
        """The run ends ``cancelled`` at once: its open attempts are recorded cancelled (and
        their executors asked to stop them), the tasks not started stay pending; resumable."""
        end = _iso(self.clock.now())
        stopped: list[int] = []
        ended: list[TaskState] = []
        with self.broker.transaction() as tx:
            for task in state.tasks.values():
                log_id = task.log_id
                if log_id is not None:
                    if self.store.close_attempt(tx, log_id, "cancelled"):
                        stopped.append(log_id)
                    task.log_id, task.deadline, task.last_log_id = None, None, log_id
                    task.status, task.error, task.end_time = TaskStatus.CANCELLED, reason, end
                    task.ended = AttemptEnd(log_id, "cancelled", reason)
                    ended.append(task)
                elif task.status == TaskStatus.RETRYING or (
                        task.spec.map is not None and task.status == TaskStatus.RUNNING):
                    task.status, task.next_attempt = TaskStatus.PENDING, None
                else:
                    continue
                self.store.set_task(tx, state.run_id, task)
            self.store.set_run(tx, state.run_id, RunStatus.CANCELLED, end, state.handle)
            tx.execute(self.store.sql.clear_cancel, (state.run_id,))
            self._fence(tx, state)
            self._release(tx, state)
        state.status = RunStatus.CANCELLED
        for log_id in stopped:
            cancel_task(self.broker, log_id)
        self._ended(state, ended)

    def _interrupt(self, state: RunState) -> None:
        """Ctrl-C: cancel the attempts in flight, record what comes back for a few seconds,
        and leave the run ``cancelled`` with its dialog kept for the resume."""
        state.interrupted = True
        self._interrupting = True
        for task in state.tasks.values():
            if task.log_id is not None:
                cancel_task(self.broker, task.log_id)
        deadline = self.clock.monotonic() + DRAIN_SECONDS
        with _ignoring_interrupts():
            while state.running() and self.clock.monotonic() < deadline:
                self._wait(state, wait=min(0.5, deadline - self.clock.monotonic()))
            self._cancel(state, "interrupted")


@contextlib.contextmanager
def _ignoring_interrupts() -> Iterator[None]:
    """A second Ctrl-C while the run is being put away ends the wait, not the bookkeeping."""
    try:
        yield
    except KeyboardInterrupt:
        log.warning("interrupted again while cancelling: the run is left for --resume")
