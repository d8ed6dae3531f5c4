"""The scheduler page: running tasks, the searchable ExecutionLog, and a Gantt timeline of each
pipeline run's stages and tasks, laid out here and drawn as SVG by the template.

A run is the tasks of one scheduler dialog (``ExecutionLog.SchedulerHandle``: a pipeline run
keeps one dialog for its whole life).  A pipeline run's tasks are named by its attempts
(``PipelineAttempts``): a ``[[stage]]`` file's task ``stage/task`` is drawn under its stage, a
``[[task]]`` file's tasks under one row for the run.  For tasks sent by other code, a stage is
inferred as seed 002 defines one: the tasks sent between two waits, i.e. a task queued after
every task before it had ended starts the next stage.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.dashboard.reader import (
    PAGE_SIZE,
    TASK_STATUSES,
    BadRequest,
    Page,
    Reader,
    parse_time,
)
from sbroker.core.errors import BrokerError

LABEL_WIDTH = 230
CHART_WIDTH = 700
ROW_HEIGHT = 22
RUNS_SHOWN = 5
TASK_BARS = 150  # a run with more tasks is drawn by its stages alone (the page stays small)
_STEPS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600)


@dataclass
class Bar:
    """One row of a chart: a stage (its span) or a task (waiting, then running)."""

    label: str
    kind: str  # "stage" or "task"
    status: str
    y: int
    x_queued: float
    x_start: float
    x_end: float
    title: str
    log_id: int | None = None
    error: str | None = None

    @property
    def width(self) -> float:
        return max(2.0, self.x_end - self.x_start)


@dataclass
class Chart:
    """The Gantt chart of one run."""

    handle: str
    pool: str
    started: str
    seconds: float
    status: str
    bars: list[Bar] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    tasks: int = 0
    tasks_drawn: bool = True

    @property
    def height(self) -> int:
        return (len(self.bars) + 1) * ROW_HEIGHT + 8

    @property
    def width(self) -> int:
        return LABEL_WIDTH + CHART_WIDTH + 10


def _when(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def task_name(row: Mapping[str, Any]) -> str:
    """A task's name: the one its pipeline gave (without its stage), else its SQL text or
    Python target."""
    if row.get("TaskName"):
        return str(row["TaskName"]).rpartition("/")[2]
    try:
        task = json.loads(row["Task"])
    except (TypeError, ValueError):
        return f"task {row['LogID']}"
    text = str(task.get("sql") or task.get("target") or f"task {row['LogID']}")
    return text if len(text) <= 60 else text[:57] + "..."


def stages_of(tasks: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The run's stages in order: the stages its pipeline named, else inferred from
    queued/end times."""
    if tasks and all(t.get("TaskName") for t in tasks):
        named: dict[str, list[dict[str, Any]]] = {}
        for t in tasks:
            stage, _, _ = str(t["TaskName"]).rpartition("/")
            named.setdefault(stage or "tasks", []).append(t)
        return list(named.items())
    stages: list[list[dict[str, Any]]] = []
    last_end: dt.datetime | None = None
    for t in tasks:
        queued = _when(t["QueuedTime"])
        if not stages or (last_end is not None and queued is not None and queued >= last_end
                          and all(s["EndTime"] for s in stages[-1])):
            stages.append([])
            last_end = None
        stages[-1].append(t)
        end = _when(t["EndTime"])
        if end is not None and (last_end is None or end > last_end):
            last_end = end
    return [(f"stage {i}", rows) for i, rows in enumerate(stages, 1)]


def _step(seconds: float) -> float:
    return next((s for s in _STEPS if seconds / s <= 8), _STEPS[-1])


def chart(run: Mapping[str, Any], tasks: list[dict[str, Any]], now: dt.datetime) -> Chart:
    """Lay out one run: a stage row above its tasks' rows, times scaled to the chart."""
    times = [w for t in tasks for w in (_when(t["QueuedTime"]), _when(t["EndTime"])) if w]
    begin = min(times) if times else now
    end = max([*times, *([now] if run["open_tasks"] else [])]) if times else now
    span = max((end - begin).total_seconds(), 0.001)
    scale = CHART_WIDTH / span

    def x(when: dt.datetime | None, default: dt.datetime) -> float:
        return LABEL_WIDTH + ((when or default) - begin).total_seconds() * scale

    status = ("running" if run["open_tasks"] else "failed" if run["failed_tasks"]
              else "succeeded")
    out = Chart(str(run["SchedulerHandle"]), str(run["pool"] or ""),
                begin.isoformat(" ", "seconds"), span, status, tasks=len(tasks),
                tasks_drawn=len(tasks) <= TASK_BARS)
    step = _step(span)
    out.ticks = [(LABEL_WIDTH + i * step * scale, f"{i * step:g}s")
                 for i in range(int(span / step) + 1)]
    y = ROW_HEIGHT
    for name, rows in stages_of(tasks):
        out.stages.append(name)
        starts = [_when(r["StartTime"]) or _when(r["QueuedTime"]) or now for r in rows]
        ends = [_when(r["EndTime"]) or now for r in rows]
        statuses = {r["Status"] for r in rows}
        stage_status = next((s for s in ("running", "queued", "failed", "cancelled")
                             if s in statuses), "succeeded")
        first, last = min(starts), max(ends)
        out.bars.append(Bar(name, "stage", stage_status, y, x(first, now), x(first, now),
                            x(last, now), f"{name}: {(last - first).total_seconds():.2f} s"))
        y += ROW_HEIGHT
        for r, start, stop in zip(rows, starts, ends, strict=True):
            if not out.tasks_drawn and not r["Error"]:
                continue
            label = task_name(r)
            seconds = (stop - start).total_seconds()
            out.bars.append(Bar(
                label, "task", str(r["Status"]), y, x(_when(r["QueuedTime"]), start),
                x(start, now), x(stop, now),
                f"{label} (log {r['LogID']}): {r['Status']}, {seconds:.2f} s",
                int(r["LogID"]), r["Error"]))
            y += ROW_HEIGHT
    return out


def runs(reader: Reader, limit: int = RUNS_SHOWN) -> list[Chart]:
    """The Gantt charts of the most recent runs."""
    recent = reader.scheduler_rows("recent_runs", {"limit": limit}) or []
    now = dt.datetime.now(dt.UTC)
    charts = []
    for run in recent:
        tasks = reader.scheduler_rows("run_tasks", {"handle": run["SchedulerHandle"]}) or []
        charts.append(chart(run, tasks, now))
    return charts


def spark_ui(reader: Reader, configured: str | None) -> str | None:
    """The Spark UI's address: the one given, else the executor's when its UI is on."""
    if configured:
        return configured
    from sbroker.apps.scheduler.schema import load_spark_config

    try:
        config = load_spark_config(reader.broker)  # type: ignore[arg-type]
    except BrokerError:
        return None
    if config.remote or config.conf.get("spark.ui.enabled") != "true":
        return None
    hosts = [r["host"] for r in reader.broker.view("dm_broker_activated_tasks")
             if r["queue_name"] == "QueueAsyncTarget"]
    return f"http://{hosts[0] if hosts else 'localhost'}:{config.conf.get('spark.ui.port', '4040')}"


def scheduler_page(reader: Reader, filters: Mapping[str, str], page: int,
                   spark_ui_url: str | None) -> dict[str, Any]:
    """Everything the scheduler page shows; None parts when the executor is not installed."""
    status = filters.get("status") or None
    if status is not None and status not in TASK_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(TASK_STATUSES)}, got {status!r}")
    params = {"status": status, "pool": filters.get("scheduler") or None,
              "since": parse_time(filters.get("since"), "since"),
              "until": parse_time(filters.get("until"), "until")}
    log = reader.scheduler_rows("log_page", {
        **params, "limit": PAGE_SIZE, "offset": (page - 1) * PAGE_SIZE})
    if log is None:
        return {"installed": False}
    total = reader.scalar("log_count", params)
    return {
        "installed": True,
        "counts": reader.task_counts(),
        "running": reader.scheduler_rows("running_tasks") or [],
        "schedulers": reader.scheduler_rows("schedulers") or [],
        "log": Page(log, page, total),
        "pools": [r["Pool"] for r in reader.scheduler_rows("pools") or []],
        "runs": runs(reader),
        "spark_ui": spark_ui(reader, spark_ui_url),
        "statuses": TASK_STATUSES,
    }
