"""Ended conversations are cleaned up (docs/concepts.md, "Transactions and their statements"):
once both sides have ended, nothing of the conversation is left, however many conversations go
through."""

from __future__ import annotations

from support.helpers import begin_and_send, bodies, send, table_counts

from sbroker import END_DIALOG, ERROR, Broker

EMPTY = {"sb_endpoints": 0, "sb_messages": 0, "sb_transmission_queue": 0, "sb_group_locks": 0}


def _target_replies_and_ends(b: Broker, *, error: int | None = None) -> list[str]:
    """The target receives one conversation, replies and ends it; the bodies it got."""
    with b.transaction() as tx:
        got = tx.receive("TargetQueue")
        handle = got[0].conversation_handle
        tx.send(handle, body="reply")
        tx.end_conversation(handle, error=error,
                            description=None if error is None else "the target gave up")
    return bodies(got)


def test_a_conversation_ended_by_both_sides_leaves_nothing_behind(pair: Broker) -> None:
    begin_and_send(pair, "hello")
    assert _target_replies_and_ends(pair) == ["hello"]
    with pair.transaction() as tx:
        got = tx.receive("InitQueue")
        assert [(m.message_type_name, m.message_body) for m in got] == [
            ("DEFAULT", b"reply"), (END_DIALOG, b"")]
        tx.end_conversation(got[0].conversation_handle)
    assert pair.view("conversation_endpoints") == []
    assert pair.view("conversation_groups") == []
    assert pair.view("transmission_queue") == []
    assert table_counts(pair) == EMPTY


def test_the_initiator_ending_first_also_cleans_up_both_sides(pair: Broker) -> None:
    handle = begin_and_send(pair, "hello")
    with pair.transaction() as tx:
        tx.end_conversation(handle)
    with pair.transaction() as tx:
        got = tx.receive("TargetQueue")
        assert [m.message_type_name for m in got] == ["DEFAULT", END_DIALOG]
        tx.end_conversation(got[0].conversation_handle)
    assert pair.peek("InitQueue") == []
    assert table_counts(pair) == EMPTY


def test_nothing_accumulates_over_two_thousand_conversations(pair: Broker) -> None:
    rounds, per_round = 20, 100
    for _ in range(rounds):
        with pair.transaction() as tx:
            for i in range(per_round):
                tx.send(tx.begin_dialog("InitService", "TargetService"), body=str(i))
        for queue in ("TargetQueue", "InitQueue"):  # each side: receive everything, end
            with pair.transaction() as tx:
                for _ in range(per_round):
                    got = tx.receive(queue)
                    assert got, f"a conversation went missing from {queue}"
                    tx.end_conversation(got[0].conversation_handle)
                assert tx.receive(queue) == []
        assert table_counts(pair) == EMPTY


def test_end_with_error_tells_the_peer_and_both_sides_disappear_once_it_ends(
    pair: Broker,
) -> None:
    begin_and_send(pair, "hello")
    _target_replies_and_ends(pair, error=4711)
    with pair.transaction() as tx:
        got = tx.receive("InitQueue")
        # The Error replaces what the target had not yet delivered; here the reply was
        # already in the initiator's queue, so it stays ahead of the Error.
        assert [m.message_type_name for m in got][-1] == ERROR
        assert got[-1].error() == (4711, "the target gave up")
        states = {r["is_initiator"]: r["state"] for r in pair.view("conversation_endpoints")}
        assert states[1] == "ER"
        tx.end_conversation(got[-1].conversation_handle)
    assert table_counts(pair) == EMPTY


def test_end_with_cleanup_removes_the_local_endpoint_and_its_messages_silently(
    pair: Broker,
) -> None:
    handle = begin_and_send(pair, "hello")
    _target_sends(pair, "r1", "r2")
    with pair.transaction() as tx:
        tx.end_conversation(handle, cleanup=True)
    assert pair.peek("InitQueue") == []  # its unreceived replies went with it
    assert [r["is_initiator"] for r in pair.view("conversation_endpoints")] == [0]
    with pair.transaction() as tx:  # the target was not told: it still has its message
        got = tx.receive("TargetQueue")
        assert bodies(got) == ["hello"]
        tx.end_conversation(got[0].conversation_handle, cleanup=True)
    assert table_counts(pair) == EMPTY


def _target_sends(b: Broker, *texts: str) -> None:
    target = next(r["conversation_handle"] for r in b.view("conversation_endpoints")
                  if not r["is_initiator"])
    send(b, target, *texts)


def test_ending_deletes_messages_still_waiting_in_the_local_queue(pair: Broker) -> None:
    begin_and_send(pair, "one", "two", "three")
    with pair.transaction() as tx:
        got = tx.receive("TargetQueue", top=1)
        tx.end_conversation(got[0].conversation_handle)
    assert pair.peek("TargetQueue") == []
    with pair.transaction() as tx:
        got = tx.receive("InitQueue")
        assert [m.message_type_name for m in got] == [END_DIALOG]
        tx.end_conversation(got[0].conversation_handle)
    assert table_counts(pair) == EMPTY
