"""What any process may do to a run it does not drive (docs/pipelines.md, "Running in
production"): submit one for the servers to drive, wait for one's end, cancel one."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from sbroker.apps.pipeline import leases
from sbroker.apps.pipeline.model import Pipeline, RunStatus, TaskStatus
from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.runner import DurableRunner
from sbroker.apps.pipeline.store import RunStore
from sbroker.apps.scheduler.client import cancel_task
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI

__all__ = ["WAIT_POLL_SECONDS", "cancel_run", "run_exit_code", "submit_run", "wait_run"]
WAIT_POLL_SECONDS = 0.2  # how often `runs wait` looks at the run
CANCEL_WAKE_SECONDS = 0.001  # the run dialog's timer, set by a cancel to wake its driver


def submit_run(broker: BrokerAPI, pipeline: Pipeline) -> int:
    """Record a new run of ``pipeline`` that no process drives yet: the first `sbroker
    serve` to look takes it.  Its id."""
    return DurableRunner(broker, pipeline).create(driven=False).run_id


def run_exit_code(status: str) -> int:
    """`sbroker run`'s exit code for a run that ended with ``status``."""
    return 0 if status == RunStatus.SUCCEEDED else 1


def wait_run(broker: BrokerAPI, run_id: int, timeout: float | None = None, *,
             stop: threading.Event | None = None,
             on_poll: Callable[[], None] | None = None) -> str | None:
    """Wait for run ``run_id`` to end: its status, or None after ``timeout`` seconds;
    ``PipelineError`` when there is no such run."""
    store = RunStore(broker)
    clock = broker.clock
    deadline = None if timeout is None else clock.monotonic() + timeout
    tick = stop or threading.Event()
    while True:
        row = store.run(run_id)
        if row is None:
            raise PipelineError(f"there is no run {run_id}")
        if row["status"] != RunStatus.RUNNING:
            return str(row["status"])
        if deadline is not None and clock.monotonic() >= deadline:
            return None
        if on_poll is not None:
            on_poll()
        wait = WAIT_POLL_SECONDS if deadline is None else min(
            WAIT_POLL_SECONDS, max(0.0, deadline - clock.monotonic()))
        if tick.wait(wait):
            return None


def cancel_run(broker: BrokerAPI, run_id: int) -> str:
    """Cancel run ``run_id`` from any process: its driver (woken at once) records its running
    attempts cancelled and ends it ``cancelled``; with no live driver, this process does.
    What was done, in a line; ``PipelineError`` when the run does not exist or has ended."""
    store = RunStore(broker)
    leases.forget_dead_sessions(broker)
    with broker.transaction() as tx:
        row = store.run(run_id, tx)
        if row is None:
            raise PipelineError(f"there is no run {run_id}")
        if row["status"] != RunStatus.RUNNING:
            raise PipelineError(f"run {run_id} is {row['status']}, not running: nothing to"
                                " cancel")
        leases.request_cancel(broker, tx, run_id)
    driver = leases.driver_of(row)
    if driver is not None:
        _wake(broker, row["handle"])
        return (f"run {run_id}: cancel asked of its driver {driver['host']} (pid"
                f" {driver['pid']})")
    try:
        _cancel_undriven(broker, run_id)
    except leases.LeaseHeld as held:  # a server took it meanwhile: it cancels it
        _wake(broker, row["handle"])
        return f"run {run_id}: cancel asked of its driver {held.host} (pid {held.pid})"
    return f"run {run_id} cancelled"


def _wake(broker: BrokerAPI, handle: str | None) -> None:
    """The driver waits on the run's dialog: its timer, fired now, wakes it to hear the ask
    (a commit of its own: the ask above must not wait for the driver's locks)."""
    if handle is None:
        return
    try:
        with broker.transaction() as tx:
            tx.begin_conversation_timer(handle, CANCEL_WAKE_SECONDS)
    except BrokerError:  # the dialog ended: the run is ending anyway
        pass


def _cancel_undriven(broker: BrokerAPI, run_id: int) -> None:
    """A run no live process drives: take its lease and cancel it here."""
    store = RunStore(broker)
    end = dt.datetime.fromtimestamp(broker.clock.now(), dt.UTC).isoformat()
    stopped: list[int] = []
    with broker.transaction() as tx:
        row = store.run(run_id, tx)
        assert row is not None
        lease = leases.acquire(broker, tx, run_id, float(row["lease_seconds"]))
        for name, attempt in store.open_attempts(tx, run_id).items():
            if store.close_attempt(tx, int(attempt["log_id"]), "cancelled"):
                stopped.append(int(attempt["log_id"]))
            store.set_task_status(tx, run_id, name, TaskStatus.CANCELLED, end,
                                  "cancelled (sbroker runs cancel)")
        for task in store.tasks(run_id, tx):
            if task["status"] == TaskStatus.RETRYING:
                store.set_task_status(tx, run_id, task["name"], TaskStatus.PENDING, None, None)
        store.set_run(tx, run_id, RunStatus.CANCELLED, end, row["handle"])
        tx.execute(store.sql.clear_cancel, (run_id,))
        leases.release(broker, tx, lease)
    for log_id in stopped:
        cancel_task(broker, log_id)
