"""One COMMIT with several SENDs on conversations whose local peers conversed at their last
commit: the messages go straight into the peers' queues, all of them or none. When one of
them cannot (its conversation changed since), the whole commit takes the ordinary path: no
message twice, none lost, numbers without gaps. (SQLite's send path takes out again what
went in before it found out: tests/integration/engine/test_serial_sends.py.)"""

from __future__ import annotations

import pytest
from support.helpers import drain

import sbroker


def _drain(broker: sbroker.Broker, queue: str) -> list[tuple[str, int]]:
    return [(m.text(), m.message_sequence_number) for m in drain(broker, queue)]


def _dialogs(broker: sbroker.Broker, services: list[str]) -> list[str]:
    """Dialogs whose targets have received their first message, and a second message each
    sent in one commit (this broker now knows every peer converses)."""
    with broker.transaction() as tx:
        handles = [tx.begin_dialog("InitService", s) for s in services]
        for h in handles:
            tx.send(h, "DEFAULT", b"0")
    for queue in sorted({"TargetQueue" if s == "TargetService" else "Target2Queue"
                         for s in services}):
        with broker.transaction() as tx:
            tx.receive(queue, top=len(services))
    with broker.transaction() as tx:
        for h in handles:
            tx.send(h, "DEFAULT", b"1")
    return handles


def test_several_messages_per_conversation_in_one_commit_keep_their_order(
        pair: sbroker.Broker) -> None:
    a, b = _dialogs(pair, ["TargetService", "TargetService"])
    for i in range(2, 6):
        with pair.transaction() as tx:
            for h in (a, b, a, b, b):
                tx.send(h, "DEFAULT", f"{h[:4]} {i}")
    got = _drain(pair, "TargetQueue")
    for h in (a, b):
        mine = [(t, n) for t, n in got if t.startswith(h[:4])]
        per_commit = 2 if h == a else 3
        assert [n for _, n in mine] == list(range(2, 2 + 4 * per_commit))
    assert sorted(n for t, n in got if t == "1") == [1, 1]


def test_one_conversation_waiting_sends_the_whole_commit_the_ordinary_way(
        pair: sbroker.Broker, db_path: str) -> None:
    """Another broker disabled b's target queue and sent on b: that message waits in the
    transmission queue. A commit sending on a and b delivers a's once and queues b's behind
    the other broker's; when the queue is enabled again both arrive in order."""
    pair.create_queue("Target2Queue")
    pair.create_service("Target2Service", "Target2Queue", ["DEFAULT"])
    a, b = _dialogs(pair, ["TargetService", "Target2Service"])
    with sbroker.Broker.open(db_path) as other:
        other.alter_queue("Target2Queue", status=False)
        with pair.transaction() as tx:  # this broker's commit sees the new catalog
            tx.send(a, "DEFAULT", b"2")
        with other.transaction() as tx:
            tx.send(b, "DEFAULT", b"2")
    assert len(pair.view("transmission_queue")) == 1
    with pair.transaction() as tx:
        tx.send(a, "DEFAULT", b"3")
        tx.send(b, "DEFAULT", b"3")
    assert len(pair.view("transmission_queue")) == 2
    with sbroker.Broker.open(db_path) as other:
        other.alter_queue("Target2Queue", status=True)  # delivers what waits
    with pair.transaction() as tx:
        tx.send(a, "DEFAULT", b"4")
        tx.send(b, "DEFAULT", b"4")
    expected = [("1", 1), ("2", 2), ("3", 3), ("4", 4)]
    assert _drain(pair, "TargetQueue") == expected
    assert _drain(pair, "Target2Queue") == expected


def test_a_commit_whose_one_peer_ended_elsewhere_leaves_nothing_behind(
        pair: sbroker.Broker, db_path: str) -> None:
    a, b, c = _dialogs(pair, ["TargetService"] * 3)
    _drain(pair, "TargetQueue")
    with sbroker.Broker.open(db_path) as other, other.transaction() as tx:
        ((target, *_),) = [[r["conversation_handle"] for r in other.view(
            "conversation_endpoints") if r["conversation_id"] == tx.conversation_id(c)
            and not r["is_initiator"]]]
        tx.end_conversation(target)
    with pytest.raises(sbroker.BrokerError) as e, pair.transaction() as tx:
        for h in (a, b, c):
            tx.send(h, "DEFAULT", b"too late")
    assert e.value.number == 8429
    with pair.transaction() as tx:
        tx.send(a, "DEFAULT", b"2")
        tx.send(b, "DEFAULT", b"2")
    got = _drain(pair, "TargetQueue")
    assert ("too late", 2) not in got and sorted(got) == [("2", 2), ("2", 2)], got
