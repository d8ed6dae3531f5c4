"""RunState's index (docs/design.md, "Pipeline runs and their drivers"): what the runner asks
at each wake-up answered as a pass over every task would answer it, whatever changes the
tasks' statuses and open attempts, in whatever order, and when tasks are added."""

from __future__ import annotations

import random

from sbroker.apps.pipeline.model import Options, Pipeline, TaskSpec, TaskStatus
from sbroker.apps.pipeline.runstate import RunState, TaskState
from sbroker.apps.spark import PythonTask

NOOP = PythonTask("bench.tasks:noop")
ENDED = {s for s in TaskStatus if s.ended}
NOT_SUCCEEDED = {TaskStatus.FAILED, TaskStatus.SKIPPED, TaskStatus.CANCELLED}


def _state(specs: list[TaskSpec]) -> RunState:
    pipeline = Pipeline("p", (), Options(), tasks=tuple(specs))
    return RunState(1, pipeline, "h", {s.name: TaskState(s) for s in specs})


def _dag(rng: random.Random, n: int) -> list[TaskSpec]:
    specs: list[TaskSpec] = []
    for i in range(n):
        after = tuple(sorted({s.name for s in rng.sample(specs, min(len(specs), 3))}))
        specs.append(TaskSpec(f"t{i}", NOOP, after=after if rng.random() < 0.8 else (),
                              map="t0" if i and rng.random() < 0.1 else None))
    return specs


def _expected_ready(state: RunState, now: float) -> list[str]:
    ok = {n for n, t in state.tasks.items() if t.status == TaskStatus.SUCCEEDED}
    return [t.name for t in state.tasks.values()
            if (t.status == TaskStatus.PENDING and t.spec.map is None
                and ok.issuperset(t.spec.after))
            or (t.status == TaskStatus.RETRYING and (t.next_attempt or 0.0) <= now)]


def _check(state: RunState, now: float) -> None:
    tasks = list(state.tasks.values())
    assert [t.name for t in state.ready(now)] == _expected_ready(state, now)
    assert state.done == all(t.status in ENDED and t.log_id is None for t in tasks)
    assert state.running() == sum(t.log_id is not None for t in tasks)
    assert {t.name for t in state.open_attempts()} == {
        t.name for t in tasks if t.log_id is not None}
    assert {t.name for t in state.retrying()} == {
        t.name for t in tasks if t.status == TaskStatus.RETRYING}
    for t in tasks:
        if t.log_id is not None:
            assert state.attempt(t.log_id) is t


def _change(rng: random.Random, state: RunState, log_ids: list[int]) -> None:
    task = rng.choice(list(state.tasks.values()))
    if rng.random() < 0.3:
        log_ids.append(log_ids[-1] + 1)
        task.log_id = None if task.log_id is not None else log_ids[-1]
    else:
        task.status = rng.choice(list(TaskStatus))
        task.next_attempt = rng.choice([None, 5.0, 20.0])


def test_index_answers_as_a_pass_over_every_task() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        state = _state(_dag(rng, 30))
        log_ids = [0]
        _check(state, 10.0)
        for step in range(300):
            _change(rng, state, log_ids)
            if step % 100 == 50:  # tasks added after the index was built
                name = f"t0[{step}]"
                state.tasks[name] = TaskState(TaskSpec(name, NOOP, after=("t1",)))
            _check(state, 10.0)


def test_skip_after_failures_marks_every_pending_task_after_one_in_file_order() -> None:
    specs = [TaskSpec("a", NOOP), TaskSpec("b", NOOP, after=("a",)),
             TaskSpec("c", NOOP), TaskSpec("d", NOOP, after=("b", "c")),
             TaskSpec("e", NOOP, after=("c",)), TaskSpec("f", NOOP, after=("a",))]
    state = _state(specs)
    assert state.ready(0.0) == [state.tasks["a"], state.tasks["c"]]
    state.tasks["c"].status = TaskStatus.SUCCEEDED
    state.tasks["f"].status = TaskStatus.RUNNING
    state.tasks["a"].status = TaskStatus.FAILED
    marked = state.skip_after_failures("end")
    assert [t.name for t in marked] == ["b", "d"]  # e comes after c, which succeeded
    assert all(t.status == TaskStatus.SKIPPED for t in marked)
    assert state.tasks["f"].status == TaskStatus.RUNNING
    assert not state.skip_after_failures("end")
