"""Conversation priorities (docs/concepts.md): matching precedence, each endpoint's own point of
view, and the order RECEIVE / GET CONVERSATION GROUP serve groups and conversations in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sbroker import Broker
from sbroker.core.priority import ANY, BrokerPriority, match_priority

CONTRACT, LOCAL, REMOTE = "C", "Local", "Remote"
ORDER = [  # the precedence table of docs/concepts.md, most specific first
    (CONTRACT, LOCAL, REMOTE), (CONTRACT, LOCAL, ANY), (CONTRACT, ANY, REMOTE),
    (CONTRACT, ANY, ANY), (ANY, LOCAL, REMOTE), (ANY, LOCAL, ANY), (ANY, ANY, REMOTE),
    (ANY, ANY, ANY),
]


def test_matching_follows_the_seed_precedence_table() -> None:
    levels = {combo: i + 1 for i, combo in enumerate(ORDER)}
    for start in range(len(ORDER)):
        present = ORDER[start:]  # the more specific ones dropped: the next one must win
        for arrangement in (present, present[::-1]):  # whatever the order they were created
            prios = [BrokerPriority(f"p{i}", *c, levels[c]) for i, c in enumerate(arrangement)]
            assert match_priority(prios, CONTRACT, LOCAL, REMOTE) == levels[ORDER[start]]


def test_non_matching_priorities_are_ignored_and_the_default_is_5() -> None:
    prios = [
        BrokerPriority("other contract", "X", ANY, ANY, 9),
        BrokerPriority("other local", ANY, "X", ANY, 9),
        BrokerPriority("other remote", ANY, ANY, "X", 9),
    ]
    assert match_priority(prios, CONTRACT, LOCAL, REMOTE) == 5
    assert match_priority([], CONTRACT, LOCAL, REMOTE) == 5


@pytest.fixture
def b(broker: Broker) -> Iterator[Broker]:
    broker.create_queue("InitQ")
    broker.create_queue("TargetQ")
    for name in ("Low", "High"):
        broker.create_contract(name, {"DEFAULT": "any"})
    broker.create_service("Init", "InitQ")
    broker.create_service("Target", "TargetQ", ["DEFAULT", "Low", "High"])
    yield broker


def endpoint_priorities(broker: Broker, handle: str) -> dict[str, int]:
    """{'initiator': level, 'target': level} for the conversation of ``handle``."""
    rows = broker.view("conversation_endpoints")
    conv = next(r["conversation_id"] for r in rows if r["conversation_handle"] == handle)
    return {("initiator" if r["is_initiator"] else "target"): r["priority"]
            for r in rows if r["conversation_id"] == conv}


def test_each_endpoint_gets_its_level_from_its_own_point_of_view(b: Broker) -> None:
    b.create_broker_priority("InitSide", contract="DEFAULT", local_service="Init",
                             remote_service="Target", priority_level=8)
    b.create_broker_priority("TargetSide", contract="DEFAULT", local_service="Target",
                             remote_service="Init", priority_level=3)
    with b.transaction() as tx:
        handle = tx.begin_dialog("Init", "Target")
        tx.send(handle, body="request")
    assert endpoint_priorities(b, handle) == {"initiator": 8, "target": 3}
    with b.transaction() as tx:
        [request] = tx.receive("TargetQ")
        tx.send(request.conversation_handle, body="reply")
    assert request.priority == 3  # received from the target queue at the target's level
    with b.transaction() as tx:
        [reply] = tx.receive("InitQ")
    assert reply.priority == 8


def test_one_priority_naming_the_contract_covers_both_endpoints(b: Broker) -> None:
    b.create_broker_priority("Both", contract="High", priority_level=9)
    with b.transaction() as tx:
        handle = tx.begin_dialog("Init", "Target", "High")
        tx.send(handle, body="x")
        other = tx.begin_dialog("Init", "Target", "Low")
        tx.send(other, body="y")
    assert endpoint_priorities(b, handle) == {"initiator": 9, "target": 9}
    assert endpoint_priorities(b, other) == {"initiator": 5, "target": 5}


def test_a_level_is_kept_until_the_conversation_ends(b: Broker) -> None:
    b.create_broker_priority("P", contract="High", priority_level=7)
    with b.transaction() as tx:
        handle = tx.begin_dialog("Init", "Target", "High")
        tx.send(handle, body="first")
    b.drop_broker_priority("P")
    b.create_broker_priority("P2", contract="High", priority_level=2)
    with b.transaction() as tx:
        tx.send(handle, body="second")
    assert endpoint_priorities(b, handle) == {"initiator": 7, "target": 7}
    assert [m.priority for m in b.peek("TargetQ")] == [7, 7]


def send_on(b: Broker, contract: str, *bodies: str) -> str:
    with b.transaction() as tx:
        handle = tx.begin_dialog("Init", "Target", contract)
        for body in bodies:
            tx.send(handle, body=body)
    return handle


def test_receive_serves_the_highest_priority_group_first(b: Broker) -> None:
    b.create_broker_priority("L", contract="Low", priority_level=2)
    b.create_broker_priority("H", contract="High", priority_level=9)
    send_on(b, "Low", "low1", "low2")
    send_on(b, "DEFAULT", "mid")
    send_on(b, "High", "high1", "high2")
    order = []
    for _ in range(3):
        with b.transaction() as tx:
            msgs = tx.receive("TargetQ")
        order.append([m.text() for m in msgs])
        assert len({m.conversation_group_id for m in msgs}) == 1
    assert order == [["high1", "high2"], ["mid"], ["low1", "low2"]]


def test_a_group_takes_the_highest_priority_of_its_conversations_with_messages(
        b: Broker) -> None:
    b.create_broker_priority("L", contract="Low", priority_level=2)
    b.create_broker_priority("H", contract="High", priority_level=9)
    send_on(b, "Low", "low1")
    send_on(b, "DEFAULT", "mid1")
    send_on(b, "High", "high1")
    by_text = {m.text(): m for m in b.peek("TargetQ")}
    low_group = by_text["low1"].conversation_group_id
    with b.transaction() as tx:  # the high conversation joins the low one's group
        tx.move_conversation(by_text["high1"].conversation_handle, low_group)
    with b.transaction() as tx:
        msgs = tx.receive("TargetQ")
    # the group (level 9 through its high conversation) comes first; inside it the
    # conversations by descending priority
    assert [m.text() for m in msgs] == ["high1", "low1"]
    assert [m.priority for m in msgs] == [9, 2]
    with b.transaction() as tx:  # high conversation has no messages now: the group is 2
        tx.send(by_text["low1"].conversation_handle, body="reply")
    send_on(b, "Low", "low2")
    with b.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQ")] == ["mid1"]


def test_get_conversation_group_returns_the_highest_priority_group(b: Broker) -> None:
    b.create_broker_priority("H", contract="High", priority_level=10)
    send_on(b, "DEFAULT", "a")
    send_on(b, "High", "b")
    high_group = next(m.conversation_group_id for m in b.peek("TargetQ") if m.text() == "b")
    with b.transaction() as tx:
        assert tx.get_conversation_group("TargetQ") == high_group
        with b.transaction() as other:  # locked: another transaction gets the next one
            got = other.get_conversation_group("TargetQ")
            assert got is not None and got != high_group


def test_inside_a_conversation_messages_keep_their_sequence(b: Broker) -> None:
    b.create_broker_priority("H", contract="High", priority_level=10)
    send_on(b, "High", *[f"m{i}" for i in range(20)])
    with b.transaction() as tx:
        msgs = tx.receive("TargetQ")
    assert [m.text() for m in msgs] == [f"m{i}" for i in range(20)]
    assert [m.message_sequence_number for m in msgs] == list(range(20))


def test_one_high_priority_message_jumps_a_backlog(b: Broker) -> None:
    b.create_broker_priority("L", contract="Low", priority_level=1)
    b.create_broker_priority("H", contract="High", priority_level=10)
    with b.transaction() as tx:
        for i in range(300):
            tx.send(tx.begin_dialog("Init", "Target", "Low"), body=f"low{i}")
    send_on(b, "High", "urgent")
    with b.transaction() as tx:
        assert [m.text() for m in tx.receive("TargetQ")] == ["urgent"]


def test_honor_broker_priority_is_stored_and_the_transmission_queue_keeps_the_level(
        b: Broker) -> None:
    assert b.honor_broker_priority is False
    b.honor_broker_priority = True
    assert b.honor_broker_priority is True
    b.create_broker_priority("H", contract="High", priority_level=9)
    b.alter_queue("TargetQ", status=False)  # messages wait in the transmission queue
    send_on(b, "High", "waiting")
    [row] = b.view("transmission_queue")
    assert row["priority"] == 9
    b.alter_queue("TargetQ", status=True)
    assert [m.text() for m in b.peek("TargetQ")] == ["waiting"]
