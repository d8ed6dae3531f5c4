"""Reading durable runs back (``sbroker runs``, the dashboard, the Python API): the shapes
SPEC §13 names for ``runs --json`` and ``runs show --json``."""

from __future__ import annotations

import json
from typing import Any

from sbroker.apps.sql import read, statements
from sbroker.engine.api import BrokerAPI

__all__ = ["get_run", "list_runs", "run_attempts", "run_params"]


def _run(row: Any) -> dict[str, Any]:
    run_id, pipeline, status, start, end = row
    return {"run_id": int(run_id), "pipeline": pipeline, "status": status, "start_time": start,
            "end_time": end}


def list_runs(broker: BrokerAPI, pipeline: str | None = None, *,
              limit: int = 1000) -> list[dict[str, Any]]:
    """Runs, newest first: ``run_id``, ``pipeline``, ``status``, ``start_time``,
    ``end_time`` (ISO 8601 text, ``None`` while running)."""
    q = statements(broker, "sbroker.apps.pipeline")
    rows = (read(broker, q.list_runs, (limit,)) if pipeline is None
            else read(broker, q.list_runs_of, (pipeline, limit)))
    return [_run(row) for row in rows]


def get_run(broker: BrokerAPI, run_id: int) -> dict[str, Any] | None:
    """One run with its ``tasks`` (``name``, ``status``, ``attempts``, ``start_time``,
    ``end_time``, ``value``, ``error``) in the file's order; ``None`` if there is none."""
    q = statements(broker, "sbroker.apps.pipeline")
    rows = read(broker, q.run_by_id, (run_id,))
    if not rows:
        return None
    run_id_, pipeline, _, _, status, start, end, _ = rows[0]
    out = _run((run_id_, pipeline, status, start, end))
    out["tasks"] = [
        {"name": name, "status": status, "attempts": int(attempts), "start_time": start,
         "end_time": end, "value": json.loads(value) if value else None, "error": error}
        for name, _, _, _, status, attempts, _, _, start, end, value, error
        in read(broker, q.run_tasks, (run_id,))]
    return out


def run_params(broker: BrokerAPI, run_id: int) -> dict[str, Any]:
    """The parameters run ``run_id`` was started with (none when there is no such run)."""
    rows = read(broker, statements(broker, "sbroker.apps.pipeline").run_by_id, (run_id,))
    return dict(json.loads(rows[0][3] or "{}")) if rows else {}


def run_attempts(broker: BrokerAPI, run_id: int) -> list[dict[str, Any]]:
    """Every attempt of a run, oldest first: ``task``, ``attempt``, ``log_id``, ``status``
    (its ExecutionLog row's), ``start_time``, ``end_time``, ``error``."""
    q = statements(broker, "sbroker.apps.pipeline")
    return [{"task": task, "attempt": int(attempt), "log_id": int(log_id), "status": status,
             "start_time": start, "end_time": end, "error": error}
            for task, attempt, log_id, status, start, end, error, _
            in read(broker, q.run_attempts, (run_id,))]
