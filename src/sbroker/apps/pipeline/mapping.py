"""Mapped tasks in a run (docs/pipelines.md), as the runner holds them; no database here.

A mapped task (``spec.map`` set) never sends an attempt of its own. Once every task it comes
after has succeeded, it is *expanded*: one instance ``task[i]`` per item of the value it
maps over, each a task of the run like any other (retried, timed out and resumed on its own,
counted in ``concurrency``), placed after it; the mapped task is ``running`` while they
run. When they have all ended it ends: ``succeeded`` with the list of their values in order,
or ``failed``. A value that is not a list fails it at once; an empty list succeeds it.
On a resume a mapped task that does not run again is expanded anew from the value it maps
over, and each instance keeps its outcome when its definition (its item included) did not
change.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.pipeline.model import TaskSpec, TaskStatus
from sbroker.apps.pipeline.runstate import RunState, TaskState, task_from_row
from sbroker.apps.pipeline.store import RunStore
from sbroker.apps.pipeline.values import definition, expand, instance_name, mapped_of
from sbroker.engine.transaction import Transaction

__all__ = ["Expansion", "Stored", "expand_ready", "instance_spec", "instances_of", "is_mapped",
           "reconcile_instances", "record_expansion", "settle_mapped"]


def is_mapped(task: TaskState) -> bool:
    """True for a mapped task itself (not one of its instances)."""
    return task.spec.map is not None


@dataclass
class Expansion:
    """What expanding changed: instances to insert as rows, tasks whose row changed."""

    new: list[TaskState] = field(default_factory=list)
    changed: list[TaskState] = field(default_factory=list)


Stored = Mapping[str, tuple[TaskState, str]]  # recorded instances: state, definition


def expand_ready(state: RunState, end_time: str, stored: Stored | None = None) -> Expansion:
    """Expand every pending mapped task whose ``after`` all succeeded, until none is left
    (an empty list succeeds a mapped task at once, which may free another). ``stored``:
    on a resume, the instances recorded before, by name, with their definitions: one whose
    definition did not change keeps its outcome (or its open attempt)."""
    out = Expansion()
    mapped = [state.tasks[s.name] for s in state.pipeline.dag
              if s.map is not None and s.name in state.tasks]
    grew = True
    while grew:
        ready = [t for t in mapped if t.status == TaskStatus.PENDING and all(
            state.tasks[a].status == TaskStatus.SUCCEEDED for a in t.spec.after
            if a in state.tasks)]
        for task in ready:
            _expand_one(state, task, end_time, stored or {}, out)
        grew = bool(ready)
    return out


def _expand_one(state: RunState, task: TaskState, end_time: str, stored: Stored,
                out: Expansion) -> None:
    assert task.spec.map is not None
    specs = expand(task.spec, state.tasks[task.spec.map].value)
    out.changed.append(task)
    if isinstance(specs, str):  # not a list: the mapped task fails, its value unknown
        task.status, task.error, task.end_time = TaskStatus.FAILED, specs, end_time
        task.value = None
        return
    instances: list[TaskState] = []
    for spec in specs:
        old, old_definition = stored.get(spec.name, (None, None))
        if old is not None and old_definition == definition(spec):
            old.spec = spec
            old.kept = old.status == TaskStatus.SUCCEEDED
            if not old.kept and old.log_id is None:  # runs again, as any task of a resume
                old.status, old.failures, old.next_attempt = TaskStatus.PENDING, 0, None
                old.end_time, old.error, old.value = None, None, None
            instances.append(old)
            out.changed.append(old)
        else:
            instances.append(TaskState(spec))
            (out.new if old is None else out.changed).append(instances[-1])
    task.status, task.start_time = TaskStatus.RUNNING, task.start_time or end_time
    _place(state, task.name, instances)
    settle_mapped(state, end_time, only=task.name)


def _place(state: RunState, after: str, instances: list[TaskState]) -> None:
    """Put ``instances`` right after task ``after`` in the run's task order."""
    tasks: dict[str, TaskState] = {}
    for name, task in state.tasks.items():
        tasks[name] = task
        if name == after:
            tasks.update((i.name, i) for i in instances)
    state.tasks.clear()
    state.tasks.update(tasks)


def settle_mapped(state: RunState, end_time: str, only: str | None = None
                  ) -> list[TaskState]:
    """Every running mapped task whose instances have all ended, ended: ``succeeded``
    with their values in order, or ``failed`` naming the instances that did not succeed;
    the tasks ended."""
    out = []
    for spec in state.pipeline.dag:
        task = state.tasks.get(spec.name)
        if (task is None or spec.map is None or task.status != TaskStatus.RUNNING
                or only not in (None, task.name)):
            continue
        if not _all_ended(state, task.name):
            continue
        instances = instances_of(state, task.name)
        failed = [i for i in instances if i.status != TaskStatus.SUCCEEDED]
        if not failed:
            task.status, task.error = TaskStatus.SUCCEEDED, None
            task.value = [i.value for i in instances]
        else:
            first = failed[0]
            task.status, task.value = TaskStatus.FAILED, None
            task.error = (f"{len(failed)} of {len(instances)} instances did not succeed "
                          f"(first {first.name}: {first.error or first.status})")
        task.end_time = end_time
        out.append(task)
    return out


def _all_ended(state: RunState, name: str) -> bool:
    """Whether every instance of mapped task ``name`` ended, looking from the last one: the
    last start last, so one still going is found in a step or two, not a pass over all."""
    of = state.tasks[name].spec.map
    items = state.tasks[of].value if of is not None and of in state.tasks else None
    if not isinstance(items, list):
        return False
    for index in range(len(items) - 1, -1, -1):
        task = state.tasks.get(instance_name(name, index))
        if task is None or not task.status.ended or task.log_id is not None:
            return False
    return True


def instances_of(state: RunState, name: str) -> list[TaskState]:
    """The instances of mapped task ``name`` in the run, in item order (its expansion put
    them right after it)."""
    out: list[TaskState] = []
    for index in itertools.count():
        task = state.tasks.get(instance_name(name, index))
        if task is None:
            return out
        out.append(task)
    return out


def record_expansion(store: RunStore, tx: Transaction, state: RunState, done: Expansion,
                     ended: list[TaskState], stored: dict[str, tuple[TaskState, str]]) -> None:
    """Inside ``tx``: the rows of what ``expand_ready`` and ``settle_mapped`` changed; an
    instance shares its mapped task's position, after it by index."""
    positions = {spec.name: i for i, spec in enumerate(state.pipeline.dag)}

    def position(name: str) -> int:
        of = mapped_of(name)
        return positions[of[0] if of is not None and of[0] in positions else name]

    for task in done.new:
        store.insert_task(tx, state.run_id, task.spec, position(task.name))
    for task in [*done.changed, *ended]:
        if mapped_of(task.name) is not None and task.spec.map is None:
            store.redefine_task(tx, state.run_id, task.spec, position(task.name))
    for task in [*done.new, *done.changed, *ended]:
        store.set_task(tx, state.run_id, task)
    for name in [n for n in stored if n not in state.tasks]:
        store.delete_task(tx, state.run_id, name)  # the list shrank
        del stored[name]


def reconcile_instances(store: RunStore, tx: Transaction, state: RunState,
                        stored: dict[str, dict[str, Any]], open_: dict[str, dict[str, Any]],
                        rerun: set[str], to_cancel: list[int]
                        ) -> dict[str, tuple[TaskState, str]]:
    """Inside ``tx``: the rows left over from the file's tasks. A kept mapped task keeps
    its instances as they are; one that runs again from the same list of items gets
    its recorded instances back when it is expanded (returned, for ``expand_ready``); the
    rest goes."""
    specs = {s.name: s for s in state.pipeline.dag}
    out: dict[str, tuple[TaskState, str]] = {}
    kept: dict[str, list[TaskState]] = {}
    for name, row in stored.items():
        of, spec = mapped_of(name), instance_spec(specs, name)
        parent = state.tasks.get(of[0]) if of is not None else None
        attempt = open_.get(name)
        if spec is None or parent is None or parent.name in rerun:
            if attempt is not None:
                store.close_attempt(tx, int(attempt["log_id"]), "superseded")
                to_cancel.append(int(attempt["log_id"]))
            store.delete_task(tx, state.run_id, name)
            continue
        task = task_from_row(spec, row)
        if parent.kept:
            kept.setdefault(parent.name, []).append(task)
            continue
        if attempt is not None:
            task.status, task.log_id = TaskStatus.RUNNING, int(attempt["log_id"])
            task.deadline = attempt["deadline"]
        out[name] = (task, row["definition"])
    for mapped, instances in kept.items():  # after their task, in item order
        ordered = sorted(instances, key=lambda t: (mapped_of(t.name) or ("", 0))[1])
        tasks = list(state.tasks.items())
        at = next(i for i, (n, _) in enumerate(tasks) if n == mapped) + 1
        state.tasks.clear()
        state.tasks.update([*tasks[:at], *((t.name, t) for t in ordered), *tasks[at:]])
    return out


def instance_spec(specs: dict[str, TaskSpec], name: str) -> TaskSpec | None:
    """The spec of a recorded instance ``task[i]`` of a mapped task of ``specs`` (its item
    is known once it is expanded again), or None."""
    of = mapped_of(name)
    parent = specs.get(of[0]) if of is not None else None
    if parent is None or parent.map is None:
        return None
    return dataclasses.replace(parent, name=name, map=None)
