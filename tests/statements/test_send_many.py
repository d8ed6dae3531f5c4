"""One COMMIT that SENDs on many conversations: its sender rows are read in one statement and
its sequence numbers written in one, and neither may go stale when the same commit sends on
both ends of a conversation, begins one, or creates a target with a first message."""

from __future__ import annotations

from hypothesis import given, settings
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


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2 * CONVERSATIONS - 1), min_size=1, max_size=30), st.booleans())
def test_interleaved_sends_on_both_ends_keep_numbers_and_order(tmp_path_factory, order,
                                                               retention):
    """``retention`` keeps the commit off the in-memory fast path: every SEND reads its
    sender again, so the numbers kept for flush must be written before that read."""
    with sbroker.Broker.open(tmp_path_factory.mktemp("b") / "b.db") as broker:
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
