"""Durable runs (docs/pipelines.md) on SQLite and PostgreSQL: dependencies, skips, retries with
backoff, timeouts, resume (kept tasks, changed tasks, a dead run's AsyncDone), and the
shapes ``list_runs`` / ``get_run`` return.  Tasks go to a StubRunner that runs the Python
functions of ``pipeline_task_helpers`` for real (no JVM)."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import started

import sbroker
from sbroker.apps.pipeline import (
    DurableRunner,
    Pipeline,
    PipelineError,
    get_run,
    list_runs,
    parse_pipeline,
    resume_run,
    run_attempts,
    start_run,
)
from sbroker.apps.spark import StubRunner


@pytest.fixture
def broker(database: str, stub: StubRunner) -> Iterator[sbroker.Broker]:
    b = started(database, stub)
    try:
        yield b
    finally:
        b.close()


def task(name: str, target: str, after: tuple[str, ...] = (), **options: object) -> str:
    """One ``[[task]]`` of a pipeline file."""
    lines = ["[[task]]", f'name = "{name}"', f'python = "pipeline_task_helpers:{target}"']
    if after:
        lines.append("after = [" + ", ".join(f'"{a}"' for a in after) + "]")
    args = options.pop("args", None)
    lines += [f"{k} = {_toml(v)}" for k, v in options.items()]
    if isinstance(args, dict):
        lines.append("args = {" + ", ".join(f"{k} = {_toml(v)}" for k, v in args.items()) + "}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def note(name: str, log: Path, after: tuple[str, ...] = (), value: int = 0) -> str:
    return task(name, "note", after, args={"path": str(log), "name": name, "value": value})


def pipeline(*tasks: str, name: str = "p") -> Pipeline:
    return parse_pipeline(f'[pipeline]\nname = "{name}"\n' + "".join(tasks))


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def attempts_of(broker: sbroker.Broker, run_id: int) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for a in run_attempts(broker, run_id):
        out.setdefault(str(a["task"]), []).append(a)
    return out


def test_a_task_starts_once_every_task_it_comes_after_succeeded(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    p = pipeline(note("a", log), note("b", log, ("a",)), note("c", log, ("a",)),
                 note("d", log, ("b", "c"), value=4), note("e", log))
    state = start_run(broker, p)
    assert state.status == "succeeded"
    assert sorted(log.read_text().split()) == ["a", "b", "c", "d", "e"]
    attempts = attempts_of(broker, state.run_id)
    for spec in p.dag:
        [mine] = attempts[spec.name]
        for dep in spec.after:
            [theirs] = attempts[dep]
            assert _time(str(mine["start_time"])) >= _time(str(theirs["end_time"]))
    run = get_run(broker, state.run_id)
    assert run is not None and run["status"] == "succeeded"
    assert {t["name"]: t["value"] for t in run["tasks"]}["d"] == 4


def test_a_task_failed_for_good_skips_the_tasks_after_it_and_the_others_run(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    p = pipeline(note("a", log), task("b", "boom", ("a",)), note("c", log, ("b",)),
                 note("d", log, ("c",)), note("e", log, ("a",)))
    state = start_run(broker, p)
    assert state.status == "failed"
    assert {n: t.status for n, t in state.tasks.items()} == {
        "a": "succeeded", "b": "failed", "c": "skipped", "d": "skipped", "e": "succeeded"}
    assert sorted(log.read_text().split()) == ["a", "e"]
    run = get_run(broker, state.run_id)
    assert run is not None and run["status"] == "failed"
    assert [t["error"] for t in run["tasks"] if t["name"] == "b"] == ["RuntimeError: boom"]


def test_retries_wait_with_backoff_and_each_attempt_is_an_execution_log_row(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    p = pipeline(task("f", "flaky", retries=2, retry_delay="50ms", retry_backoff=2,
                      args={"path": str(counter), "fails": 2}))
    state = start_run(broker, p)
    assert state.status == "succeeded" and state.tasks["f"].attempts == 3
    rows = attempts_of(broker, state.run_id)["f"]
    assert [r["status"] for r in rows] == ["failed", "failed", "succeeded"]
    assert [r["attempt"] for r in rows] == [1, 2, 3]
    gaps = [(_time(str(b["start_time"])) - _time(str(a["end_time"]))).total_seconds()
            for a, b in itertools.pairwise(rows)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # the delays are minimums: 50 ms, then 100
    logged = {r["LogID"]: r["Status"] for r in broker.view("ExecutionLog")}
    assert [logged[r["log_id"]] for r in rows] == ["failed", "failed", "succeeded"]


def test_retries_run_out_and_the_task_fails(broker: sbroker.Broker, tmp_path: Path) -> None:
    p = pipeline(task("f", "flaky", retries=1, retry_delay="10ms",
                      args={"path": str(tmp_path / "calls"), "fails": 5}))
    state = start_run(broker, p)
    assert state.status == "failed"
    assert (state.tasks["f"].status, state.tasks["f"].attempts) == ("failed", 2)
    assert state.tasks["f"].error == "RuntimeError: transient failure 2"


def test_a_timed_out_attempt_is_cancelled_and_counts_as_failed(
        broker: sbroker.Broker, stub: StubRunner) -> None:
    stub.on("pipeline_task_helpers:add", gate=threading.Event())  # never opens
    p = pipeline(task("slow", "add", timeout="100ms", retries=1, retry_delay="10ms",
                      args={"a": 1, "b": 2}))
    state = start_run(broker, p)
    assert state.status == "failed"
    assert state.tasks["slow"].attempts == 2
    assert state.tasks["slow"].error == "timed out after 0.1 s"
    rows = attempts_of(broker, state.run_id)["slow"]
    assert [r["status"] for r in rows] == ["failed", "failed"]  # recorded at the deadline
    end = time.monotonic() + 30  # and the executor was asked to stop each: it did
    while sorted((r["Status"], r["Error"]) for r in broker.view("ExecutionLog")) != [
            ("failed", "timed out after 0.1 s")] * 2:
        assert time.monotonic() < end, broker.view("ExecutionLog")
        threading.Event().wait(0.01)


def test_resume_keeps_succeeded_tasks_and_runs_the_others(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    log, counter = tmp_path / "ran.txt", tmp_path / "calls"
    p = pipeline(note("a", log, value=7), task("b", "flaky", ("a",),
                                               args={"path": str(counter), "fails": 1}),
                 note("c", log, ("b",)))
    first = start_run(broker, p)
    assert {n: t.status for n, t in first.tasks.items()} == {
        "a": "succeeded", "b": "failed", "c": "skipped"}
    again = resume_run(broker, p)
    assert again.run_id == first.run_id and again.status == "succeeded"
    assert log.read_text().split() == ["a", "c"]  # a was not run again
    assert again.tasks["a"].kept and again.tasks["a"].value == 7
    assert [len(v) for v in attempts_of(broker, first.run_id).values()] == [1, 2, 1]
    done = resume_run(broker, p, first.run_id)  # a succeeded run: nothing runs
    assert done.status == "succeeded" and log.read_text().split() == ["a", "c"]
    with pytest.raises(PipelineError, match="no run of pipeline 'p' to resume"):
        resume_run(broker, p)
    with pytest.raises(PipelineError, match="there is no run 99 to resume"):
        resume_run(broker, p, 99)
    with pytest.raises(PipelineError, match="is a run of pipeline 'p', not of 'other'"):
        resume_run(broker, pipeline(note("a", log), name="other"), first.run_id)


def test_a_changed_task_runs_again_with_everything_after_it(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    first = start_run(broker, pipeline(note("a", log), note("b", log, ("a",)),
                                       note("x", log), task("c", "boom", ("b",))))
    assert first.status == "failed"
    changed = pipeline(note("a", log, value=1), note("b", log, ("a",)), note("x", log),
                       note("c", log, ("b",)))
    state = resume_run(broker, changed, first.run_id)
    assert state.status == "succeeded"
    ran = log.read_text().split()
    assert {n: ran.count(n) for n in "abxc"} == {"a": 2, "b": 2, "x": 1, "c": 1}
    assert not state.tasks["a"].kept and not state.tasks["b"].kept and state.tasks["x"].kept


def test_the_resume_takes_the_async_done_a_dead_run_left(
        broker: sbroker.Broker, stub: StubRunner, tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    p = pipeline(note("a", log), note("b", log), note("c", log, ("a", "b")))
    dead = DurableRunner(broker, p)
    state = dead.create()
    dead._start_ready(state)  # a and b sent; this "process" dies before taking their results
    dead.hand_back(state)  # (its lease ends, as a dead driver's does)
    end = time.monotonic() + 30
    while len(broker.peek("QueueAsyncInitiator")) < 2:
        assert time.monotonic() < end, "the executor never answered"
        threading.Event().wait(0.01)
    resumed = resume_run(broker, p, state.run_id)
    assert resumed.status == "succeeded"
    assert sorted(log.read_text().split()) == ["a", "b", "c"]  # each ran once
    assert len(stub.calls) == 3
    assert broker.peek("QueueAsyncInitiator") == []
    assert {n: t.attempts for n, t in resumed.tasks.items()} == {"a": 1, "b": 1, "c": 1}


def test_runs_are_listed_newest_first_with_the_documented_keys(
        broker: sbroker.Broker, tmp_path: Path) -> None:
    log = tmp_path / "ran.txt"
    one = start_run(broker, pipeline(note("a", log), name="one"))
    two = start_run(broker, pipeline(task("b", "boom"), name="two"))
    runs = list_runs(broker)
    assert [r["run_id"] for r in runs] == [two.run_id, one.run_id]
    assert all(set(r) == {"run_id", "pipeline", "status", "start_time", "end_time",
                            "scheduled_for"}
               for r in runs)
    assert [r["run_id"] for r in list_runs(broker, "one")] == [one.run_id]
    shown = get_run(broker, two.run_id)
    assert shown is not None
    assert set(shown) == {"run_id", "pipeline", "status", "start_time", "end_time", "tasks",
                          "driver", "takeovers", "scheduled_for"}
    assert shown["driver"] is None and shown["takeovers"] == 0
    assert [set(t) for t in shown["tasks"]] == [
        {"name", "status", "attempts", "start_time", "end_time", "value", "error"}]
    assert get_run(broker, 999) is None
