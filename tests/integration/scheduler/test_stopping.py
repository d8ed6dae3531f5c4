"""Timeouts and cancels stop a task whether or not its code cooperates; the executor keeps
its readers (docs/scheduler.md, "Timeouts and cancels").

The uncooperative tasks (scheduler_task_helpers: ``block`` waits in one C call for an event
the test sets at its end, ``spin`` swallows every Exception) are never waited for: the test
waits for the outcome the executor records."""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import scheduler_task_helpers as helpers

import sbroker
from sbroker.apps.pipeline import Options, Pipeline, TaskSpec, start_run
from sbroker.apps.scheduler import cancel_task
from sbroker.apps.scheduler.attempts import TaskStopped
from sbroker.apps.scheduler.executor import STOPPED, executor_state
from sbroker.apps.spark import PythonTask, StubRunner, TaskFailed

BLOCK = "scheduler_task_helpers:block"


@pytest.fixture
def key(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """Keys for ``block``/``spin`` tasks, released when the test ends (so that no thread
    outlives the test by much)."""
    made: list[str] = []

    def new(name: str = "") -> str:
        made.append(f"{request.node.nodeid}:{name}")
        return made[-1]

    yield new
    for k in made:
        helpers.event(k).set()


def _row(broker: sbroker.Broker, log_id: int) -> dict[str, object]:
    [row] = [r for r in broker.view("ExecutionLog") if r["LogID"] == log_id]
    return row


def test_a_task_past_its_timeout_is_failed_while_its_code_still_blocks(
        executor: sbroker.Broker, readers: object, key: Callable[[str], str]) -> None:
    k = key("")
    state = executor_state(executor)
    with executor.scheduler() as s:
        log_id = s.exec_async(PythonTask(BLOCK, key=k), timeout=1)
        result = s.synchronize(timeout=30)
        assert result.status == "failed"
        assert (result.error or "").startswith("timed out after 1 s (its code did not return")
        assert result.seconds is not None and 1 <= result.seconds < 1 + 2
        assert "in block" in (result.error_details or "")  # where its code was stuck
        assert state.stuck() == [log_id]
        left = state.abandoned[log_id]
        helpers.event(k).set()  # its C call returns: TaskStopped lands in its code then
        assert left.wait_done(30) and left.result is None
        assert isinstance(left.raised, TaskStopped)
        assert state.stuck() == []
        assert executor.peek("QueueAsyncInitiator") == []  # one AsyncDone, no second
    row = _row(executor, log_id)
    assert (row["Status"], row["Value"]) == ("failed", "null")


def test_a_cancel_stops_a_task_whose_code_never_returns(
        executor: sbroker.Broker, readers: object, key: Callable[[str], str]) -> None:
    k = key("")
    with executor.scheduler() as s:
        log_id = s.exec_async(PythonTask(BLOCK, key=k))
        assert helpers.began(k).wait(30)
        asked = dt.datetime.now(dt.UTC)
        s.cancel(log_id)
        result = s.synchronize(timeout=30)
    assert result.status == "cancelled" and (result.error or "").startswith("cancelled")
    assert result.end_time is not None and (result.end_time - asked).total_seconds() < 5
    assert _row(executor, log_id)["Status"] == "cancelled"


@pytest.mark.parametrize(("timed_out", "status", "error"),
                         [(False, "cancelled", "cancelled"), (True, "failed", "timed out")])
def test_a_stop_asked_by_another_process_reaches_the_executor(
        executor: sbroker.Broker, readers: object, key: Callable[[str], str], tmp_path: Path,
        timed_out: bool, status: str, error: str) -> None:
    k = key("")
    with executor.scheduler() as s:
        log_id = s.exec_async(PythonTask(BLOCK, key=k))
        assert helpers.began(k).wait(30)
        with sbroker.Broker.open(tmp_path / "sched.db") as other:  # no executor of its own
            assert other.executor_state(create=False) is None
            assert cancel_task(other, log_id, timed_out=timed_out)
        result = s.synchronize(timeout=30)
    assert (result.status, (result.error or "").split(" (")[0]) == (status, error)


def test_a_pure_python_loop_is_interrupted_and_its_thread_not_left_behind(
        executor: sbroker.Broker, readers: object, key: Callable[[str], str]) -> None:
    with executor.scheduler() as s:
        s.exec_async(PythonTask("scheduler_task_helpers:spin", key=key("")), timeout=0.5)
        result = s.synchronize(timeout=30)
    assert (result.status, result.error) == ("failed", "timed out after 0.5 s")
    details = result.error_details or ""
    assert "in spin" in details and details.rstrip().endswith("TaskStopped")
    assert executor_state(executor).stuck() == []


def test_the_executor_keeps_its_readers_after_tasks_that_never_return(
        executor: sbroker.Broker, make_readers: type, key: Callable[[str], str]) -> None:
    readers = make_readers(executor, 2)
    try:
        with executor.scheduler() as s:
            stuck = [s.exec_async(PythonTask(BLOCK, key=key(str(i))), timeout=0.3)
                     for i in range(4)]
            with pytest.raises(TaskFailed) as failed:
                s.wait_all(timeout=60)
            assert {r.status for r in failed.value.results} == {"failed"}
            assert executor_state(executor).stuck() == sorted(stuck)
            # two tasks that meet at a barrier succeed only if both readers run them at once
            meet = key("meet")
            pair = [s.exec_async(PythonTask("scheduler_task_helpers:meet", key=meet))
                    for _ in range(2)]
            assert [r.log_id for r in s.wait_all(timeout=60)] == pair
    finally:
        readers.close()


def test_stopping_the_broker_stops_a_stuck_task_instead_of_hanging(
        tmp_path: Path, key: Callable[[str], str], caplog: pytest.LogCaptureFixture) -> None:
    k = key("")
    with sbroker.Broker.open(tmp_path / "stop.db") as b:
        b.install_executor(max_queue_readers=1, runner=StubRunner())
        executor_state(b).stop_drain = 0.0  # stop it at once (5 s by default)
        b.start()
        with b.scheduler() as s:
            log_id = s.exec_async(PythonTask(BLOCK, key=k))
            assert helpers.began(k).wait(30)
            with caplog.at_level(logging.WARNING, logger="sbroker.activation"):
                b.stop()
            assert not [r for r in caplog.records if "still running" in r.getMessage()]
            result = s.synchronize(timeout=30)
        assert result.status == "failed" and (result.error or "").startswith(STOPPED)
        assert executor_state(b).stuck() == [log_id]


def test_a_pipeline_task_past_its_timeout_fails_and_the_run_goes_on(
        tmp_path: Path, key: Callable[[str], str]) -> None:
    k = key("")
    pipeline = Pipeline("stuck", (), Options(), tasks=(
        TaskSpec("hang", PythonTask(BLOCK, key=k), timeout=1.0),
        TaskSpec("after", PythonTask(BLOCK, key=k), after=("hang",))))
    with sbroker.Broker.open(tmp_path / "run.db") as b:
        b.install_executor(max_queue_readers=1, runner=StubRunner())
        b.start()
        state = start_run(b, pipeline)
        assert executor_state(b).stuck() != []
    hang, after = state.tasks["hang"], state.tasks["after"]
    assert (hang.status, hang.error) == ("failed", "timed out after 1 s")
    assert after.status == "skipped"


def test_a_task_that_calls_sys_exit_fails_and_its_reader_goes_on(
        executor: sbroker.Broker, readers: object) -> None:
    with executor.scheduler() as s:
        s.exec_async(PythonTask("scheduler_task_helpers:leave"))
        s.exec_async("SELECT 1")
        with pytest.raises(TaskFailed) as failed:
            s.wait_all(timeout=60)
    left, after = failed.value.results
    assert (left.status, left.error, after.status) == ("failed", "SystemExit: 3", "succeeded")
    assert "in leave" in (left.error_details or "")


@pytest.mark.parametrize("bad", [0, -1, "1", True, float("nan")])
def test_a_bad_timeout_is_refused_and_nothing_is_sent(executor: sbroker.Broker,
                                                      bad: object) -> None:
    with executor.scheduler() as s, pytest.raises(sbroker.InvalidArgumentError,
                                                  match="timeout must be a number"):
        s.exec_async("SELECT 1", timeout=bad)  # type: ignore[arg-type]
    assert executor.view("ExecutionLog") == []


def test_a_thread_stopped_after_its_work_returned_ends_cleanly() -> None:
    """A stop that comes as the work returns: no TaskStopped lands later in the thread."""
    from sbroker.apps.scheduler.attempts import Attempt, AttemptThread, Stop

    pause = random.Random(50)  # seeded: some stops come before the work returns, some after
    for _ in range(200):
        began, release = threading.Event(), threading.Event()

        def work(began: threading.Event = began, release: threading.Event = release) -> int:
            began.set()
            release.wait(5)
            return 1

        attempt: Attempt[int] = Attempt(1, work)
        thread = AttemptThread("race")
        thread.submit(attempt)
        assert began.wait(5)
        release.set()
        time.sleep(pause.choice([0, 0, 1e-5, 3e-5, 1e-4]))
        attempt.stop(Stop.CANCELLED)
        attempt.interrupt()
        assert attempt.wait_done(5)
        thread.close()
        thread.thread.join(5)
        assert not thread.thread.is_alive()
        assert attempt.result == 1 or isinstance(attempt.raised, TaskStopped)
