"""One COMMIT with one SEND on a conversation whose local peer conversed at its last commit:
the message goes straight into the peer's queue in one statement that checks in the
database what the commit assumes. Whatever changed since (the peer's state, the catalog, a
message waiting in the transmission queue, the body), the SEND takes the ordinary path."""

from __future__ import annotations

import pytest
from support.helpers import drain

import sbroker


def _conversing(broker: sbroker.Broker, service: str = "TargetService",
                contract: str = "DEFAULT", message_type: str = "DEFAULT",
                body: bytes = b"hello") -> tuple[str, str]:
    """A dialog whose target exists and has received its first message: (initiator, target)."""
    with broker.transaction() as tx:
        init = tx.begin_dialog("InitService", service, contract)
        tx.send(init, message_type, body)
    with broker.transaction() as tx:
        (first,) = tx.receive("TargetQueue")
    return init, first.conversation_handle


def test_single_and_batched_sends_number_one_sequence_each_way(pair: sbroker.Broker) -> None:
    init, target = _conversing(pair)
    with pair.transaction() as tx:
        tx.send(target, "DEFAULT", b"reply 0")
    expected: dict[str, list[str]] = {init: ["hello"], target: ["reply 0"]}
    for i in range(1, 8):
        with pair.transaction() as tx:
            if i % 3 == 0:  # two on each end in one commit
                for handle in (init, target, init, target):
                    tx.send(handle, "DEFAULT", f"{handle[:4]} {i}")
                    expected[handle].append(f"{handle[:4]} {i}")
            else:  # one, alternating ends
                handle = init if i % 2 else target
                tx.send(handle, "DEFAULT", f"{handle[:4]} {i}")
                expected[handle].append(f"{handle[:4]} {i}")
    at_target = drain(pair, "TargetQueue")
    at_init = drain(pair, "InitQueue")
    assert [m.text() for m in at_target] == expected[init][1:]
    assert [m.text() for m in at_init] == expected[target]
    assert [m.message_sequence_number for m in at_target] == list(range(1, len(expected[init])))
    assert [m.message_sequence_number for m in at_init] == list(range(len(expected[target])))


def test_a_send_after_the_peer_ended_elsewhere_is_refused_at_commit(
        pair: sbroker.Broker, db_path: str) -> None:
    """Another broker on the database ends the conversation: this one's snapshot of the
    initiator still says conversing, so the statement passes; the commit does not."""
    init, target = _conversing(pair)
    with pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"second")  # this broker now knows the peer converses
    with sbroker.Broker.open(db_path) as other, other.transaction() as tx:
        tx.end_conversation(target)
    with pytest.raises(sbroker.BrokerError) as e, pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"too late")
    assert e.value.number == 8429
    texts = [m.text() for m in drain(pair, "TargetQueue")]
    assert "too late" not in texts


def test_a_send_after_another_broker_disabled_the_target_queue_waits(
        pair: sbroker.Broker, db_path: str) -> None:
    """DDL elsewhere changes the catalog this broker's snapshot (kept a few ms) still shows:
    the message must not enter the disabled queue, and a later one must not overtake it."""
    init, _ = _conversing(pair)
    with pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"1")
    with sbroker.Broker.open(db_path) as other:
        other.alter_queue("TargetQueue", status=False)
    with pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"2")
    (waiting,) = pair.view("transmission_queue")
    assert "disabled" in waiting["transmission_status"]
    with pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"3")  # behind "2"
    assert len(pair.view("transmission_queue")) == 2
    with sbroker.Broker.open(db_path) as other:
        other.alter_queue("TargetQueue", status=True)  # delivers what waits
    with pair.transaction() as tx:
        tx.send(init, "DEFAULT", b"4")
    got = [(m.text(), m.message_sequence_number) for m in drain(pair, "TargetQueue")]
    assert got == [("1", 1), ("2", 2), ("3", 3), ("4", 4)]


def test_a_body_failing_validation_on_a_conversing_dialog_errors(pair: sbroker.Broker) -> None:
    pair.create_message_type("J", validation="well_formed_json")
    pair.create_contract("C", {"J": "any"})
    pair.create_service("JsonService", "TargetQueue", ["C"])
    init, _ = _conversing(pair, "JsonService", "C", "J", b"{}")
    with pair.transaction() as tx:
        tx.send(init, "J", b"[1]")
    with pair.transaction() as tx:
        tx.send(init, "J", b"not json")
    assert [m.text() for m in drain(pair, "TargetQueue")] == ["[1]"]
    (error,) = drain(pair, "InitQueue")
    assert error.is_error and error.error()[0] == -9615
