"""Reading durable runs back (``sbroker runs``, the dashboard, the Python API) in the shapes
docs/pipelines.md gives for ``runs --json`` and ``runs show --json``."""

from __future__ import annotations

import json
from typing import Any

from sbroker.apps.pipeline.leases import driver_of
from sbroker.apps.pipeline.store import RunStore
from sbroker.engine.api import BrokerAPI

__all__ = ["get_run", "list_runs", "run_attempts", "run_params", "scheduled_for_of_row"]

_RUN_KEYS = ("run_id", "pipeline", "status", "start_time", "end_time", "scheduled_for")
_TASK_KEYS = ("name", "status", "attempts", "start_time", "end_time", "value", "error")


def scheduled_for_of_row(row: dict[str, Any]) -> str:
    """The time a stored run is for (docs/pipelines.md, "Data intervals and backfills"); a
    run recorded before runs had one: its start, to the second."""
    return str(row["scheduled_for"] or row["start_time"][:19] + "+00:00")


def _run(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: row[k] for k in _RUN_KEYS}, "scheduled_for": scheduled_for_of_row(row)}


def list_runs(broker: BrokerAPI, pipeline: str | None = None, *,
              limit: int = 1000) -> list[dict[str, Any]]:
    """Runs, newest first: ``run_id``, ``pipeline``, ``status``, ``start_time``,
    ``end_time`` (ISO 8601 text, ``None`` while running), ``scheduled_for`` (the time the
    run is for: ISO 8601 to the second, with its UTC offset)."""
    return [_run(row) for row in RunStore(broker).runs(pipeline, limit)]


def get_run(broker: BrokerAPI, run_id: int) -> dict[str, Any] | None:
    """One run (the keys of ``list_runs``) with its ``tasks`` (``name``, ``status``,
    ``attempts``, ``start_time``, ``end_time``, ``value``, ``error``) in the file's order,
    its ``driver`` (``{"host", "pid"}`` of the process driving it now, or None) and
    ``takeovers`` (how often another process took it over); ``None`` if there is no such
    run."""
    store = RunStore(broker)
    row = store.run(run_id)
    if row is None:
        return None
    out = _run(row)
    out["driver"] = driver_of(row)
    out["takeovers"] = int(row["takeovers"])
    out["tasks"] = [{**{k: task[k] for k in _TASK_KEYS}, "attempts": int(task["attempts"]),
                     "value": json.loads(task["value"]) if task["value"] else None}
                    for task in store.tasks(run_id)]
    return out


def run_params(broker: BrokerAPI, run_id: int) -> dict[str, Any]:
    """The parameters run ``run_id`` was started with (none when there is no such run)."""
    row = RunStore(broker).run(run_id)
    return dict(json.loads(row["params"] or "{}")) if row is not None else {}


def run_attempts(broker: BrokerAPI, run_id: int) -> list[dict[str, Any]]:
    """Every attempt of a run, oldest first: ``task``, ``attempt``, ``log_id``, ``status``
    (its outcome for the run once recorded, else its ExecutionLog row's), ``start_time``,
    ``end_time``, ``error``."""
    return [{**row, "attempt": int(row["attempt"]), "log_id": int(row["log_id"])}
            for row in RunStore(broker).attempts(run_id)]
