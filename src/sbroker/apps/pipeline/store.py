"""The rows of durable runs: runs, their tasks and each task's attempts, through the named
statements of this package's ``sqlite.sql`` / ``postgresql.sql``, read by column name.

Writes take the caller's transaction (the runner records an outcome in the transaction that
receives it); reads without one run in a transaction of their own.  Who may write a run's
bookkeeping (its lease) is leases.py's to say.
"""

from __future__ import annotations

import json
from typing import Any

from sbroker.apps.pipeline.model import Pipeline, RunStatus, TaskSpec, TaskStatus
from sbroker.apps.pipeline.runstate import TaskState
from sbroker.apps.pipeline.values import definition
from sbroker.apps.sql import dicts, statements
from sbroker.core.errors import BrokerError
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction
from sbroker.storage.queries import Queries

__all__ = ["RunStore", "TickTaken"]


class TickTaken(BrokerError):
    """The tick of the schedule has a run already (a tick is run once: docs/pipelines.md,
    "Data intervals and backfills")."""


class RunStore:
    """The statements on runs, tasks and attempts of one broker."""

    def __init__(self, broker: BrokerAPI) -> None:
        self.broker = broker
        self.sql: Queries = statements(broker, "sbroker.apps.pipeline")

    def _read(self, statement: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self.broker.transaction() as tx:
            return dicts(tx.execute(statement, params))

    # -- runs ------------------------------------------------------------------------------------
    def run(self, run_id: int, tx: Transaction | None = None) -> dict[str, Any] | None:
        """Run ``run_id``'s row (``live``: a driver holds its lease now), or None."""
        rows = (self._read(self.sql.run_by_id, (run_id,)) if tx is None
                else dicts(tx.execute(self.sql.run_by_id, (run_id,))))
        return rows[0] if rows else None

    def runs(self, pipeline: str | None, limit: int) -> list[dict[str, Any]]:
        """Runs, newest first (of ``pipeline`` only, when given)."""
        if pipeline is None:
            return self._read(self.sql.list_runs, (limit,))
        return self._read(self.sql.list_runs_of, (pipeline, limit))

    def latest_unfinished(self, pipeline: str) -> int | None:
        """The newest run of ``pipeline`` that did not succeed, if any."""
        rows = self._read(self.sql.latest_unfinished, (pipeline,))
        return int(rows[0]["run_id"]) if rows else None

    def run_count(self, pipeline: str) -> int:
        """How many runs ``pipeline`` has (skipped schedule ticks aside)."""
        return int(self._read(self.sql.run_count, (pipeline,))[0]["runs"])

    def must_wait(self, run_id: int) -> bool:
        """Whether run ``run_id`` of a schedule waits its turn: its schedule's
        ``max_active_runs`` runs are running ahead of it."""
        rows = self._read(self.sql.runs_ahead, (run_id,))
        return bool(rows) and int(rows[0]["ahead"]) >= int(rows[0]["most"])

    def takeable(self) -> list[dict[str, Any]]:
        """Running runs that no live driver holds (submitted, handed back, or orphaned)."""
        return self._read(self.sql.takeable_runs)

    def insert_run(self, tx: Transaction, pipeline: Pipeline, handle: str,
                   schedule: str | None, start: str,
                   driver: tuple[int, str, int] | None, *, scheduled_for: str,
                   tick: int | None = None) -> tuple[int, int]:
        """A new run, its lease held by ``driver`` (session, host, pid) or by none (a
        submitted run), for ``scheduled_for`` (of ``schedule``'s ``tick``, if given); its
        id and lease token.  ``TickTaken`` when the tick has a run already."""
        file = pipeline.source or str(pipeline.path.resolve() if pipeline.path else "")
        common = (pipeline.name, file,
                  json.dumps(dict(pipeline.params), default=str), start, handle,
                  scheduled_for, tick, schedule, schedule, schedule)
        lease = pipeline.options.lease
        if driver is None:
            rows = dicts(tx.execute(self.sql.insert_submitted_run, (*common, lease)))
        else:
            rows = dicts(tx.execute(self.sql.insert_run, (*common, *driver, lease, lease)))
        if not rows:
            raise TickTaken(f"tick {scheduled_for} of schedule {schedule!r} has a run already")
        return int(rows[0]["run_id"]), int(rows[0]["lease_token"])

    def set_run(self, tx: Transaction, run_id: int, status: RunStatus, end: str | None,
                handle: str | None) -> None:
        """The run's status, end time and dialog (its cancel request answered)."""
        tx.execute(self.sql.set_run, (status.value, end, handle, run_id))

    # -- tasks -------------------------------------------------------------------------------------
    def tasks(self, run_id: int, tx: Transaction | None = None) -> list[dict[str, Any]]:
        """The run's task rows in the file's order (``value``: JSON text)."""
        if tx is None:
            return self._read(self.sql.run_tasks, (run_id,))
        return dicts(tx.execute(self.sql.run_tasks, (run_id,)))

    def insert_task(self, tx: Transaction, run_id: int, spec: TaskSpec, position: int) -> None:
        tx.execute(self.sql.insert_run_task, (run_id, spec.name, position,
                                              json.dumps(spec.after), definition(spec)))

    def redefine_task(self, tx: Transaction, run_id: int, spec: TaskSpec,
                      position: int) -> None:
        tx.execute(self.sql.redefine_task, (position, json.dumps(spec.after), definition(spec),
                                            run_id, spec.name))

    def delete_task(self, tx: Transaction, run_id: int, name: str) -> None:
        tx.execute(self.sql.delete_run_task, (run_id, name))

    def set_task(self, tx: Transaction, run_id: int, task: TaskState) -> None:
        tx.execute(self.sql.set_task, task.row(run_id))

    def set_task_status(self, tx: Transaction, run_id: int, name: str, status: TaskStatus,
                        end: str | None, error: str | None) -> None:
        """One task's status, end time and error (a run cancelled by another process)."""
        tx.execute(self.sql.set_task_status, (status.value, end, error, run_id, name))

    # -- attempts ----------------------------------------------------------------------------------
    def insert_attempt(self, tx: Transaction, run_id: int, task: TaskState,
                       token: int) -> None:
        """The attempt of ``task`` just sent (``token``: the sending driver's lease's)."""
        tx.execute(self.sql.insert_attempt, (task.log_id, run_id, task.name, task.attempts,
                                             task.deadline, token))

    def open_attempts(self, tx: Transaction, run_id: int) -> dict[str, dict[str, Any]]:
        """The run's attempts whose outcome is not recorded yet, by task."""
        return {row["task"]: row for row in dicts(tx.execute(self.sql.open_attempts,
                                                             (run_id,)))}

    def close_attempt(self, tx: Transaction, log_id: int, outcome: str) -> bool:
        """Record an attempt's outcome, once: False when it was recorded already."""
        return bool(tx.execute(self.sql.close_attempt, (outcome, log_id)).rowcount == 1)

    def attempts(self, run_id: int) -> list[dict[str, Any]]:
        """Every attempt of the run, oldest first."""
        return self._read(self.sql.run_attempts, (run_id,))
