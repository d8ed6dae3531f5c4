"""sbroker.poison: the detection of docs/poison.md as a helper, its five policies, and
re-drive."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from sbroker import (
    Activation,
    Broker,
    FakeClock,
    InvalidArgumentError,
    Message,
    NotFoundError,
    Transaction,
)
from sbroker.apps import poison
from sbroker.apps.poison import PoisonGuard, Policy

WAIT = 10.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(clock: FakeClock) -> Iterator[Broker]:
    b = Broker.open(":memory:", clock=clock, monitor_interval=5)
    b.create_queue("InitQ")
    b.create_service("Init", "InitQ")
    b.create_queue("Work", poison_message_handling=False)
    b.create_service("WorkSvc", "Work", ["DEFAULT"])
    yield b
    b.close()


class Handler:
    """Fails on bodies in ``bad``; records what it processed."""

    def __init__(self, *bad: str) -> None:
        self.bad = set(bad)
        self.done: list[str] = []

    def __call__(self, tx: Transaction, msg: Message) -> None:
        if msg.text() in self.bad:
            raise ValueError(f"cannot process {msg.text()}")
        self.done.append(msg.text())


def dialog(broker: Broker, *bodies: str) -> str:
    with broker.transaction() as tx:
        handle = tx.begin_dialog("Init", "WorkSvc")
        for body in bodies:
            tx.send(handle, body=body)
    return handle


def queued(broker: Broker, queue: str = "Work") -> list[str]:
    return [m.text() for m in broker.peek(queue)]


def test_incidents_are_recorded_outside_the_rolled_back_transaction(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    dialog(broker, "bad")
    guard = PoisonGuard(broker, "Work", threshold=3)
    with caplog.at_level(logging.WARNING, logger="sbroker.poison"):
        assert guard.process_one(Handler("bad"))
    # the facts are in the line itself, for a default logging setup that drops extra=
    [line] = [r.getMessage() for r in caplog.records]
    assert "queue Work" in line and line.endswith(": ValueError: cannot process bad")
    assert queued(broker) == ["bad"]  # the receive rolled back
    incidents = poison.list_incidents(broker)
    assert len(incidents) == 1
    assert incidents[0]["error"] == "ValueError: cannot process bad"
    assert guard.incidents(incidents[0]["conversation_handle"]) == 1


def test_above_the_threshold_the_message_is_removed_and_recorded(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    dialog(broker, "bad", "good")
    handler = Handler("bad")
    guard = PoisonGuard(broker, "Work", threshold=2, policy=Policy.drop())
    with caplog.at_level(logging.ERROR, logger="sbroker.poison"):
        for _ in range(3):  # three failures: 3 > 2
            assert guard.process_one(handler)
        assert queued(broker) == ["bad", "good"]
        assert guard.process_one(handler)  # the fourth receive takes it out
    assert queued(broker) == ["good"]
    assert "poison message removed from the queue Work after 3 attempts (drop;" in caplog.text
    [record] = poison.list_messages(broker)
    assert record["state"] == "dropped" and record["policy"] == "drop"
    assert record["attempts"] == 3 and record["message_body"] is None
    assert record["last_error"] == "ValueError: cannot process bad"
    assert poison.list_incidents(broker) == []  # cleared with the removal
    assert guard.drain(handler) == 1
    assert handler.done == ["good"]  # the rest of the conversation goes on


def test_a_poison_conversation_does_not_hold_up_others(broker: Broker) -> None:
    dialog(broker, "bad")
    dialog(broker, "ok1")
    dialog(broker, "ok2")
    handler = Handler("bad")
    guard = PoisonGuard(broker, "Work", threshold=1, policy=Policy.log())
    assert guard.drain(handler) == 5  # 2 failures, 1 removal, 2 good messages
    assert sorted(handler.done) == ["ok1", "ok2"]
    assert [r["state"] for r in poison.list_messages(broker)] == ["logged"]


def test_end_conversation_policy_sends_the_error_to_the_other_side(broker: Broker) -> None:
    dialog(broker, "bad")
    guard = PoisonGuard(broker, "Work", threshold=0,
                        policy=Policy.end_conversation(4711, "bad order"))
    assert guard.process_one(Handler("bad"))
    assert guard.process_one(Handler("bad"))
    with broker.transaction() as tx:
        [msg] = tx.receive("InitQ")
    assert msg.is_error and msg.error() == (4711, "bad order")
    assert poison.list_messages(broker)[0]["state"] == "ended"


def test_log_policy_keeps_the_message_and_redrive_puts_it_back_in_its_conversation(
        broker: Broker) -> None:
    dialog(broker, "bad", "next")
    guard = PoisonGuard(broker, "Work", threshold=0, policy=Policy.log())
    handler = Handler("bad")
    assert guard.process_one(handler) and guard.process_one(handler)
    [record] = poison.list_messages(broker, queue="Work", state="logged")
    assert record["message_body"] == b"bad"
    handler.bad.clear()  # the cause was fixed
    poison.redrive(broker, record["record_id"])
    assert queued(broker) == ["next", "bad"]  # same conversation, after what was queued
    assert {m.conversation_handle for m in broker.peek("Work")} == {
        record["conversation_handle"]}
    assert poison.list_messages(broker)[0]["state"] == "redriven"
    assert guard.drain(handler) == 2 and handler.done == ["next", "bad"]
    with pytest.raises(InvalidArgumentError):
        poison.redrive(broker, record["record_id"])  # only once


def test_redrive_refuses_what_cannot_be_re_sent(broker: Broker) -> None:
    dialog(broker, "bad")
    guard = PoisonGuard(broker, "Work", threshold=0, policy=Policy.drop())
    assert guard.process_one(Handler("bad")) and guard.process_one(Handler("bad"))
    record_id = poison.list_messages(broker)[0]["record_id"]
    with pytest.raises(InvalidArgumentError, match="dropped"):
        poison.redrive(broker, record_id)
    with pytest.raises(NotFoundError):
        poison.redrive(broker, 999)


def test_notify_policy_tells_the_administrator_service(broker: Broker) -> None:
    broker.create_queue("AdminQ")
    broker.create_service("Admin", "AdminQ", ["DEFAULT"])
    dialog(broker, "bad")
    guard = PoisonGuard(broker, "Work", threshold=0,
                        policy=[Policy.log(), Policy.notify("Admin")])
    assert guard.process_one(Handler("bad")) and guard.process_one(Handler("bad"))
    with broker.transaction() as tx:
        [msg] = tx.receive("AdminQ")
    note = msg.json()
    [record] = poison.list_messages(broker)
    assert note["event"] == "POISON_MESSAGE" and note["record_id"] == record["record_id"]
    assert note["queue"] == "Work" and note["attempts"] == 1
    assert record["state"] == "notified" and record["policy"] == "log+notify"


def test_a_notify_dialog_the_administrator_failed_is_logged_and_replaced(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    broker.create_queue("AdminQ")
    broker.create_service("Admin", "AdminQ", ["DEFAULT"])
    guard = PoisonGuard(broker, "Work", threshold=0, policy=[Policy.notify("Admin")])
    dialog(broker, "bad")
    assert guard.process_one(Handler("bad")) and guard.process_one(Handler("bad"))
    with broker.transaction() as tx:
        [first] = tx.receive("AdminQ")
        tx.end_conversation(first.conversation_handle, error=50001, description="inbox full")
    caplog.set_level(logging.WARNING, logger="sbroker")
    dialog(broker, "bad too")
    assert guard.process_one(Handler("bad too")) and guard.process_one(Handler("bad too"))
    with broker.transaction() as tx:
        [second] = tx.receive("AdminQ")
    assert second.json()["event"] == "POISON_MESSAGE"
    assert second.conversation_handle != first.conversation_handle
    assert any(r.getMessage().startswith("shared dialog ")
               and r.getMessage().endswith(" failed: error 50001: inbox full")
               for r in caplog.records), caplog.text


def test_park_policy_re_sends_after_the_delay(broker: Broker, clock: FakeClock) -> None:
    dialog(broker, "bad")
    handler = Handler("bad")
    guard = PoisonGuard(broker, "Work", threshold=0, policy=Policy.park(delay=30))
    parking = poison.install(broker)
    broker.start()
    assert guard.process_one(handler) and guard.process_one(handler)
    assert queued(broker) == []
    [record] = poison.list_messages(broker, state="parked")
    assert record["resend_at"] == clock.now() + 30
    clock.advance(29)
    assert parking.sync() and queued(broker) == []
    clock.advance(1)
    assert parking.sync() and queued(broker) == ["bad"]
    assert poison.list_messages(broker)[0]["state"] == "redriven"
    handler.bad.clear()
    assert guard.drain(handler) == 1 and handler.done == ["bad"]


def test_a_parked_message_whose_conversation_ended_stays_listed_with_the_reason(
        broker: Broker, clock: FakeClock) -> None:
    handle = dialog(broker, "bad")
    guard = PoisonGuard(broker, "Work", threshold=0, policy=Policy.park(delay=10))
    assert guard.process_one(Handler("bad")) and guard.process_one(Handler("bad"))
    with broker.transaction() as tx:
        tx.end_conversation(handle, cleanup=True)
    clock.advance(10)
    assert poison.redrive_due(broker) == 0
    [record] = poison.list_messages(broker)
    assert record["state"] == "parked" and record["resend_at"] is None
    assert "cannot re-drive" in record["redrive_error"]


def test_a_guarded_activated_procedure_sets_poison_aside_and_keeps_the_queue_enabled(
        broker: Broker) -> None:
    done = threading.Event()
    handler = Handler("bad")

    def finish(tx: Transaction, msg: Message) -> None:
        handler(tx, msg)
        if len(handler.done) == 3:
            done.set()

    broker.create_queue("Orders")  # poison_message_handling on: threshold 2 keeps under 5
    broker.create_service("OrdersSvc", "Orders", ["DEFAULT"])
    broker.alter_queue("Orders", activation=Activation(
        poison.guarded(finish, threshold=2, policy=Policy.log())))
    broker.start()
    with broker.transaction() as tx:
        for body in ("a", "bad", "b", "c"):
            tx.send(tx.begin_dialog("Init", "OrdersSvc"), body=body)
    assert done.wait(WAIT)
    svc = broker._activation
    assert svc.wait_for(lambda: svc.running_tasks() == 0, WAIT)
    assert sorted(handler.done) == ["a", "b", "c"]
    assert broker.catalog.queue("Orders").status  # never disabled
    [record] = poison.list_messages(broker, queue="Orders")
    assert record["attempts"] == 3 and record["message_body"] == b"bad"
