"""The dashboard's page of durable pipeline runs (docs/pipelines.md): each recent run with its
status and a timeline of every attempt of every task (a retry is one more bar on its task's
row), and the schedules with their next due time."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sbroker.apps.pipeline.runs import get_run, list_runs, run_attempts
from sbroker.apps.pipeline.schedules import list_schedules
from sbroker.engine.api import BrokerAPI

__all__ = ["runs_page"]
RUNS = 10  # runs drawn on the page, newest first
WIDTH, LEFT, ROW = 900, 220, 20


def _t(text: str | None) -> float | None:
    return dt.datetime.fromisoformat(text).timestamp() if text else None


def _timeline(run: dict[str, Any], attempts: list[dict[str, Any]], now: float) -> dict[str, Any]:
    """Rows of bars: one row per task, one bar per attempt, scaled to the run's span."""
    starts = [t for a in attempts if (t := _t(a["start_time"])) is not None]
    begin = min(starts, default=_t(run["start_time"]) or now)
    ends = [_t(a["end_time"]) or now for a in attempts]
    span = max(max(ends, default=begin) - begin, 0.001)
    scale = (WIDTH - LEFT - 10) / span
    by_task: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        by_task.setdefault(a["task"], []).append(a)
    rows = []
    for i, task in enumerate(run["tasks"]):
        bars = []
        for a in by_task.get(task["name"], []):
            start = _t(a["start_time"])
            if start is None:
                continue  # queued, not started
            end = _t(a["end_time"]) or now
            bars.append({"x": LEFT + (start - begin) * scale,
                         "width": max(2.0, (end - start) * scale), "status": a["status"],
                         "log_id": a["log_id"], "attempt": a["attempt"],
                         "error": a["error"] or ""})
        retries = max(0, len(by_task.get(task["name"], [])) - 1)
        rows.append({**task, "y": 18 + i * ROW, "bars": bars, "retries": retries})
    return {"rows": rows, "height": 24 + len(rows) * ROW, "width": WIDTH,
            "seconds": span if attempts else 0.0}


def runs_page(broker: BrokerAPI) -> dict[str, Any]:
    """The context of ``pipeline_runs.html``."""
    now = broker.clock.now()
    runs = []
    for summary in list_runs(broker, limit=RUNS):
        run = get_run(broker, summary["run_id"])
        if run is None:
            continue
        runs.append({**run, **_timeline(run, run_attempts(broker, run["run_id"]), now)})
    return {"runs": runs, "schedules": list_schedules(broker)}
