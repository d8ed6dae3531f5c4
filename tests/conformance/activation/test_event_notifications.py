"""QUEUE_ACTIVATION and BROKER_QUEUE_DISABLED event notifications, and the engine's
five-rollback poison detection (docs/concepts.md, docs/activation.md, docs/poison.md)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sbroker import (
    Broker,
    FakeClock,
    Message,
    QueueDisabledError,
)
from sbroker.core.messages import EVENT_NOTIFICATION
from sbroker.engine.events import SENDER, create_notification_target, parse_event_instance
from sbroker.services.activation.service import PUBLISH_SECONDS

POST = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"


def events(broker: Broker, queue: str = "EventQ") -> list[Message]:
    """Receive every message waiting in the notification queue (all groups)."""
    out: list[Message] = []
    while True:
        with broker.transaction() as tx:
            got = tx.receive(queue)
        if not got:
            return out
        out.extend(got)


@pytest.fixture
def external(broker: Broker) -> Broker:
    """A work queue "TQ" (no internal activation) watched by a QUEUE_ACTIVATION subscription."""
    broker.create_queue("TQ")
    broker.create_service("Target", "TQ", ["DEFAULT"])
    create_notification_target(broker.engine, "EventQ")
    broker.create_event_notification("ActivateTQ", "TQ", "QUEUE_ACTIVATION", "EventQ")
    return broker


def test_queue_activation_is_an_event_notification_message(
        external: Broker, send: Callable[..., None]) -> None:
    b = external
    b.start()
    send(b, 1)
    assert b._activation.sync()
    got = events(b)
    assert len(got) == 1
    msg = got[0]
    assert msg.message_type_name == EVENT_NOTIFICATION
    assert msg.service_contract_name == POST
    assert msg.service_name == "EventQ"
    fields = parse_event_instance(msg.message_body)
    assert fields["EventType"] == "QUEUE_ACTIVATION"
    assert fields["QueueName"] == fields["ObjectName"] == "TQ"
    assert fields["DatabaseName"] and fields["PostTime"].startswith("2023-11-14T22:13:20")
    row = b.view("dm_broker_queue_monitors")[0]
    assert row["activation_kind"] == "external" and row["state"] == "NOTIFIED"
    assert row["notifications_sent"] == 1


def test_no_further_notification_until_a_receive_or_the_interval(
        external: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    b = external
    svc = b._activation
    b.start()
    send(b, 1)
    assert svc.sync()
    send(b, 3)
    clock.advance(4.9)
    assert svc.sync()
    assert len(events(b)) == 1  # NOTIFIED: waiting for the external reader
    clock.advance(0.1)  # nobody received within monitor_interval: notify again
    assert svc.sync()
    second = events(b)
    assert len(second) == 1
    with b.transaction() as tx:  # the external reader drains the queue
        while tx.receive("TQ"):
            pass
    assert svc.sync()
    assert b.view("dm_broker_queue_monitors")[0]["state"] == "RECEIVES_OCCURRING"
    send(b, 1)  # arriving at an empty queue: notified again at once
    assert svc.sync()
    third = events(b)
    assert len(third) == 1
    assert third[0].conversation_handle == second[0].conversation_handle  # one dialog reused


def test_two_started_brokers_on_one_database_send_one_notification_per_interval(
        external: Broker, clock: FakeClock, db_path: str, send: Callable[..., None]) -> None:
    """Each started broker monitors the queue (on PostgreSQL, one per host); together they
    notify as one broker would."""
    a = external
    with Broker.open(db_path, clock=clock, monitor_interval=5) as b:
        a.start()
        b.start()
        send(a, 1)
        assert a._activation.sync() and b._activation.sync()
        assert len(events(a)) == 1
        clock.advance(5)  # nobody received: one more, from whichever monitor looks first
        assert b._activation.sync() and a._activation.sync()
        assert len(events(a)) == 1
        clock.advance(PUBLISH_SECONDS)  # the other broker's row reaches the view by then
        assert b._activation.sync() and a._activation.sync()
        sent = sum(row["notifications_sent"] for row in a.view("dm_broker_queue_monitors"))
        assert sent == 2


def test_a_monitor_row_reaches_another_brokers_view_within_the_publish_interval(
        external: Broker, clock: FakeClock, db_path: str, send: Callable[..., None]) -> None:
    """A broker writes its monitor rows at most every PUBLISH_SECONDS. A change the limit
    held back is written once the interval has passed, not at the monitor's next decision
    (up to monitor_interval later)."""
    b = external
    svc = b._activation
    b.start()
    assert svc.sync()  # its rows are written now: the next change is held back a while
    send(b, 1)
    assert svc.sync()
    assert len(events(b)) == 1
    assert svc.sync()  # the pass the RECEIVE of the notification asked for is done
    with Broker.open(db_path, clock=clock) as other:
        clock.advance(PUBLISH_SECONDS)
        assert svc.sync()
        [row] = other.view("dm_broker_queue_monitors")
        assert (row["state"], row["notifications_sent"]) == ("NOTIFIED", 1)


def test_a_subscriber_ending_the_dialog_gets_a_new_one_and_nothing_piles_up(
        external: Broker, clock: FakeClock, send: Callable[..., None]) -> None:
    b = external
    svc = b._activation
    b.start()
    send(b, 1)
    assert svc.sync()
    first = events(b)[0]
    with b.transaction() as tx:
        tx.end_conversation(first.conversation_handle)
        while tx.receive("TQ"):
            pass
    send(b, 1)
    assert svc.sync()
    second = events(b)[0]
    assert second.conversation_handle != first.conversation_handle
    handles = {r["conversation_handle"] for r in b.view("conversation_endpoints")
               if SENDER in (r["service_name"], r["far_service"])}
    assert first.conversation_handle not in handles
    assert len([r for r in b.view("conversation_endpoints") if r["service_name"] == SENDER]) == 1


def rollback_receives(broker: Broker, queue: str, times: int) -> None:
    for _ in range(times):
        with pytest.raises(RuntimeError), broker.transaction() as tx:
            assert tx.receive(queue)
            raise RuntimeError("cannot process")


@pytest.fixture
def watched(broker: Broker) -> Broker:
    broker.create_queue("TQ")
    broker.create_service("Target", "TQ", ["DEFAULT"])
    create_notification_target(broker.engine, "EventQ")
    broker.create_event_notification("TQDisabled", "TQ", "BROKER_QUEUE_DISABLED", "EventQ")
    return broker


def status(broker: Broker, queue: str = "TQ") -> bool:
    return bool(broker.catalog.queue(queue).status)


def test_five_rolled_back_receives_disable_the_queue_and_raise_the_event(
        watched: Broker, send: Callable[..., None]) -> None:
    b = watched
    send(b, 1)
    rollback_receives(b, "TQ", 4)
    assert status(b) and events(b) == []
    rollback_receives(b, "TQ", 1)
    assert not status(b)
    with pytest.raises(QueueDisabledError) as info, b.transaction() as tx:
        tx.receive("TQ")
    assert info.value.number == 9617
    got = events(b)
    assert len(got) == 1
    fields = parse_event_instance(got[0].message_body)
    assert fields["EventType"] == "BROKER_QUEUE_DISABLED" and fields["QueueName"] == "TQ"
    b.alter_queue("TQ", status=True)
    with b.transaction() as tx:
        assert [m.text() for m in tx.receive("TQ")] == ["m0"]  # nothing was lost


def test_a_committed_receive_resets_the_rollback_count(
        watched: Broker, send: Callable[..., None]) -> None:
    b = watched
    send(b, 3)
    rollback_receives(b, "TQ", 4)
    with b.transaction() as tx:
        assert tx.receive("TQ")
    rollback_receives(b, "TQ", 4)
    assert status(b) and events(b) == []
    rollback_receives(b, "TQ", 1)
    assert not status(b)


def test_with_poison_message_handling_off_nothing_is_disabled(
        watched: Broker, send: Callable[..., None]) -> None:
    b = watched
    b.alter_queue("TQ", poison_message_handling=False)
    send(b, 1)
    rollback_receives(b, "TQ", 12)
    assert status(b)
    assert events(b) == []
