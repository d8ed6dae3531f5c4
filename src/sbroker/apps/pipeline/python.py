"""Pipelines written in Python (docs/pipelines.md): ``sbroker.Pipeline``, ``@pipe.task`` and
the schedules ``Every`` and ``Cron``, built into the model a TOML file gives
(``model.Pipeline``), so that the one durable runner runs both.

Each task becomes a ``PythonTask`` of ``CALL_TARGET`` naming the pipeline's source (how any
process finds it again: ``"FILE.py:ATTR"``, ``"module:attr"``, or this process's own) and
the task, with the values of the pipeline parameters it takes; the runner adds the values of
the tasks before it when it sends an attempt. Definition errors are one line naming the
function's file and line; those that need the whole graph (an unknown name, a cycle, a
parameter nothing gives) come when the pipeline is built, the others at once.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import json
import marshal
import sys
import textwrap
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, overload

from sbroker.apps.pipeline import model
from sbroker.apps.pipeline.intervals import scheduled_for_of
from sbroker.apps.pipeline.model import CALL_TARGET, PIPELINE_KEY, TASK_KEY
from sbroker.apps.pipeline.parser import PipelineError, coerce_param
from sbroker.apps.pipeline.rules import (
    ITEM,
    RESERVED,
    RUN_CONTEXT,
    SPARK,
    Error,
    ancestors,
    check_cron,
    classify_params,
    cycle_of,
    parse_duration,
    parse_retry,
    parse_schedule,
    parse_timeout,
)
from sbroker.apps.scheduler import schema
from sbroker.apps.spark.config import SparkConfig
from sbroker.apps.spark.tasks import PythonTask
from sbroker.engine.api import BrokerAPI

if TYPE_CHECKING:
    from sbroker.apps.pipeline.listeners import RunListener
    from sbroker.apps.pipeline.runstate import RunState

__all__ = ["Cron", "Every", "Pipeline", "PipelineTask", "code_digest", "registered"]

P = ParamSpec("P")
R = TypeVar("R")
TaskRef: TypeAlias = "PipelineTask[Any, Any] | str"
# the pipelines this process built, by source: the executor's calls find them here first
_BUILT: weakref.WeakValueDictionary[str, Pipeline] = weakref.WeakValueDictionary()


def registered(source: str) -> Pipeline | None:
    """The pipeline this process built with ``source``, if it still exists."""
    return _BUILT.get(source)


def _caller() -> tuple[str | None, int | None]:
    """File and line of the code that called into this package (the user's)."""
    frame = _user_frame()
    return frame.f_code.co_filename, frame.f_lineno


def _user_frame() -> FrameType:
    frame = sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith(
            "sbroker."):
        frame = frame.f_back
    return frame


class _ErrorAt(Protocol):
    def __call__(self, message: str, key: str | None = None) -> PipelineError: ...


def _error_at(path: str | None, line: int | None) -> _ErrorAt:
    def error(message: str, key: str | None = None) -> PipelineError:
        return PipelineError(message, path=path, line=line)

    return error


@dataclass(frozen=True)
class Every:
    """A schedule: a run every ``every`` ("15m", "2h", or seconds)."""

    every: str | float
    _: KW_ONLY
    catchup: bool = False
    overlap: str = "skip"

    def __post_init__(self) -> None:
        _ = self.schedule  # a bad duration is an error where the schedule is written

    @property
    def schedule(self) -> model.Schedule:
        """The same ``Schedule`` as ``[schedule] every = ...`` in a TOML file."""
        return parse_schedule({"every": self.every, "catchup": self.catchup,
                               "overlap": self.overlap}, _error_at(*_caller()))


@dataclass(frozen=True)
class Cron:
    """A schedule: a run at each time of a five-field cron expression in ``timezone``."""

    cron: str
    _: KW_ONLY
    timezone: str = "UTC"
    catchup: bool = False
    overlap: str = "skip"

    def __post_init__(self) -> None:
        check_cron(self.cron, _error_at(*_caller()))
        _ = self.schedule

    @property
    def schedule(self) -> model.Schedule:
        """The same ``Schedule`` as ``[schedule] cron = ...`` in a TOML file."""
        return parse_schedule({"cron": self.cron, "timezone": self.timezone,
                               "catchup": self.catchup, "overlap": self.overlap},
                              _error_at(*_caller()))


def code_digest(function: Callable[..., Any]) -> str:
    """What "changed" means for a task function on a resume: its own source text from its
    ``def`` to its end (the decorator and what is above it left out; comments inside it
    count), or its compiled code when Python has no source for it."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
        node = ast.parse(source).body[0]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            source = "\n".join(source.splitlines()[node.lineno - 1:node.end_lineno])
        text = source.encode("utf-8")
    except (OSError, TypeError, SyntaxError, IndexError):
        text = marshal.dumps(function.__code__)
    return hashlib.sha256(text).hexdigest()[:32]


class PipelineTask(Generic[P, R]):
    """A function registered with ``@pipe.task``; calling it calls the function."""

    def __init__(self, pipeline: Pipeline, function: Callable[P, R], name: str,
                 after: tuple[TaskRef, ...], map_: TaskRef | None, retry: model.Retry,
                 timeout: float | None) -> None:
        functools.update_wrapper(self, function)
        self.pipeline = pipeline
        self.function = function
        self.name = name
        self.after = after
        self.map = map_
        self.retry = retry
        self.timeout = timeout
        code = function.__code__
        self.file: str = code.co_filename
        self.line: int = code.co_firstlineno
        self.params: tuple[tuple[str, bool], ...] = tuple(
            (p.name, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values())
        self.defaults: dict[str, Any] = {
            p.name: p.default for p in inspect.signature(function).parameters.values()
            if p.default is not inspect.Parameter.empty}

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<task {self.name!r} of pipeline {self.pipeline.name!r}>"

    @property
    def takes_spark(self) -> bool:
        """True when the function has a ``spark`` parameter (the session is passed to it)."""
        return any(name == SPARK for name, _ in self.params)

    def error(self, message: str, key: str | None = None) -> PipelineError:
        """A one-line error at this task's function."""
        return PipelineError(message, path=self.file, line=self.line)


class Pipeline:
    """A pipeline written in Python: tasks are functions registered with ``@pipe.task``.

    ``Pipeline(name, concurrency=4, retries=0, retry_delay="10s", retry_backoff=2.0,
    retry_max_delay="10m", timeout=None, lease="30s", schedule=None)``; ``spark`` (a
    ``SparkConfig``) and ``description`` are as in a TOML file's ``[options]`` and
    ``[pipeline]``. Durations are "250ms", "10s", "5m", "2h" or seconds."""

    def __init__(self, name: str, *, concurrency: int | None = 4, retries: int = 0,
                 retry_delay: str | float = "10s", retry_backoff: float = 2.0,
                 retry_max_delay: str | float = "10m", timeout: str | float | None = None,
                 lease: str | float = "30s", schedule: Every | Cron | None = None,
                 spark: SparkConfig | None = None, description: str = "") -> None:
        frame = _user_frame()
        self.file, self.line = frame.f_code.co_filename, frame.f_lineno
        self.module: str | None = frame.f_globals.get("__name__")  # where to find it again
        error = _error_at(self.file, self.line)
        if not isinstance(name, str) or not name.strip():
            raise error(f"a pipeline's name must be a non-empty string, got {name!r}")
        if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
            raise error(f"'concurrency' must be a positive integer, got {concurrency!r}")
        lease_seconds = parse_duration(lease)
        if lease_seconds is None or lease_seconds <= 0:
            raise error(f"'lease' must be a duration such as \"30s\", got {lease!r}")
        if schedule is not None and not isinstance(schedule, Every | Cron):
            raise error("'schedule' must be sbroker.Every(...) or sbroker.Cron(...), got "
                        f"{schedule!r}")
        if spark is not None and not isinstance(spark, SparkConfig):
            raise error(f"'spark' must be a sbroker.SparkConfig, got {spark!r}")
        self.name = name
        self.lease = lease_seconds
        self.schedule = schedule
        self.description = description
        raw = {"retries": retries, "retry_delay": retry_delay, "retry_backoff": retry_backoff,
               "retry_max_delay": retry_max_delay}
        if timeout is not None:
            raw["timeout"] = timeout
        self.options = model.Options(concurrency, spark or SparkConfig(),
                                     parse_retry(raw, model.Retry(), error),
                                     parse_timeout(raw, None, error), lease_seconds)
        self._tasks: dict[str, PipelineTask[Any, Any]] = {}
        self.source: str | None = None  # set by whoever loads it by name: loading.py

    def __repr__(self) -> str:
        return f"<sbroker.Pipeline {self.name!r}: {len(self._tasks)} tasks>"

    @property
    def tasks(self) -> Mapping[str, PipelineTask[Any, Any]]:
        """The registered tasks by name, in the order they were registered."""
        return dict(self._tasks)

    @overload
    def task(self, name: Callable[P, R], /) -> PipelineTask[P, R]: ...

    @overload
    def task(self, name: str | None = None, *, after: TaskRef | Iterable[TaskRef] = (),
             map: TaskRef | None = None, retries: int | None = None,
             retry_delay: str | float | None = None, timeout: str | float | None = None
             ) -> Callable[[Callable[P, R]], PipelineTask[P, R]]: ...

    def task(self, name: str | None | Callable[P, R] = None, *,
             after: TaskRef | Iterable[TaskRef] = (), map: TaskRef | None = None,
             retries: int | None = None, retry_delay: str | float | None = None,
             timeout: str | float | None = None
             ) -> PipelineTask[P, R] | Callable[[Callable[P, R]], PipelineTask[P, R]]:
        """Register ``f(spark, ...)`` as a task (``name`` defaults to the function's).

        A parameter named after a task it comes after receives that task's value; ``map=t``
        runs it once per item of t's value (a list) with the item as ``item``; a parameter
        with a default is a pipeline parameter. ``retries``, ``retry_delay`` and ``timeout``
        override the pipeline's."""
        if callable(name):  # a bare @pipe.task
            return self.task()(name)

        def register(function: Callable[P, R]) -> PipelineTask[P, R]:
            return self._register(function, name, after, map, retries, retry_delay, timeout)

        return register

    def _register(self, function: Callable[P, R], name: str | None,
                  after: TaskRef | Iterable[TaskRef], map_: TaskRef | None,
                  retries: int | None, retry_delay: str | float | None,
                  timeout: str | float | None) -> PipelineTask[P, R]:
        plain: object = function
        if not inspect.isfunction(plain):
            file, line = _caller()
            raise PipelineError(f"a task is a function (def), not {function!r}", path=file,
                                line=line)
        code = plain.__code__
        error = _error_at(code.co_filename, code.co_firstlineno)
        name = plain.__name__ if name is None else name
        _check_function(function, name, error)
        if name in self._tasks:
            first = self._tasks[name]
            raise error(f"duplicate task name {name!r} (also {first.file}:{first.line})")
        refs = (after,) if isinstance(after, str | PipelineTask) else tuple(after)
        for ref in (*refs, *(() if map_ is None else (map_,))):
            if isinstance(ref, PipelineTask) and ref.pipeline is not self:
                raise error(f"task {name!r} refers to {ref!r}, a task of another pipeline")
            if not isinstance(ref, str | PipelineTask):
                raise error(f"task {name!r}: 'after' and 'map' take tasks or task names, "
                            f"not {ref!r}")
        raw: dict[str, Any] = {k: v for k, v in (("retries", retries),
                                                 ("retry_delay", retry_delay),
                                                 ("timeout", timeout)) if v is not None}
        retry = parse_retry(raw, self.options.retry, _prefixed(error, name))
        limit = parse_timeout(raw, self.options.timeout, _prefixed(error, name))
        task = PipelineTask(self, function, name, refs, map_, retry, limit)
        self._tasks[name] = task
        return task

    # -- running -----------------------------------------------------------------------------
    def run(self, broker: BrokerAPI, params: Mapping[str, Any] | None = None, *,
            listener: RunListener | None = None) -> RunState:
        """Run the pipeline as a new durable run on ``broker`` until it ends; its state
        (``.status``, ``.run_id``, ``.tasks[name].value``). ``params`` set pipeline
        parameters by name. The executor is installed when the database has none, and a
        broker not started is started for the run."""
        from sbroker.apps.pipeline.runner import start_run

        model = self.definition(params)
        with _executing(broker, model):
            return start_run(broker, model, listener=listener)

    def resume(self, broker: BrokerAPI, run_id: int | None = None, *,
               params: Mapping[str, Any] | None = None,
               listener: RunListener | None = None) -> RunState:
        """Resume run ``run_id`` (by default the newest run of this pipeline that did not
        succeed) until it ends: succeeded tasks are kept unless they changed. Its parameters
        are those the run was started with, unless ``params`` sets them."""
        from sbroker.apps.pipeline.runner import resume_run
        from sbroker.apps.pipeline.runs import run_params
        from sbroker.apps.pipeline.store import RunStore

        if run_id is None:
            run_id = RunStore(broker).latest_unfinished(self.name)
            if run_id is None:
                raise PipelineError(f"no run of pipeline {self.name!r} to resume",
                                    path=self.file, line=self.line)
        known = set(self.definition().params)  # a parameter since removed: gone
        recorded = {k: v for k, v in run_params(broker, run_id).items() if k in known}
        model = self.definition({**recorded, **(params or {})})
        with _executing(broker, model):
            return resume_run(broker, model, run_id, listener=listener)

    # -- building the model ------------------------------------------------------------------
    def definition(self, params: Mapping[str, Any] | None = None, *,
                   text: bool = False) -> model.Pipeline:
        """The pipeline as the runner takes it, its parameters set from ``params`` over the
        functions' defaults (``text``: values given as text, ``-p NAME=VALUE``, take the
        type of the default). Every definition error is one line naming where it is."""
        if not self._tasks:
            raise _error_at(self.file, self.line)(
                f"pipeline {self.name!r} has no tasks (register functions with @pipe.task())")
        skeleton = self._graph()
        before = ancestors(skeleton)
        inputs, own, defaults = self._params(skeleton, before)
        values, scheduled_for = self._set_params(defaults, params or {}, text)
        source = self._source()
        specs = tuple(self._spec(spec, inputs[spec.name], own[spec.name], values, source)
                      for spec in skeleton)
        schedule = self.schedule.schedule if self.schedule is not None else None
        return model.Pipeline(self.name, (), self.options, self.description, values,
                              Path(self.file) if self.file else None, specs, schedule,
                              scheduled_for=scheduled_for, source=source)

    def _graph(self) -> tuple[model.TaskSpec, ...]:
        """The tasks with their ``after`` as names (``map`` included): unknown names and
        cycles are errors."""
        out = []
        for task in self._tasks.values():
            names = []
            for ref in (*((task.map,) if task.map is not None else ()), *task.after):
                ref_name = ref.name if isinstance(ref, PipelineTask) else ref
                if ref_name not in self._tasks:
                    raise task.error(f"task {task.name!r} comes after {ref_name!r}, which is "
                                     f"not a task of pipeline {self.name!r}")
                if ref_name == task.name:
                    raise task.error(f"task {task.name!r} cannot come after itself")
                names.append(ref_name)
            mapped = task.map.name if isinstance(task.map, PipelineTask) else task.map
            out.append(model.TaskSpec(task.name, PythonTask(CALL_TARGET), task.line,
                                      tuple(dict.fromkeys(names)), task.retry, task.timeout,
                                      mapped))
        cycle = cycle_of(out)
        if cycle is not None:
            raise self._tasks[cycle[0]].error("the tasks' 'after' make a cycle: "
                                              + " -> ".join(cycle))
        return tuple(out)

    def _params(self, skeleton: tuple[model.TaskSpec, ...], before: dict[str, set[str]]
                ) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]],
                           dict[str, Any]]:
        """Each task's inputs and pipeline parameters, and the parameters' defaults."""
        inputs: dict[str, tuple[str, ...]] = {}
        own: dict[str, tuple[str, ...]] = {}
        defaults: dict[str, Any] = {}
        owner: dict[str, PipelineTask[Any, Any]] = {}
        for spec in skeleton:
            task = self._tasks[spec.name]
            got, mine, problem = classify_params(task.name, task.params,
                                                 mapped=spec.map is not None,
                                                 before=before[spec.name],
                                                 tasks=self._tasks.keys())
            if problem is not None:
                raise task.error(problem)
            for param in mine:
                default = task.defaults[param]
                _check_json_default(task, param, default)
                first = owner.setdefault(param, task)
                if first is not task and _json(defaults[param]) != _json(default):
                    raise task.error(
                        f"parameter {param!r} has the default {default!r} here and "
                        f"{defaults[param]!r} in task {first.name!r} ({first.file}:"
                        f"{first.line}): give it one default")
                defaults[param] = default
            inputs[spec.name], own[spec.name] = got, mine
        return inputs, own, defaults

    def _set_params(self, defaults: dict[str, Any], given: Mapping[str, Any],
                    text: bool) -> tuple[dict[str, Any], str | None]:
        """The parameters' values, and the time the run is for (``scheduled_for``, in the
        schedule's timezone) when ``given`` sets it."""
        values = dict(defaults)
        error = _error_at(self.file, self.line)
        if RUN_CONTEXT[1] in given:
            raise error("give scheduled_for=DATE_OR_TIME: scheduled_date is its date")
        scheduled_for = None
        if given.get(RUN_CONTEXT[0]) is not None:
            zone = self.schedule.schedule.timezone if self.schedule is not None else "UTC"
            try:
                scheduled_for = scheduled_for_of(str(given[RUN_CONTEXT[0]]), zone)
            except ValueError as exc:
                raise error(f"scheduled_for: {exc}") from None
        for key, value in given.items():
            if key in RUN_CONTEXT:
                continue
            if key not in defaults:
                known = ", ".join(sorted(defaults)) or "none"
                raise PipelineError(f"unknown parameter {key!r} (pipeline {self.name!r} has: "
                                    f"{known})", path=self.file, line=self.line)
            if text:
                value = coerce_param(key, str(value), defaults.get(key), self.file)
            elif _json(value) is None:
                raise PipelineError(f"parameter {key!r} must be a JSON value, got "
                                    f"{type(value).__name__}", path=self.file, line=self.line)
            values[key] = value
        return values, scheduled_for

    def _spec(self, spec: model.TaskSpec, inputs: tuple[str, ...], own: tuple[str, ...],
              values: Mapping[str, Any], source: str) -> model.TaskSpec:
        task = self._tasks[spec.name]
        kwargs = {PIPELINE_KEY: source, TASK_KEY: task.name, **{p: values[p] for p in own}}
        return model.TaskSpec(spec.name, PythonTask(CALL_TARGET, **kwargs), spec.line,
                              spec.after, spec.retry, spec.timeout, spec.map, inputs,
                              code_digest(task.function))

    def _source(self) -> str:
        """How a process finds this pipeline again (see the module docstring); this process
        finds it by that name from now on."""
        if self.source is None:
            self.source = _found_in_module(self) or f"memory:{self.name}:{id(self):x}"
        _BUILT[self.source] = self
        return self.source


@contextlib.contextmanager
def _executing(broker: BrokerAPI, pipeline: model.Pipeline) -> Iterator[None]:
    """The executor installed (when the database has none) and the broker started for the
    run (when it is not), then stopped again."""
    if schema.TARGET_QUEUE not in broker.catalog.queues:
        schema.install(broker, max_queue_readers=max(pipeline.options.concurrency or 4, 4),
                       spark=pipeline.options.spark)
    started = not broker.started
    if started:
        broker.start()
    try:
        yield
    finally:
        if started:
            broker.stop()


def _found_in_module(pipe: Pipeline) -> str | None:
    """``module:attr`` (or ``FILE.py:attr`` for a script) of a pipeline that is a global of
    the module that created it, else None."""
    module = sys.modules.get(pipe.module or "")
    attr = next((k for k, v in vars(module).items() if v is pipe), None) if module else None
    if module is None or attr is None:
        return None
    if module.__name__ != "__main__":
        return f"{module.__name__}:{attr}"
    file = getattr(module, "__file__", None)
    return f"{Path(file).resolve()}:{attr}" if file else None


def _check_function(function: Callable[..., Any], name: object, error: _ErrorAt) -> None:
    if not isinstance(name, str) or not name.strip() or any(c in name for c in "[]/"):
        raise error(f"a task's name must be a non-empty string without '[', ']' or '/', "
                    f"got {name!r}")
    if name in RESERVED:
        meaning = ("the Spark session" if name == SPARK else "a mapped task's item"
                   if name == ITEM else "the run's scheduled time")
        raise error(f"a task cannot be named {name!r}: a parameter of that name is "
                    f"{meaning}")
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise error(f"task {name!r} is async: a task is a plain function (Spark's calls "
                    "block)")
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind == param.VAR_POSITIONAL else "**"
            raise error(f"task {name!r} takes {stars}{param.name}: name each parameter")
        if param.kind == param.POSITIONAL_ONLY and param.name != SPARK:
            raise error(f"task {name!r}: parameter {param.name!r} is positional-only; the "
                        "runner passes parameters by name")


def _prefixed(error: Error, name: str) -> Error:
    def prefixed(message: str, key: str | None) -> Exception:
        return error(f"task {name!r}: {message}", key)

    return prefixed


def _json(value: object) -> str | None:
    """``value`` as canonical JSON text, or None when it is not a JSON value."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _check_json_default(task: PipelineTask[Any, Any], param: str, default: object) -> None:
    if _json(default) is None:
        raise task.error(f"parameter {param!r} of task {task.name!r} is a pipeline parameter "
                         f"and its default must be a JSON value, not "
                         f"{type(default).__name__}")
