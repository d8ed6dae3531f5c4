"""The seed 002 scheduler on the broker, with a stub runner (no JVM)."""

from __future__ import annotations

import threading
import time

import pytest

import sbroker
from sbroker.apps.scheduler import serve, serve_one
from sbroker.apps.scheduler.client import install_runner
from sbroker.apps.scheduler.executor import executor_state
from sbroker.apps.spark import (
    PythonTask,
    SparkSQL,
    StubRunner,
    TaskFailed,
)


def test_install_creates_the_seed_objects_idempotently(executor: sbroker.Broker) -> None:
    executor.install_executor(max_queue_readers=3)
    cat = executor.catalog
    assert {"AsyncSent", "AsyncDone"} <= set(cat.message_types)
    assert cat.contracts["AsyncContract"] == {"AsyncSent": "initiator", "AsyncDone": "target"}
    assert {"QueueAsyncInitiator", "QueueAsyncTarget"} <= set(cat.queues)
    assert {"ServiceAsyncInitiator", "ServiceAsyncTarget"} <= set(cat.services)
    target = cat.queues["QueueAsyncTarget"]
    assert target.activation_status and target.max_queue_readers == 3
    assert target.activation_procedure == "sbroker.apps.scheduler.executor:executor_procedure"
    assert executor.view("ExecutionLog") == [] and executor.view("ExecutionStatus") == []


def test_a_stage_runs_concurrently_and_reports_every_task(
        executor: sbroker.Broker, runner: StubRunner, readers: object) -> None:
    gate = threading.Event()
    runner.on("SELECT 'slow'", gate=gate, value={"rows": 1})
    with executor.scheduler("stage") as s:
        ids = [s.exec_async("SELECT 'slow'") for _ in range(2)]
        while runner.max_running < 2:  # both readers run a task at once
            s.broker.notifier.wait(s.broker.notifier.token(), None)
        gate.set()
        results = s.wait_all()
    assert sorted(r.log_id for r in results) == ids
    assert {r.status for r in results} == {"succeeded"}
    assert all(r.value == {"rows": 1} for r in results)
    rows = executor.view("ExecutionLog")
    assert {r["Status"] for r in rows} == {"succeeded"}
    assert all(r["StartTime"] and r["EndTime"] and r["Worker"] for r in rows)
    # The readers receive the scheduler's EndDialog and end their side: nothing remains.
    deadline = time.monotonic() + 30
    while executor.view("conversation_endpoints") and time.monotonic() < deadline:
        executor.notifier.wait(executor.notifier.token(), time.time() + 0.05)
    assert executor.view("conversation_endpoints") == []



def test_wait_all_returns_the_results_in_the_order_the_tasks_were_sent(
        executor: sbroker.Broker, runner: StubRunner, readers: object) -> None:
    gate = threading.Event()
    runner.on("SELECT 'held'", gate=gate, value={"rows": 1})
    runner.on("SELECT 'quick'", value={"rows": 2})
    with executor.scheduler("order") as s:
        held = s.exec_async("SELECT 'held'")
        quick = s.exec_async("SELECT 'quick'")
        assert s.synchronize(timeout=60).log_id == quick  # it finished first
        gate.set()
        first, second = s.wait_all(timeout=60)
    assert (first.log_id, first.value) == (held, {"rows": 1})
    assert (second.log_id, second.value) == (quick, {"rows": 2})

def test_a_failed_task_is_recorded_reported_and_the_executor_goes_on(
        executor: sbroker.Broker, runner: StubRunner, readers: object) -> None:
    runner.on("bad", error=ValueError("no such table: nope"))
    runner.on("mod:fn", value=7)
    with executor.scheduler() as s:
        bad = s.exec_async(SparkSQL("bad"))
        good = s.exec_async(PythonTask("mod:fn", n=1))
        with pytest.raises(TaskFailed) as info:
            s.wait_all()
        by_id = {r.log_id: r for r in info.value.results}
        assert by_id[bad].status == "failed" and "no such table" in (by_id[bad].error or "")
        assert by_id[good].status == "succeeded"
        again = s.exec_async("SELECT 1")
        assert s.synchronize(timeout=30).log_id == again
    row = next(r for r in executor.view("ExecutionLog") if r["LogID"] == bad)
    assert row["Status"] == "failed" and "no such table" in row["Error"]


def test_cancel_a_queued_task_and_a_running_one(
        executor: sbroker.Broker, runner: StubRunner, readers: object) -> None:
    gate = threading.Event()
    runner.on("SELECT 'hang'", gate=gate)
    with executor.scheduler(max_concurrency=None) as s:
        running = [s.exec_async("SELECT 'hang'") for _ in range(2)]
        while len(runner.running) < 2:
            s.broker.notifier.wait(s.broker.notifier.token(), None)
        queued = s.exec_async("SELECT 'hang'")
        s.cancel(queued)
        s.cancel(running[0])
        results = {}
        while len(results) < 2:
            r = s.synchronize(timeout=30)
            results[r.log_id] = r
        assert results[queued].status == "cancelled"
        assert results[running[0]].status == "cancelled"
        gate.set()
        assert s.synchronize(timeout=30).status == "succeeded"
    statuses = {r["LogID"]: r["Status"] for r in executor.view("ExecutionLog")}
    assert statuses[queued] == statuses[running[0]] == "cancelled"


def test_max_concurrency_bounds_tasks_in_flight(
        executor: sbroker.Broker, runner: StubRunner, readers: object) -> None:
    with executor.scheduler(max_concurrency=1) as s:
        for i in range(6):
            s.exec_async(f"SELECT {i}")
            assert len(s._in_flight) <= 1
        assert len(s.wait_all()) == 6
    assert runner.max_running == 1


def test_a_small_scheduler_is_not_starved_by_a_big_one(
        executor: sbroker.Broker, runner: StubRunner, make_readers: type) -> None:
    big = executor.scheduler("big")
    small = executor.scheduler("small")
    with big, small:
        big_ids = [big.exec_async(f"SELECT {i}") for i in range(300)]
        small_ids = [small.exec_async(f"SELECT 'small {i}'") for i in range(3)]
        readers = make_readers(executor, 2)
        try:
            small.wait_all()
            big.wait_all()
        finally:
            readers.close()
    order = runner.finished
    last_small = max(order.index(i) for i in small_ids)
    big_before = sum(1 for i in order[:last_small] if i in set(big_ids))
    assert big_before <= 10, f"{big_before} big tasks ran before the small scheduler finished"


def test_scheduler_without_executor_and_bad_arguments(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with sbroker.Broker.open(tmp_path / "x.db") as b:
        with pytest.raises(sbroker.BrokerError, match="install_executor"):
            b.scheduler()
        b.install_executor(runner=StubRunner())
        with pytest.raises(sbroker.InvalidArgumentError):
            b.scheduler(max_concurrency=0)
        with b.scheduler() as s, pytest.raises(sbroker.BrokerError, match="no task"):
            s.synchronize()


def test_a_task_whose_executor_died_is_reported_failed(
        executor: sbroker.Broker, runner: StubRunner) -> None:
    with executor.scheduler() as s:
        log_id = s.exec_async("SELECT 1")
        # An executor in a process that died: it took the task, then vanished.
        with executor.transaction() as tx:
            [msg] = tx.receive("QueueAsyncTarget")
            tx.execute(
                "UPDATE ExecutionLog SET Status = 'running', WorkerSession = -1,"
                " TargetHandle = ? WHERE LogID = ?", (msg.conversation_handle, log_id))
        result = s.synchronize(timeout=30)
    assert result.status == "failed" and "died" in (result.error or "")


class _Peeking(StubRunner):
    """A stub that looks at the ExecutionLog from inside each run."""

    def __init__(self, broker: sbroker.Broker) -> None:
        super().__init__()
        self.broker = broker
        self.seen: dict[int, dict[int, str]] = {}  # running log id -> statuses it saw
        self.stop_after: int | None = None
        self.stopping = threading.Event()

    def run(self, task, *, log_id, pool=None):  # type: ignore[no-untyped-def]
        rows = self.broker.view("ExecutionLog")
        self.seen[log_id] = {r["LogID"]: r["Status"] for r in rows}
        if log_id == self.stop_after:
            self.stopping.set()
        return super().run(task, log_id=log_id, pool=pool)


def test_a_task_runs_after_its_row_says_running_and_the_previous_outcome_is_recorded(
        executor: sbroker.Broker) -> None:
    peek = _Peeking(executor)
    install_runner(executor, peek)
    with executor.scheduler() as s:
        ids = [s.exec_async(f"SELECT {i}") for i in range(3)]
        assert serve(executor, executor_state(executor), "w", wait=0) == 3
        for before, now in zip([None, *ids], ids, strict=False):
            assert peek.seen[now][now] == "running"
            if before is not None:  # its outcome committed with the take of this task
                assert peek.seen[now][before] == "succeeded"
        results = [s.synchronize(timeout=30) for _ in ids]
        assert [r.log_id for r in results] == ids  # in order, one per call
        with pytest.raises(sbroker.BrokerError, match="no task"):
            s.synchronize()
    assert {r["Status"] for r in executor.view("ExecutionLog")} == {"succeeded"}


def test_a_reader_stopped_between_tasks_reports_the_task_it_ran(
        executor: sbroker.Broker) -> None:
    peek = _Peeking(executor)
    install_runner(executor, peek)
    with executor.scheduler() as s:
        first, second = s.exec_async("SELECT 1"), s.exec_async("SELECT 2")
        peek.stop_after = first
        state = executor_state(executor)
        assert serve(executor, state, "w", wait=0, stopping=peek.stopping) == 1
        assert s.synchronize(timeout=30).log_id == first
        statuses = {r["LogID"]: r["Status"] for r in executor.view("ExecutionLog")}
        assert statuses == {first: "succeeded", second: "queued"}
        assert serve(executor, state, "w", wait=0) == 1
        assert s.synchronize(timeout=30).log_id == second


def test_results_taken_with_an_error_from_the_executor_come_first_then_the_error(
        executor: sbroker.Broker, runner: StubRunner) -> None:
    with executor.scheduler() as s:
        done, lost = s.exec_async("SELECT 1"), s.exec_async("SELECT 2")
        assert serve_one(executor, executor_state(executor), "w", wait=0)
        row = next(r for r in executor.view("ExecutionLog") if r["LogID"] == done)
        with executor.transaction() as tx:  # an administrator ends the executor's side
            tx.end_conversation(row["TargetHandle"], error=50, description="stopped by admin")
        assert s.synchronize(timeout=30).log_id == done  # taken with the Error message
        with pytest.raises(sbroker.BrokerError, match="stopped by admin"):
            s.synchronize(timeout=30)  # the task still queued will never be reported
        assert s.handle is None  # its side of the dialog was ended with the Error
    assert lost not in {r["LogID"] for r in executor.view("ExecutionLog")
                        if r["Status"] != "queued"}


def test_an_activated_reader_waits_for_the_next_stage_as_seed_002s_does(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Activation adds readers one per monitor_interval: a reader that waits 30 s for work
    (seed 002's WAITFOR ... TIMEOUT 30000) serves the next stage without a new ramp."""
    clock = sbroker.FakeClock()
    b = sbroker.Broker.open(tmp_path / "idle.db", clock=clock, monitor_interval=5)
    b.install_executor(max_queue_readers=1, runner=StubRunner())
    svc = b._activation
    b.start()
    try:
        with b.scheduler("stages") as s:
            s.exec_async(SparkSQL("SELECT 1"))
            s.wait_all()
            assert svc.wait_for(lambda: svc.monitor(_target_id(b)).tasks_waiting == 1, 10)
            clock.advance(29)
            s.exec_async(SparkSQL("SELECT 2"))
            s.wait_all()
            mon = svc.monitor(_target_id(b))
            assert (mon.tasks_started, mon.tasks_running) == (1, 1)  # the same reader
            assert svc.wait_for(lambda: mon.tasks_waiting == 1, 10)
            clock.advance(30)
            assert svc.wait_for(lambda: svc.running_tasks() == 0, 10)  # then it returns
            assert mon.tasks_failed == 0
    finally:
        b.close()


def _target_id(b: sbroker.Broker) -> int:
    return b.catalog.queues["QueueAsyncTarget"].queue_id


def test_a_stage_starts_all_its_readers_at_once_with_default_options(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 17: four tasks of one stage ran one at a time on a broker opened with default
    options (activation ramps one reader per monitor_interval, 5 s).  The executor asks for
    the readers its backlog needs at once: all four run together with the clock standing."""
    clock = sbroker.FakeClock()
    runner = StubRunner()
    gate = threading.Event()
    for i in range(4):
        runner.on(f"SELECT {i}", gate=gate)
    b = sbroker.Broker.open(tmp_path / "stage.db", clock=clock)  # monitor_interval: default
    b.install_executor(max_queue_readers=4, runner=runner)
    svc = b.activation
    b.start()
    try:
        with b.scheduler("stage") as s:
            for i in range(4):
                s.exec_async(f"SELECT {i}")
            assert len(runner.wait_running(4, timeout=30)) == 4  # the clock never moved
            gate.set()
            assert [r.status for r in s.wait_all(timeout=60)] == ["succeeded"] * 4
        assert svc.monitor(_target_id(b)).tasks_started == 4
    finally:
        gate.set()
        b.close()
