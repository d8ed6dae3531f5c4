"""Conversation timers and lifetimes fire by themselves while the broker is started, on a
fake clock: nothing happens before the time, the message arrives after it; and the Errors
the broker itself generates queue up behind what is already there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.helpers import (
    Background,
    Child,
    begin_and_send,
    bodies,
    make_pair,
    on_hook,
    table_counts,
)

from sbroker import (
    DIALOG_TIMER,
    ERROR,
    Broker,
    ConversationStateError,
    FakeClock,
)

LIFETIME_EXPIRED = -8489


@pytest.fixture
def db_path(database: str) -> str:
    """The test's broker database, on each backend (tests/conftest.py's ``database``)."""
    return database


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def started(db_path: Path, clock: FakeClock) -> Iterator[Broker]:
    b = Broker.open(db_path, clock=clock, start=True)
    try:
        make_pair(b)
        yield b
    finally:
        b.close()


def _waiting_receive(b: Broker, queue: str) -> Background:
    """A RECEIVE that waits forever (in fake time) for ``queue``; parked before returning."""
    parked = on_hook(b, "waiting", queue)

    def run() -> list[tuple[str, bytes]]:
        with b.transaction() as tx:
            got = tx.receive(queue, timeout=None)
            return [(m.message_type_name, m.message_body) for m in got]

    waiter = Background(run, f"receive-{queue}")
    assert parked.wait(60), "the RECEIVE never started waiting"
    return waiter


@pytest.mark.parametrize(("timeouts", "quiet", "fires"), [([30], 29, 2), ([30, 100], 31, 70)],
                         ids=["set", "reset by a second call"])
def test_a_dialog_timer_message_arrives_once_its_time_has_passed(
    started: Broker, clock: FakeClock, timeouts: list[float], quiet: float, fires: float,
) -> None:
    handle = begin_and_send(started)
    for timeout in timeouts:
        with started.transaction() as tx:
            tx.begin_conversation_timer(handle, timeout)
    waiter = _waiting_receive(started, "InitQueue")
    clock.advance(quiet)
    assert not waiter.done.is_set()
    clock.advance(fires)
    assert waiter.result() == [(DIALOG_TIMER, b"")]


def test_a_dialog_timer_is_received_before_other_messages_of_its_conversation(
    started: Broker, clock: FakeClock,
) -> None:
    handle = begin_and_send(started, "question")
    with started.transaction() as tx:
        tx.begin_conversation_timer(handle, 10)
        got = tx.receive("TargetQueue")
        tx.send(got[0].conversation_handle, body="answer")
    arrived = on_hook(started, "arrived", "InitQueue")
    clock.advance(11)
    assert arrived.wait(60), "the timer never fired"
    with started.transaction() as tx:
        got = tx.receive("InitQueue")
    assert [(m.message_type_name, m.message_body) for m in got] == [
        (DIALOG_TIMER, b""), ("DEFAULT", b"answer")]


def test_an_expired_lifetime_gives_both_sides_an_error_and_refuses_sends(
    started: Broker, clock: FakeClock,
) -> None:
    with started.transaction() as tx:
        initiator = tx.begin_dialog("InitService", "TargetService", lifetime=60)
        for body in ("m0", "m1", "m2"):
            tx.send(initiator, body=body)
    with started.transaction() as tx:
        target = tx.receive("TargetQueue", top=1)[0].conversation_handle
    waiter = _waiting_receive(started, "InitQueue")
    clock.advance(59)
    assert not waiter.done.is_set()
    clock.advance(2)
    [(kind, body)] = waiter.result()
    assert kind == ERROR and str(LIFETIME_EXPIRED) in body.decode()
    with started.transaction() as tx:
        got = tx.receive("TargetQueue")
    # The target still gets what was already in its queue, then the Error.
    assert [m.message_type_name for m in got] == ["DEFAULT", "DEFAULT", ERROR]
    assert bodies(got[:2]) == ["m1", "m2"]
    assert got[-1].error()[0] == LIFETIME_EXPIRED
    for handle in (initiator, target):
        with pytest.raises(ConversationStateError) as refused, started.transaction() as tx:
            tx.send(handle, body="too late")
        assert refused.value.number == 8429
    with started.transaction() as tx:
        tx.end_conversation(initiator)
        tx.end_conversation(target)
    assert table_counts(started)["sb_endpoints"] == 0


def test_a_broker_that_is_not_started_fires_nothing(db_path: Path, clock: FakeClock) -> None:
    with Broker.open(db_path, clock=clock) as b:
        make_pair(b)
        handle = begin_and_send(b)
        with b.transaction() as tx:
            tx.begin_conversation_timer(handle, 5)
        clock.advance(10)
        assert b.peek("InitQueue") == []
        arrived = on_hook(b, "arrived", "InitQueue")
        b.start()  # the overdue timer fires as soon as the services run
        assert arrived.wait(60)
        assert [m.message_type_name for m in b.peek("InitQueue")] == [DIALOG_TIMER]


def test_a_broker_error_comes_after_the_messages_already_in_the_senders_queue(
    db_path: Path,
) -> None:
    with Broker.open(db_path) as b:
        b.create_message_type("Json", "well_formed_json")
        b.create_contract("JsonContract", {"Json": "any"})
        b.create_queue("InitQueue")
        b.create_queue("TargetQueue")
        b.create_service("InitService", "InitQueue")
        b.create_service("TargetService", "TargetQueue", ["JsonContract"])
        with b.transaction() as tx:
            initiator = tx.begin_dialog("InitService", "TargetService", "JsonContract")
            tx.send(initiator, "Json", "{}")
        with b.transaction() as tx:
            target = tx.receive("TargetQueue")[0].conversation_handle
            for i in range(3):
                tx.send(target, "Json", f'{{"reply": {i}}}')
        with b.transaction() as tx:
            tx.send(initiator, "Json", "this is not JSON")  # fails validation at the target
        with b.transaction() as tx:
            got = tx.receive("InitQueue")
        assert [m.message_type_name for m in got] == ["Json", "Json", "Json", ERROR]
        assert [m.json() for m in got[:3]] == [{"reply": 0}, {"reply": 1}, {"reply": 2}]


def test_a_started_broker_fires_a_timer_set_by_another_process(
    db_path: Path, spawn: Callable[..., Child],
) -> None:
    with Broker.open(db_path, start=True) as b:  # the real clock: the child sets real times
        make_pair(b)
        child = spawn("set-timer", db_path, 0.2)
        handle = child.expect("committed")
        assert child.finish() == 0
        with b.transaction() as tx:
            got = tx.receive("InitQueue", timeout=30)
        assert [(m.message_type_name, m.conversation_handle) for m in got] == [
            (DIALOG_TIMER, handle)]
