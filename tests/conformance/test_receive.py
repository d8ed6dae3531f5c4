"""RECEIVE and GET CONVERSATION GROUP: one group per call, ordering, locks, filters."""

from __future__ import annotations

import pytest
from support.helpers import DEADLINE, Background, on_hook

import sbroker
from sbroker import Broker, FakeClock


def dialog(b: Broker, *bodies: str, related: str | None = None) -> str:
    with b.transaction() as tx:
        h = tx.begin_dialog("InitService", "TargetService", related_conversation=related)
        for body in bodies:
            tx.send(h, body=body)
    return h


def test_one_call_returns_messages_of_one_group_only(pair: Broker) -> None:
    dialog(pair, "a1", "a2")
    dialog(pair, "b1")
    with pair.transaction() as tx:
        first = tx.receive("TargetQueue")
        assert [m.text() for m in first] == ["a1", "a2"]
        assert len({m.conversation_group_id for m in first}) == 1
        second = tx.receive("TargetQueue")
        assert [m.text() for m in second] == ["b1"]
        assert tx.receive("TargetQueue") == []


def test_a_locked_group_is_not_handed_to_a_second_transaction(pair: Broker) -> None:
    dialog(pair, "a1", "a2")
    dialog(pair, "b1")
    holder = pair.transaction()
    got = holder.receive("TargetQueue", top=1)
    assert [m.text() for m in got] == ["a1"]
    with pair.transaction() as other:
        assert [m.text() for m in other.receive("TargetQueue")] == ["b1"]
        assert other.receive("TargetQueue") == []  # a2's group is still locked
        assert other.get_conversation_group("TargetQueue") is None
    holder.rollback()
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue")] == ["a1", "a2"]


def test_related_conversations_are_received_together(pair: Broker) -> None:
    a = dialog(pair, "a")
    dialog(pair, "other")
    with pair.transaction() as tx:
        tx.send(a, body="a-again")
    # Target endpoints are in their own groups; the initiator side shares one group.
    with pair.transaction() as tx:
        msgs = tx.receive("TargetQueue")
        for m in msgs:
            tx.send(m.conversation_handle, body=f"re:{m.text()}")
    with pair.transaction() as tx:
        b = tx.begin_dialog("InitService", "TargetService", related_conversation=a)
        tx.send(b, body="b")
    with pair.transaction() as tx:
        while batch := tx.receive("TargetQueue"):
            for m in batch:
                tx.send(m.conversation_handle, body=f"re:{m.text()}")
    with pair.transaction() as tx:
        replies = tx.receive("InitQueue")
    assert sorted(m.text() for m in replies) == ["re:a", "re:a-again", "re:b"]
    assert len({m.conversation_group_id for m in replies}) == 1


def test_filters_by_conversation_and_group(pair: Broker) -> None:
    dialog(pair, "a")
    dialog(pair, "b1", "b2")
    [b_target] = {m.conversation_handle for m in pair.peek("TargetQueue") if m.text() == "b1"}
    with pair.transaction() as tx:
        msgs = tx.receive("TargetQueue", conversation_handle=b_target)
        assert [m.text() for m in msgs] == ["b1", "b2"]
    group = pair.peek("TargetQueue")[0].conversation_group_id
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue", conversation_group_id=group)] == ["a"]


def test_get_conversation_group_locks_and_returns_the_group(pair: Broker) -> None:
    dialog(pair, "a")
    with pair.transaction() as tx:
        group = tx.get_conversation_group("TargetQueue")
        assert group == pair.peek("TargetQueue")[0].conversation_group_id
        assert tx.locked_groups == [group]
        with pair.transaction() as other:
            assert other.receive("TargetQueue") == []
        assert [m.text() for m in tx.receive("TargetQueue", conversation_group_id=group)] == ["a"]


def test_higher_priority_group_is_served_first(pair: Broker) -> None:
    pair.create_service("Urgent", "TargetQueue", ["DEFAULT"])
    pair.create_broker_priority("hi", local_service="Urgent", priority_level=9)
    dialog(pair, "normal")
    with pair.transaction() as tx:
        h = tx.begin_dialog("InitService", "Urgent")
        tx.send(h, body="urgent")
    with pair.transaction() as tx:
        [m] = tx.receive("TargetQueue")
    assert (m.text(), m.priority) == ("urgent", 9)


def test_receive_from_a_disabled_queue_is_9617_and_sends_wait(pair: Broker) -> None:
    pair.alter_queue("TargetQueue", status=False)
    dialog(pair, "waits")
    [row] = pair.view("transmission_queue")
    assert "disabled" in row["transmission_status"]
    with pair.transaction() as tx, pytest.raises(sbroker.QueueDisabledError) as e:
        tx.receive("TargetQueue")
    assert e.value.number == 9617
    pair.alter_queue("TargetQueue", status=True)
    assert pair.view("transmission_queue") == []
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue")] == ["waits"]


def test_a_waiting_receive_fails_with_9617_once_its_queue_is_disabled(pair: Broker) -> None:
    waiting = on_hook(pair, "waiting", "TargetQueue")

    def wait() -> list[sbroker.Message]:
        with pair.transaction() as tx:
            return tx.receive("TargetQueue", timeout=60)

    reader = Background(wait, "reader")
    assert waiting.wait(DEADLINE)
    pair.alter_queue("TargetQueue", status=False)
    with pytest.raises(sbroker.QueueDisabledError) as e:
        reader.result()
    assert e.value.number == 9617


def test_five_rolled_back_receives_disable_the_queue(pair: Broker) -> None:
    dialog(pair, "poison")
    for _ in range(4):
        with pytest.raises(ValueError), pair.transaction() as tx:
            assert tx.receive("TargetQueue")
            raise ValueError
    with pair.transaction() as tx:  # a committed receive resets the count
        assert tx.receive("TargetQueue")
    dialog(pair, "poison again")
    for _ in range(5):
        with pytest.raises(ValueError), pair.transaction() as tx:
            assert tx.receive("TargetQueue")
            raise ValueError
    with pair.transaction() as tx, pytest.raises(sbroker.QueueDisabledError):
        tx.receive("TargetQueue")


def test_poison_handling_off_never_disables(pair: Broker) -> None:
    pair.alter_queue("TargetQueue", poison_message_handling=False)
    dialog(pair, "poison")
    for _ in range(7):
        with pytest.raises(ValueError), pair.transaction() as tx:
            assert tx.receive("TargetQueue")
            raise ValueError
    with pair.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQueue")] == ["poison"]


def test_move_conversation_moves_its_messages(pair: Broker) -> None:
    dialog(pair, "a")
    dialog(pair, "b")
    rows = pair.peek("TargetQueue")
    a, b = rows[0], rows[1]
    with pair.transaction() as tx:
        tx.move_conversation(b.conversation_handle, a.conversation_group_id)
        with pytest.raises(sbroker.NotFoundError):
            tx.move_conversation(a.conversation_handle, "00000000-0000-0000-0000-000000000001")
    with pair.transaction() as tx:
        assert sorted(m.text() for m in tx.receive("TargetQueue")) == ["a", "b"]


def test_top_and_timeout_arguments_are_checked(pair: Broker) -> None:
    with pair.transaction() as tx:
        with pytest.raises(sbroker.InvalidArgumentError, match="top"):
            tx.receive("TargetQueue", top=-1)
        with pytest.raises(sbroker.InvalidArgumentError, match="timeout"):
            tx.receive("TargetQueue", timeout=-2)
        with pytest.raises(sbroker.NotFoundError, match="Nope"):
            tx.receive("Nope")
        assert tx.receive("TargetQueue", top=0) == []


def test_timer_fires_a_dialog_timer_that_comes_first(db_path) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    with Broker.open(db_path, clock=clock) as b:
        b.create_queue("Q")
        b.create_service("S", "Q", ["DEFAULT"])
        with b.transaction() as tx:
            h = tx.begin_dialog("S", "S")
            tx.begin_conversation_timer(h, 30)
            tx.send(h, body="before the timer")
        with b.transaction() as tx:
            [incoming] = tx.receive("Q")
            tx.begin_conversation_timer(incoming.conversation_handle, 10)
            tx.send(h, body="second")
        timers = b._timers
        clock.advance(9)
        assert timers.run_once() == pytest.approx(clock.now() + 1)
        clock.advance(1)
        timers.run_once()
        with b.transaction() as tx:
            msgs = tx.receive("Q")
        assert [m.message_type_name for m in msgs] == [sbroker.DIALOG_TIMER, "DEFAULT"]
        assert msgs[0].conversation_handle == incoming.conversation_handle
        clock.advance(20)
        timers.run_once()
        with b.transaction() as tx:
            [timer] = tx.receive("Q")
        assert (timer.message_type_name, timer.conversation_handle) == (sbroker.DIALOG_TIMER, h)


def test_lifetime_expiry_errors_both_sides(db_path) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    with Broker.open(db_path, clock=clock) as b:
        b.create_queue("Q1")
        b.create_queue("Q2")
        b.create_service("A", "Q1")
        b.create_service("B", "Q2", ["DEFAULT"])
        with b.transaction() as tx:
            h = tx.begin_dialog("A", "B", lifetime=60)
            tx.send(h, body="hi")
        clock.advance(61)
        b._timers.run_once()
        with b.transaction() as tx:
            [mine] = tx.receive("Q1")
            theirs = tx.receive("Q2")
            assert mine.error()[0] == -8489
            assert [m.message_type_name for m in theirs] == ["DEFAULT", sbroker.ERROR]
            with pytest.raises(sbroker.ConversationStateError):
                tx.send(h, body="too late")
            tx.end_conversation(h)
            tx.end_conversation(theirs[0].conversation_handle)
        assert b.view("conversation_endpoints") == []


def test_peek_pages_through_a_queue_in_receive_order(pair: sbroker.Broker) -> None:
    with pair.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        for i in range(5):
            tx.send(handle, body=str(i))
    pages = [[m.text() for m in pair.peek("TargetQueue", top=2, offset=k)] for k in (0, 2, 4)]
    assert pages == [["0", "1"], ["2", "3"], ["4"]]
    with pytest.raises(sbroker.InvalidArgumentError, match="offset must be an int >= 0"):
        pair.peek("TargetQueue", offset=-1)
