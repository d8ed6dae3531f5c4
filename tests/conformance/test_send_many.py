"""One COMMIT that SENDs on many conversations: its sender rows are read in one statement and
its sequence numbers written in one, and neither may go stale when the same commit sends on
both ends of a conversation, begins one, or creates a target with a first message."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sbroker

CONVERSATIONS = 3


def _open(pair: sbroker.Broker) -> tuple[list[str], list[str]]:
    """Three dialogs, each target endpoint created by one message (received, so the queues
    are empty); returns (initiator handles, target handles)."""
    with pair.transaction() as tx:
        inits = [tx.begin_dialog("InitService", "TargetService") for _ in range(CONVERSATIONS)]
        tx.send(inits, "DEFAULT", b"hello")
    with pair.transaction() as tx:
        for _ in range(CONVERSATIONS):
            assert tx.receive("TargetQueue", top=1)
        rows = tx.execute(
            "SELECT handle, conversation_id, is_initiator FROM sb_endpoints"
        ).fetchall()
    target_of = {conv: h for h, conv, init in rows if not init}
    conv_of = {h: conv for h, conv, init in rows if init}
    return inits, [target_of[conv_of[h]] for h in inits]


def _drain(broker: sbroker.Broker) -> list[sbroker.Message]:
    with broker.transaction() as tx:
        got = []
        for queue in ("InitQueue", "TargetQueue"):
            while batch := tx.receive(queue):
                got += batch
    return got


# new_target is function-scoped but hands out a fresh database on every call: safe to share
# between examples.
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 2 * CONVERSATIONS - 1), min_size=1, max_size=30), st.booleans())
def test_interleaved_sends_on_both_ends_keep_numbers_and_order(new_target, order,
                                                               retention):
    """``retention`` keeps the commit off the in-memory fast path: every SEND reads its
    sender again, so the numbers kept for flush must be written before that read."""
    with sbroker.Broker.open(new_target()) as broker:
        for name in ("InitQueue", "TargetQueue"):
            broker.create_queue(name, retention=retention)
        broker.create_service("InitService", "InitQueue")
        broker.create_service("TargetService", "TargetQueue", ["DEFAULT"])
        inits, targets = _open(broker)
        ends = inits + targets
        with broker.transaction() as tx:
            for i, who in enumerate(order):
                tx.send(ends[who], "DEFAULT", f"{who}:{i}".encode())
        got = _drain(broker)
    by_sender: dict[int, list[tuple[int, int]]] = {}
    for msg in got:
        who, i = map(int, msg.text().split(":"))
        by_sender.setdefault(who, []).append((msg.message_sequence_number, i))
    for who, seen in by_sender.items():
        first = 1 if who < CONVERSATIONS else 0  # the initiators sent "hello" first
        assert [n for n, _ in seen] == list(range(first, first + len(seen)))
        assert [i for _, i in seen] == [i for i, w in enumerate(order) if w == who]
    assert sum(map(len, by_sender.values())) == len(order)


def test_first_messages_and_new_dialogs_in_one_commit(pair: sbroker.Broker) -> None:
    with pair.transaction() as tx:
        old = tx.begin_dialog("InitService", "TargetService")
    with pair.transaction() as tx:
        new = [tx.begin_dialog("InitService", "TargetService") for _ in range(3)]
        for k in range(3):
            tx.send([old, *new], "DEFAULT", f"m{k}")
    got = _drain(pair)
    per_conv: dict[str, list[tuple[int, str]]] = {}
    for msg in got:
        per_conv.setdefault(msg.conversation_handle, []).append(
            (msg.message_sequence_number, msg.text()))
    assert len(per_conv) == 4
    for seen in per_conv.values():
        assert seen == [(0, "m0"), (1, "m1"), (2, "m2")]
    with pair.transaction() as tx:  # and the numbers were stored: the next one is 3
        tx.send(old, "DEFAULT", b"later")
    (msg,) = _drain(pair)
    assert msg.message_sequence_number == 3


def test_sends_then_an_end_in_the_same_commit(pair: sbroker.Broker) -> None:
    inits, targets = _open(pair)
    with pair.transaction() as tx:
        tx.send(inits, "DEFAULT", b"before")
        tx.end_conversation(targets[0])
    got = _drain(pair)
    kinds = sorted(m.message_type_name for m in got)
    assert kinds.count("DEFAULT") == 2  # the ended target's copy was deleted with it
    assert any(k.endswith("EndDialog") for k in kinds)


def test_conversing_dialogs_wait_for_a_disabled_target_queue(pair: sbroker.Broker) -> None:
    """Both ends conversing, but the target queue is off: not the in-memory path."""
    inits, _ = _open(pair)
    pair.alter_queue("TargetQueue", status=False)
    with pair.transaction() as tx:
        tx.send(inits, "DEFAULT", b"waits")
    rows = pair.view("transmission_queue")
    assert len(rows) == CONVERSATIONS
    assert all("disabled" in row["transmission_status"] for row in rows)
    pair.alter_queue("TargetQueue", status=True)
    got = _drain(pair)
    assert sorted((m.text(), m.message_sequence_number) for m in got) == [("waits", 1)] * 3


def test_a_body_failing_validation_among_many_sends(pair: sbroker.Broker) -> None:
    """A first message taken by the in-memory path whose body fails validation goes the
    ordinary way (an Error for the sender) without losing the numbers of the others."""
    pair.create_message_type("J", validation="well_formed_json")
    pair.create_contract("C", {"J": "any"})
    pair.create_service("JsonService", "TargetQueue", ["C"])
    with pair.transaction() as tx:
        hs = [tx.begin_dialog("InitService", "JsonService", "C") for _ in range(3)]
        tx.send(hs, "J", b"{}")
    assert len(_drain(pair)) == 3  # both ends conversing now
    for bad in (1, 2):  # the bad body first on its conversation in the commit, then second
        with pair.transaction() as tx:
            tx.send([hs[0], hs[bad]] if bad == 2 else hs[0], "J", b"[1]")
            tx.send(hs[bad], "J", b"not json")
            tx.send(hs[0], "J", b"[2]")
        got = _drain(pair)
        errors = [m for m in got if m.is_error]
        assert [m.conversation_handle for m in errors] == [hs[bad]]
        assert errors[0].error()[0] == -9615
        fine = sorted((m.text(), m.message_sequence_number) for m in got if not m.is_error)
        assert fine == ([("[1]", 1), ("[2]", 2)] if bad == 1  # hs[0] only
                        else [("[1]", 1), ("[1]", 3), ("[2]", 4)])  # hs[2], then hs[0]
    # A bad body moves its sender to ER: a later SEND on it in the same commit fails there.
    with pytest.raises(sbroker.CommitConflictError) as e, pair.transaction() as tx:
        tx.send(hs[0], "J", b"[3]")
        tx.send(hs[0], "J", b"not json")
        tx.send(hs[0], "J", b"[4]")
    assert e.value.number == 8429
