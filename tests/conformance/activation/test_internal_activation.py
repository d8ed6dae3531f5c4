"""Internal activation on a fake clock: procedures in worker threads, the ramp-up, group
locks, failures, hangs, stop, import paths, and the two dynamic views."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sbroker import Activation, Broker, FakeClock
from sbroker.services.activation import ActivationContext

WAIT = 10.0  # real seconds a test waits for a background thread before failing


class Drain:
    """A procedure that receives until the queue is empty, then returns."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.lock = threading.Lock()
        self.emptied = threading.Event()

    def __call__(self, ctx: ActivationContext) -> None:
        while True:
            with ctx.broker.transaction() as tx:
                msgs = tx.receive(ctx.queue)
                if not msgs:
                    self.emptied.set()
                    return
                with self.lock:
                    self.got.extend(m.text() for m in msgs)


class Holder:
    """Each instance receives one message at a time and keeps its group locked until ``gate``."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.lock = threading.Lock()
        self.holding = threading.Semaphore(0)
        self.gate = threading.Event()

    def __call__(self, ctx: ActivationContext) -> None:
        while not ctx.stopping.is_set():
            with ctx.broker.transaction() as tx:
                msgs = tx.receive(ctx.queue, top=1)
                if not msgs:
                    return
                with self.lock:
                    self.got.extend(m.text() for m in msgs)
                self.holding.release()
                self.gate.wait(WAIT)


def target(broker: Broker, proc: object, *, max_readers: int = 1, status: bool = True,
           queue: str = "TQ", service: str = "Target") -> None:
    broker.create_queue(queue, activation=Activation(proc, max_queue_readers=max_readers,  # type: ignore[arg-type]
                                                     status=status))
    broker.create_service(service, queue, ["DEFAULT"])


def monitor_row(broker: Broker, queue: str = "TQ") -> dict[str, object]:
    """The queue's row of dm_broker_queue_monitors ({} before the first monitor pass)."""
    rows = [r for r in broker.view("dm_broker_queue_monitors") if r["queue_name"] == queue]
    assert len(rows) <= 1, rows
    return rows[0] if rows else {}


def test_a_message_on_an_idle_queue_activates_the_procedure(
        broker: Broker, send: Callable[..., None]) -> None:
    proc = Drain()
    target(broker, proc)
    broker.start()
    send(broker, 3, groups=1)
    assert proc.emptied.wait(WAIT)
    svc = broker._activation
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)
    assert proc.got == ["m0", "m1", "m2"]
    row = monitor_row(broker)
    assert row["tasks_started"] == 1 and row["tasks_failed"] == 0
    assert row["last_activated_time"] == broker.clock.now()


def test_a_broker_not_started_activates_nothing_until_start(
        broker: Broker, send: Callable[..., None]) -> None:
    proc = Drain()
    target(broker, proc)
    send(broker, 2)
    svc = broker._activation
    assert not svc.sync(timeout=0.05)  # no monitor pass runs at all
    assert svc.running_tasks() == 0
    assert broker.view("dm_broker_queue_monitors") == []
    broker.start()  # the backlog is found at once
    assert proc.emptied.wait(WAIT)
    assert sorted(proc.got) == ["m0", "m1"]


def test_ramp_up_adds_one_reader_per_interval_while_readers_find_work(
        broker: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    proc = Holder()
    target(broker, proc, max_readers=3)
    send(broker, 10)
    svc = broker._activation
    broker.start()
    assert proc.holding.acquire(timeout=WAIT)
    assert svc.sync() and svc.running_tasks() == 1
    clock.advance(4.9)
    assert svc.sync() and svc.running_tasks() == 1
    clock.advance(0.1)
    assert proc.holding.acquire(timeout=WAIT)
    assert svc.sync() and svc.running_tasks() == 2
    clock.advance(5)
    assert proc.holding.acquire(timeout=WAIT)
    assert svc.sync() and svc.running_tasks() == 3
    clock.advance(5)
    assert svc.sync() and svc.running_tasks() == 3  # max_queue_readers
    row = monitor_row(broker)
    assert row["state"] == "RECEIVES_OCCURRING"
    assert row["tasks_started"] == 3
    tasks = broker.view("dm_broker_activated_tasks")
    assert [t["task_id"] for t in tasks] == [1, 2, 3]
    assert {t["queue_name"] for t in tasks} == {"TQ"}
    proc.gate.set()
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)
    assert sorted(proc.got) == sorted(f"m{i}" for i in range(10))
    assert svc.sync()
    assert monitor_row(broker)["state"] == "INACTIVE"
    assert broker.view("dm_broker_activated_tasks") == []


def test_a_backlog_in_one_group_being_read_starts_no_more_readers(
        broker: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    proc = Holder()
    target(broker, proc, max_readers=5)
    send(broker, 10, groups=1)
    svc = broker._activation
    broker.start()
    assert proc.holding.acquire(timeout=WAIT)
    for _ in range(3):
        clock.advance(5)
        assert svc.sync()
        assert svc.running_tasks() == 1
    proc.gate.set()
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)
    assert proc.got == [f"m{i}" for i in range(10)]


def test_a_failing_procedure_is_logged_counted_and_retried_only_after_an_interval(
        broker: Broker, clock: FakeClock, send: Callable[..., None],
        caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def boom(ctx: ActivationContext) -> None:
        calls.append(ctx.task_id)
        raise ValueError("cannot handle this")

    target(broker, boom)
    svc = broker._activation
    broker.start()
    with caplog.at_level(logging.ERROR, logger="sbroker.activation"):
        send(broker, 1)
        assert svc.wait_for(lambda: monitor_row(broker).get("tasks_failed") == 1, WAIT)
    failures = [r for r in caplog.records if r.getMessage() == "activated procedure failed"]
    assert failures and failures[0].exc_info is not None
    assert "cannot handle this" in caplog.text
    assert monitor_row(broker)["last_error"] == "ValueError: cannot handle this"
    assert svc.sync() and calls == [1]  # no tight restart loop
    clock.advance(5)
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_failed") == 2, WAIT)
    assert calls == [1, 2]
    assert broker.peek("TQ")  # the message is still there: nothing lost


def test_a_hanging_procedure_blocks_neither_other_queues_nor_a_second_reader(
        broker: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    release = threading.Event()
    hung = threading.Semaphore(0)

    def hang(ctx: ActivationContext) -> None:
        hung.release()
        release.wait(WAIT)

    target(broker, hang, max_readers=2, queue="HangQ", service="Hang")
    drain = Drain()
    target(broker, drain)
    svc = broker._activation
    broker.start()
    try:
        send(broker, 1, to="Hang")
        assert hung.acquire(timeout=WAIT)
        send(broker, 3)
        assert drain.emptied.wait(WAIT)
        assert sorted(drain.got) == ["m0", "m1", "m2"]
        clock.advance(5)  # the hung reader never received: after an interval, another one
        assert hung.acquire(timeout=WAIT)
        assert svc.running_tasks("HangQ") == 2
    finally:
        release.set()
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)


def test_stop_ends_a_procedures_wait_in_receive_as_a_timeout(
        broker: Broker, clock: FakeClock, send: Callable[..., None],
        caplog: pytest.LogCaptureFixture) -> None:
    results: list[list[str]] = []
    waiting = threading.Event()

    def patient(ctx: ActivationContext) -> None:  # seed 002's reader: a long WAITFOR
        while True:
            with ctx.broker.transaction() as tx:
                if results:
                    waiting.set()
                msgs = tx.receive(ctx.queue, timeout=3600)
                results.append([m.text() for m in msgs])
                if not msgs:
                    return

    target(broker, patient)
    svc = broker._activation
    svc.stop_timeout = WAIT / 2
    broker.start()
    send(broker, 1)
    assert waiting.wait(WAIT)
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_waiting") == 1, WAIT)
    with caplog.at_level(logging.WARNING, logger="sbroker.activation"):
        broker.stop()  # no clock advance: only the stop can end the wait
    assert "still running after stop" not in caplog.text
    assert "activated procedure failed" not in caplog.text
    assert results == [["m0"], []]
    assert svc.running_tasks() == 0


def test_stop_asks_procedures_to_return_and_waits_a_bounded_time(
        broker: Broker, send: Callable[..., None], caplog: pytest.LogCaptureFixture) -> None:
    entered = threading.Semaphore(0)
    release = threading.Event()

    def polite(ctx: ActivationContext) -> None:
        entered.release()
        ctx.stopping.wait(WAIT)

    def stubborn(ctx: ActivationContext) -> None:
        entered.release()
        release.wait(WAIT)

    target(broker, polite)
    target(broker, stubborn, queue="Q2", service="S2")
    svc = broker._activation
    svc.stop_timeout = 0.3
    broker.start()
    send(broker, 1)
    send(broker, 1, to="S2")
    assert entered.acquire(timeout=WAIT) and entered.acquire(timeout=WAIT)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sbroker.activation"):
        broker.stop()
    assert time.monotonic() - began < WAIT / 2
    assert "still running after stop" in caplog.text
    assert svc.running_tasks("TQ") == 0
    assert [t["queue_name"] for t in broker.view("dm_broker_activated_tasks")] == ["Q2"]
    release.set()
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)


def test_rollbacks_of_procedures_stopped_with_their_broker_never_disable_the_queue(
        broker: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    holding = threading.Semaphore(0)

    def interrupted(ctx: ActivationContext) -> None:  # holds a message until the stop
        with ctx.broker.transaction() as tx:
            if tx.receive(ctx.queue, top=1):
                holding.release()
                ctx.stopping.wait(WAIT)
                raise RuntimeError("the broker is stopping")

    target(broker, interrupted)
    send(broker, 1)
    for _ in range(6):  # one more than poison detection's five rollbacks
        broker.start()
        clock.advance(5)  # a backlog with no reader: activated after an interval
        assert holding.acquire(timeout=WAIT)
        broker.stop()
    [queue] = [q for q in broker.view("service_queues") if q["name"] == "TQ"]
    assert queue["is_receive_enabled"]
    with broker.transaction() as tx:
        assert [m.text() for m in tx.receive("TQ")] == ["m0"]


def test_an_import_path_is_resolved_when_the_procedure_is_activated(
        broker: Broker, send: Callable[..., None], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target(broker, "late_activation_proc:drain")
    (tmp_path / "late_activation_proc.py").write_text(
        "import threading\n"
        "DONE = threading.Event()\n"
        "GOT = []\n"
        "def drain(ctx):\n"
        "    while True:\n"
        "        with ctx.broker.transaction() as tx:\n"
        "            msgs = tx.receive(ctx.queue)\n"
        "            if not msgs:\n"
        "                DONE.set()\n"
        "                return\n"
        "            GOT.extend(m.text() for m in msgs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_activation_proc", raising=False)
    broker.start()
    send(broker, 2, groups=1)
    svc = broker._activation
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_started") == 1, WAIT)
    import late_activation_proc as mod  # type: ignore[import-not-found]

    assert mod.DONE.wait(WAIT)
    assert mod.GOT == ["m0", "m1"]
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)
    assert monitor_row(broker)["tasks_failed"] == 0


def test_an_unimportable_procedure_fails_visibly(
        broker: Broker, send: Callable[..., None]) -> None:
    target(broker, "no_such_module_for_sbroker:proc")
    broker.start()
    send(broker, 1)
    svc = broker._activation
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_failed") == 1, WAIT)
    assert "ModuleNotFoundError" in str(monitor_row(broker)["last_error"])


def test_alter_queue_turning_activation_on_activates_at_once(
        broker: Broker, send: Callable[..., None]) -> None:
    proc = Drain()
    target(broker, proc, status=False)
    broker.start()
    send(broker, 2)
    svc = broker._activation
    assert svc.sync() and svc.running_tasks() == 0
    assert broker.view("dm_broker_queue_monitors") == []  # no monitor: activation is off
    broker.alter_queue("TQ", activation=Activation(proc))
    assert proc.emptied.wait(WAIT)
    assert sorted(proc.got) == ["m0", "m1"]


def test_sessions_waiting_in_receive_show_in_the_view(
        broker: Broker, send: Callable[..., None]) -> None:
    target(broker, Drain(), max_readers=0)
    svc = broker._activation
    broker.start()
    got: list[str] = []

    def wait_in_receive() -> None:
        with broker.transaction() as tx:
            got.extend(m.text() for m in tx.receive("TQ", timeout=None))

    waiter = threading.Thread(target=wait_in_receive)
    waiter.start()
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_waiting") == 1, WAIT)
    send(broker, 1)
    waiter.join(WAIT)
    assert got == ["m0"]
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_waiting") == 0, WAIT)
    assert monitor_row(broker)["tasks_started"] == 0  # max_queue_readers=0


def test_rollback_of_a_receive_makes_the_monitor_look_again_at_once(
        broker: Broker, send: Callable[..., None]) -> None:
    proc = Drain()
    target(broker, proc, status=False)
    send(broker, 1)
    broker.start()
    svc = broker._activation
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        assert tx.receive("TQ")  # the only group is now locked by this transaction
        broker.alter_queue("TQ", activation=Activation(proc))
        assert svc.sync()
        assert svc.running_tasks() == 0  # nothing receivable: no reader
        raise RuntimeError("roll back")
    assert proc.emptied.wait(WAIT)  # no clock advance: the rollback itself re-evaluated
    assert proc.got == ["m0"]


def test_a_procedure_failing_after_its_receive_is_not_restarted_in_a_tight_loop(
        broker: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    calls: list[int] = []

    def boom(ctx: ActivationContext) -> None:
        with ctx.broker.transaction() as tx:
            assert tx.receive(ctx.queue)
            calls.append(ctx.task_id)
            raise ValueError("poison")

    broker.create_queue("TQ", poison_message_handling=False,
                        activation=Activation(boom))
    broker.create_service("Target", "TQ", ["DEFAULT"])
    svc = broker._activation
    broker.start()
    send(broker, 1)
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_failed") == 1, WAIT)
    assert svc.sync() and svc.sync()
    assert calls == [1]
    clock.advance(5)
    assert svc.wait_for(lambda: monitor_row(broker).get("tasks_failed") == 2, WAIT)
    assert calls == [1, 2]


def test_a_broker_monitoring_only_external_activation_leaves_procedures_alone(
        broker: Broker, send: Callable[..., None]) -> None:
    proc = Drain()
    target(broker, proc)
    svc = broker._activation
    svc.internal = False  # what the external activator's own broker does
    broker.start()
    send(broker, 1)
    assert svc.sync() and svc.running_tasks() == 0
    assert broker.view("dm_broker_queue_monitors") == []
