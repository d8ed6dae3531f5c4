"""Values between tasks and mapped tasks, as the runner uses them (docs/pipelines.md); pure.

- ``attempt_task``: the task an attempt sends, its ``inputs`` filled in: the values of the
  tasks before it, the run's ``scheduled_for`` / ``scheduled_date``.
- ``expand``: a mapped task's instances ``task[0]``, ``task[1]``, ... once the value of the
  task it maps over is known, each its own task (retried, timed out and resumed on its own)
  with its item bound; or the one-line error when that value is not a list.
- ``definition``: the digest a resume compares to decide that a task changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sbroker.apps.pipeline.model import CALL_TARGET, PIPELINE_KEY, TaskSpec
from sbroker.apps.pipeline.rules import ITEM, RUN_CONTEXT
from sbroker.apps.spark.tasks import PythonTask, SparkSQL, Task, task_to_dict

__all__ = ["attempt_task", "definition", "expand", "instance_name", "mapped_of"]

_INSTANCE = re.compile(r"^(.*)\[(\d+)\]$")


def instance_name(task: str, index: int) -> str:
    """The name of item ``index``'s instance of mapped task ``task``: ``task[index]``."""
    return f"{task}[{index}]"


def mapped_of(name: str) -> tuple[str, int] | None:
    """``("task", i)`` for an instance's name ``task[i]``, else None."""
    match = _INSTANCE.match(name)
    return (match.group(1), int(match.group(2))) if match else None


def expand(spec: TaskSpec, value: Any) -> tuple[TaskSpec, ...] | str:
    """The instances of mapped task ``spec`` over ``value`` (the value of ``spec.map``), in
    order, each with its item bound; or the error when ``value`` is not a list."""
    if not isinstance(value, list):
        kind = "null" if value is None else type(value).__name__
        return (f"task {spec.name!r} maps over {spec.map!r}, whose value is {kind}, not a "
                "list")
    inputs = tuple(i for i in spec.inputs if i != ITEM)
    return tuple(replace(spec, name=instance_name(spec.name, i), map=None, inputs=inputs,
                         task=_with(spec.task, {ITEM: item} if ITEM in spec.inputs
                                    or isinstance(spec.task, SparkSQL) else {}))
                 for i, item in enumerate(value))


def attempt_task(spec: TaskSpec, values: Mapping[str, Any],
                 context: Mapping[str, Any]) -> Task:
    """The task an attempt of ``spec`` sends: its ``inputs`` given from ``context`` (the
    run's ``scheduled_for`` / ``scheduled_date``) or ``values`` (each task's value)."""
    if not spec.inputs:
        return spec.task
    given = {name: context[name] if name in RUN_CONTEXT else values[name]
             for name in spec.inputs}
    return _with(spec.task, given)


def _with(task: Task, kwargs: Mapping[str, Any]) -> Task:
    if not kwargs:
        return task
    if isinstance(task, PythonTask):
        return PythonTask(task.target, **{**task.kwargs, **kwargs})
    if task.args is None or isinstance(task.args, Mapping):  # SQL binds :item
        return SparkSQL(task.sql, {**(task.args or {}), **kwargs})
    raise ValueError("a mapped SQL task's 'args' must be a table (it binds :item)")


def definition(spec: TaskSpec) -> str:
    """A digest of what the task runs: its SQL, or its function and arguments after
    parameter substitution (for a Python pipeline's task, its function's source: not where
    the pipeline file is), what it maps over and what it takes from the tasks before it.
    A resume runs a task again, and everything after it, when this changed."""
    body = task_to_dict(spec.task)
    if isinstance(spec.task, PythonTask) and spec.task.target == CALL_TARGET:
        body["kwargs"] = {k: v for k, v in body["kwargs"].items() if k != PIPELINE_KEY}
        body["code"] = spec.code
    if spec.map is not None:
        body["map"] = spec.map
    if spec.inputs:
        body["inputs"] = list(spec.inputs)
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
