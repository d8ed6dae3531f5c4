"""Waiting for results never blocks forever: ``timeout=`` on ``synchronize`` and ``wait_all``,
and a clear error (or a warning) when no executor reader can run the tasks."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

import sbroker
from sbroker.apps.spark import StubRunner


class JumpingClock(sbroker.FakeClock):
    """A fake clock that jumps to the deadline whenever something waits on it (trio's
    autojump): a test of a 10 s wait takes milliseconds and needs no other thread."""

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        if deadline is None:
            raise AssertionError("a wait without a deadline would never end")
        self.advance(max(0.0, deadline - self.now()))


def _waits_briefly(fn: object) -> BaseException | None:
    """Run ``fn`` in a thread; what it raised (None if it returned). The join is a guard so
    that a regression fails here instead of hanging the run."""
    caught: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()  # type: ignore[operator]
            caught.append(None)
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(60)
    assert caught, "still waiting after 60 s: it would have blocked forever"
    return caught[0]


def test_wait_all_on_a_broker_never_started_says_so_instead_of_blocking(
        tmp_path: Path) -> None:
    with sbroker.Broker.open(tmp_path / "idle.db") as b:
        b.install_executor(runner=StubRunner())
        with b.scheduler() as s:
            s.exec_async("SELECT 1")
            error = _waits_briefly(s.wait_all)
            assert isinstance(error, sbroker.BrokerError)
            assert "not started" in str(error) and "start()" in str(error)
            error = _waits_briefly(s.synchronize)
            assert isinstance(error, sbroker.BrokerError) and "not started" in str(error)


def test_synchronize_and_wait_all_give_up_after_their_timeout(
        executor: sbroker.Broker, runner: StubRunner, make_readers: type) -> None:
    gate = threading.Event()
    runner.on("SELECT 1", gate=gate)
    readers = make_readers(executor, 1)
    try:
        with executor.scheduler() as s:
            s.exec_async("SELECT 1")
            with pytest.raises(TimeoutError, match="within 0.1 s"):
                s.synchronize(timeout=0.1)
            with pytest.raises(TimeoutError, match="1 task"):
                s.wait_all(timeout=0.1)
            gate.set()
            [result] = s.wait_all(timeout=60)
            assert result.ok
    finally:
        gate.set()
        readers.close()


def test_waiting_on_tasks_no_reader_takes_warns_after_a_few_seconds(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = JumpingClock()
    path = tmp_path / "shared.db"
    with sbroker.Broker.open(path, clock=clock) as b, sbroker.Broker.open(path) as other:
        # another broker has the database open: it might run the executor, so wait, but say
        b.install_executor(runner=StubRunner())
        with b.scheduler() as s, caplog.at_level(logging.WARNING, "sbroker.scheduler"):
            s.exec_async("SELECT 1")
            with pytest.raises(TimeoutError):
                s.synchronize(timeout=20)
            s.cancel(next(iter(s._in_flight)))
    warnings = [r.getMessage() for r in caplog.records if r.name == "sbroker.scheduler"]
    assert len(warnings) == 1
    assert "no executor reader" in warnings[0] and "start()" in warnings[0]
    assert other.broker_instance == b.broker_instance


def test_a_cancelled_task_of_a_scheduler_that_went_away_is_recorded_cancelled(
        executor: sbroker.Broker) -> None:
    from sbroker.apps.scheduler import serve
    from sbroker.apps.scheduler.executor import executor_state

    with executor.scheduler() as s:
        log_id = s.exec_async("SELECT 1")
        s.cancel(log_id)  # then the caller leaves without waiting (Ctrl-C, SIGTERM)
    [row] = executor.view("ExecutionLog")
    assert row["Status"] == "cancelled"  # at once, even with no reader running
    # a reader that comes later takes the task and the end of the dialog without error
    assert serve(executor, executor_state(executor), "w", wait=0) == 2
    [row] = executor.view("ExecutionLog")
    assert row["Status"] == "cancelled" and row["LogID"] == log_id
    assert executor.peek("QueueAsyncTarget") == []
    assert executor.view("conversation_endpoints") == []
