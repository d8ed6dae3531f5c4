"""Task types of the scheduler, their JSON message bodies, and task results.

A task is what one ExecAsync sends: ``SparkSQL`` (a statement, optionally with named or
positional parameters) or ``PythonTask`` (``"module:function"`` called as
``function(spark, **kwargs)``). A plain ``str`` is shorthand for ``SparkSQL``. Both are frozen
and carry only JSON data, so that they travel as message bodies and are stored verbatim in the
ExecutionLog ``Task`` column.
"""

from __future__ import annotations

import importlib
import json
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from sbroker.core.errors import BrokerError

__all__ = [
    "TASK_FORMAT_VERSION",
    "PythonTask",
    "SparkSQL",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskResult",
    "TaskStatus",
    "as_task",
    "describe_task",
    "one_line_error",
    "resolve_target",
    "task_from_dict",
    "task_from_json",
    "task_to_dict",
    "task_to_json",
    "task_traceback",
]

TASK_FORMAT_VERSION = 1
_TARGET_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
JsonValue: TypeAlias = Any
TaskStatus = Literal["succeeded", "failed", "cancelled"]


def _check_json(what: str, value: object) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}") from None


@dataclass(frozen=True)
class SparkSQL:
    """One Spark SQL statement; ``args`` binds ``:name`` (dict) or ``?`` (list) parameters.

    Its ``value`` when it succeeds: ``None`` for a command (DDL, INSERT, CACHE...) whose result
    has no columns; otherwise ``{"rows": n}`` plus ``"data"`` (the rows as lists) when ``n <= 10``.
    """

    sql: str
    args: Mapping[str, JsonValue] | Sequence[JsonValue] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip():
            raise TypeError("SparkSQL needs a non-empty SQL string")
        if self.args is not None:
            if isinstance(self.args, str) or not isinstance(self.args, Mapping | Sequence):
                raise TypeError("SparkSQL args must be a dict (:name) or a list (?) of values")
            _check_json("SparkSQL args", dict(self.args) if isinstance(self.args, Mapping)
                        else list(self.args))

    def __hash__(self) -> int:
        return hash((self.sql, json.dumps(self.args, sort_keys=True)))


@dataclass(frozen=True, init=False)
class PythonTask:
    """``PythonTask("pkg.module:function", **kwargs)`` runs ``function(spark, **kwargs)``.

    ``spark`` is a lazy SparkSession: the session (and the JVM) is created only when the
    function first uses it. The return value becomes the task's ``value`` when it is
    JSON-serialisable and at most 64 KiB encoded; otherwise the value is ``None``.
    """

    target: str
    kwargs: Mapping[str, JsonValue] = field(default_factory=dict)

    def __init__(self, target: str, /, **kwargs: JsonValue) -> None:
        if not isinstance(target, str) or not _TARGET_RE.match(target):
            raise ValueError(f"PythonTask target must look like 'package.module:function', "
                             f"got {target!r}")
        _check_json("PythonTask kwargs", kwargs)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "kwargs", dict(kwargs))

    def __hash__(self) -> int:
        return hash((self.target, json.dumps(self.kwargs, sort_keys=True)))


Task: TypeAlias = SparkSQL | PythonTask


def as_task(task: Task | str) -> Task:
    """Normalise what a caller passes to ``exec_async``: a ``str`` is ``SparkSQL(str)``."""
    if isinstance(task, str):
        return SparkSQL(task)
    if isinstance(task, SparkSQL | PythonTask):
        return task
    raise TypeError(f"a task is a SparkSQL, a PythonTask or a SQL string, not {type(task)!r}")


def task_to_dict(task: Task | str) -> dict[str, JsonValue]:
    """The JSON object form of a task: ``{"v": 1, "type": "sql"|"python", ...}``."""
    task = as_task(task)
    if isinstance(task, SparkSQL):
        out: dict[str, JsonValue] = {"v": TASK_FORMAT_VERSION, "type": "sql", "sql": task.sql}
        if task.args is not None:
            out["args"] = (dict(task.args) if isinstance(task.args, Mapping)
                           else list(task.args))
        return out
    return {"v": TASK_FORMAT_VERSION, "type": "python", "target": task.target,
            "kwargs": dict(task.kwargs)}


def task_from_dict(data: Mapping[str, JsonValue]) -> Task:
    """Inverse of ``task_to_dict``; raises ``ValueError`` on anything else."""
    if not isinstance(data, Mapping):
        raise ValueError("a task body must be a JSON object")
    version = data.get("v", TASK_FORMAT_VERSION)
    if version != TASK_FORMAT_VERSION:
        raise ValueError(f"unsupported task format version {version!r}")
    kind = data.get("type")
    try:
        if kind == "sql":
            return SparkSQL(data["sql"], data.get("args"))
        if kind == "python":
            kwargs = data.get("kwargs") or {}
            if not isinstance(kwargs, Mapping):
                raise ValueError("python task kwargs must be an object")
            return PythonTask(data["target"], **kwargs)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed {kind} task: {exc}") from None
    raise ValueError(f"unknown task type {kind!r}")


def task_to_json(task: Task | str) -> str:
    """Serialise a task as a compact JSON message body."""
    return json.dumps(task_to_dict(task), separators=(",", ":"), allow_nan=False)


def task_from_json(body: str | bytes) -> Task:
    """Parse a message body written by ``task_to_json``."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"task body is not JSON: {exc}") from None
    return task_from_dict(data)


def describe_task(task: Task | str, width: int = 80) -> str:
    """A short human label: the SQL's first line or the Python target."""
    task = as_task(task)
    text = task.target if isinstance(task, PythonTask) else " ".join(task.sql.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def resolve_target(target: str) -> Callable[..., Any]:
    """Import ``"pkg.module:function"`` (dots after the colon walk attributes)."""
    module_name, _, attr_path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"module {module_name!r} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    return obj  # type: ignore[no-any-return]


def one_line_error(exc: BaseException, limit: int = 500) -> str:
    """``Type: first line of the message``, capped at ``limit`` characters.

    Spark errors carry a multi-line context (SQLSTATE, query fragment, JVM stack); the first
    line names the error class and says what went wrong, which is what a status line needs.
    """
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    name = type(exc).__name__
    line = f"{name}: {first}" if first else name
    return line if len(line) <= limit else line[: limit - 1] + "…"


def task_traceback(exc: BaseException) -> str:
    """The traceback of a task's exception from the task's own code on: the runner frame
    that called it (always the first) is left out."""
    tb = exc.__traceback__
    return "".join(traceback.format_exception(type(exc), exc, tb.tb_next if tb else None))


class TaskError(BrokerError):
    """A task failed inside a runner; ``error`` is one line, ``spark_job_ids`` its jobs
    (``operation_ids`` its operations under Spark Connect)."""

    def __init__(self, log_id: int, error: str, spark_job_ids: Sequence[int] = (),
                 details: str | None = None, operation_ids: Sequence[str] = ()) -> None:
        super().__init__(error)
        self.log_id = log_id
        self.error = error
        self.spark_job_ids = list(spark_job_ids)
        self.operation_ids = list(operation_ids)
        self.details = details


class TaskCancelled(TaskError):
    """The task was cancelled (before it started, or its Spark jobs were cancelled)."""


@dataclass(frozen=True)
class TaskResult:
    """What ``synchronize`` / ``wait_all`` return for one finished task."""

    log_id: int
    status: TaskStatus
    error: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    value: JsonValue = None
    error_details: str | None = None  # a failed task's traceback, when there is one

    @property
    def ok(self) -> bool:
        """True when the task succeeded."""
        return self.status == "succeeded"

    @property
    def seconds(self) -> float | None:
        """Run time in seconds when both ends are known."""
        if self.start_time is None or self.end_time is None:
            return None
        return (self.end_time - self.start_time).total_seconds()


class TaskFailed(BrokerError):
    """``wait_all`` saw a task that did not succeed; ``results`` holds every result."""

    def __init__(self, results: Sequence[TaskResult]) -> None:
        self.results = list(results)
        self.failed = [r for r in self.results if not r.ok]
        lines = [f"log {r.log_id} {r.status}: {r.error or ''}".rstrip() for r in self.failed]
        super().__init__(f"{len(self.failed)} of {len(self.results)} tasks did not succeed; "
                         + "; ".join(lines[:5]) + ("; …" if len(lines) > 5 else ""))
