"""The runner interface between the executor and Spark, and what one run produces.

The executor only ever calls ``execute(runner, task, log_id=..., pool=...)``: it never raises
for a task's own failure and turns the runner's outcome into what the ExecutionLog row records.
``Runner.run`` itself returns a ``RunOutcome`` or raises ``TaskError`` / ``TaskCancelled``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

from sbroker.apps.spark.tasks import (
    JsonValue,
    Task,
    TaskCancelled,
    TaskError,
    TaskResult,
    TaskStatus,
    one_line_error,
)

__all__ = [
    "MAX_VALUE_BYTES",
    "Execution",
    "RunOutcome",
    "Runner",
    "SparkProgress",
    "execute",
    "json_value",
    "spark_ids_json",
]

#: A task value larger than this (encoded as JSON) is dropped: values are for small results.
MAX_VALUE_BYTES = 64 * 1024


@dataclass(frozen=True)
class RunOutcome:
    """A successful run: the task's small JSON ``value`` and the ids of its Spark jobs
    (under Spark Connect, which shows its clients no job ids: its operation ids)."""

    value: JsonValue = None
    spark_job_ids: list[int] = field(default_factory=list)
    operation_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SparkProgress:
    """Progress of a task's Spark jobs, summed over the stages the status tracker knows."""

    jobs: int = 0
    active_jobs: int = 0
    tasks: int = 0
    completed_tasks: int = 0
    active_tasks: int = 0
    failed_tasks: int = 0

    @property
    def fraction(self) -> float | None:
        """Completed share of the known Spark tasks, or ``None`` before any is known."""
        return self.completed_tasks / self.tasks if self.tasks else None


@runtime_checkable
class Runner(Protocol):
    """Runs tasks; one instance is shared by all executor threads (it must be thread-safe)."""

    def run(self, task: Task, *, log_id: int, pool: str | None = None) -> RunOutcome:
        """Run ``task`` in the calling thread; raise ``TaskError`` or ``TaskCancelled``."""
        ...

    def cancel(self, log_id: int) -> bool:
        """Cancel the task's Spark jobs; a later ``run`` of that log id is cancelled at once.

        Returns True when the task was running here.
        """
        ...

    def progress(self, log_id: int) -> SparkProgress | None:
        """Spark task progress of a running task, ``None`` when nothing is known."""
        ...

    def close(self) -> None:
        """Release what the runner created (the SparkSession it started)."""
        ...


@dataclass(frozen=True)
class Execution:
    """What the executor writes to the ExecutionLog row for one run of a task."""

    log_id: int
    status: TaskStatus
    start_time: dt.datetime
    end_time: dt.datetime
    value: JsonValue = None
    error: str | None = None
    spark_job_ids: list[int] = field(default_factory=list)
    details: str | None = None
    operation_ids: list[str] = field(default_factory=list)

    def result(self) -> TaskResult:
        """The ``TaskResult`` reported to the scheduler."""
        return TaskResult(self.log_id, self.status, self.error, self.start_time,
                          self.end_time, self.value, self.details)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def execute(runner: Runner, task: Task, *, log_id: int, pool: str | None = None,
            now: Callable[[], dt.datetime] = _utcnow) -> Execution:
    """Run one task and classify the outcome; only ``BaseException``s like SystemExit escape."""
    start = now()
    try:
        outcome = runner.run(task, log_id=log_id, pool=pool)
    except TaskCancelled as exc:
        return Execution(log_id, "cancelled", start, now(), error=exc.error,
                         spark_job_ids=exc.spark_job_ids, details=exc.details,
                         operation_ids=exc.operation_ids)
    except TaskError as exc:
        return Execution(log_id, "failed", start, now(), error=exc.error,
                         spark_job_ids=exc.spark_job_ids, details=exc.details,
                         operation_ids=exc.operation_ids)
    except Exception as exc:  # a runner bug must still not kill the executor
        return Execution(log_id, "failed", start, now(), error=one_line_error(exc),
                         details=traceback.format_exc())
    return Execution(log_id, "succeeded", start, now(), value=json_value(outcome.value),
                     spark_job_ids=list(outcome.spark_job_ids),
                     operation_ids=list(outcome.operation_ids))


def spark_ids_json(job_ids: list[int], operation_ids: list[str]) -> str:
    """The ExecutionLog ``SparkJobIds`` text: the job ids (``[3, 7]``), or under Spark
    Connect ``{"connect_operation_ids": [...]}``, named so that nobody takes them for jobs."""
    if operation_ids:
        return json.dumps({"connect_operation_ids": operation_ids})
    return json.dumps(job_ids)


def json_value(obj: Any, limit: int = MAX_VALUE_BYTES) -> JsonValue:
    """``obj`` made JSON-safe (dates as ISO text, Decimals as floats, rows as lists).

    Returns ``None`` when it cannot be represented or its encoding exceeds ``limit`` bytes.
    """
    try:
        safe = _safe(obj, 0)
        encoded = json.dumps(safe, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return safe if len(encoded.encode()) <= limit else None


def _safe(obj: Any, depth: int) -> JsonValue:
    if depth > 20:
        raise ValueError("too deep")
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Decimal):
        return float(obj) if obj.is_finite() else None
    if isinstance(obj, dt.datetime | dt.date | dt.time):
        return obj.isoformat()
    if isinstance(obj, dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, bytes | bytearray):
        return bytes(obj).hex()
    if isinstance(obj, Mapping):
        return {str(k): _safe(v, depth + 1) for k, v in obj.items()}
    # a pyspark Row is a tuple: it becomes a list of its values
    if isinstance(obj, Sequence | set | frozenset):
        return [_safe(v, depth + 1) for v in obj]
    raise TypeError(f"not JSON-representable: {type(obj).__name__}")
