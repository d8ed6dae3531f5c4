"""A one-message SEND transaction on PostgreSQL is one round trip once the dialog's far side
converses (migration 0013, storage/postgres/sends.py), and when the database refuses it (the
conversation or the catalog changed since the broker last saw them) the commit is made again
the ordinary way, with the same outcome as before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from support.helpers import DEADLINE, begin_and_send, make_pair, send

import sbroker
from sbroker import Broker, FakeClock


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The statements this thread sends to the server meanwhile, one entry per round trip."""
    me = threading.get_ident()
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self: psycopg.Cursor[object], query: object, *args: object,
                **kwargs: object) -> object:
        if threading.get_ident() == me:
            sent.append(str(query))
        return original(self, query, *args, **kwargs)  # type: ignore[arg-type]

    psycopg.Cursor.execute = execute  # type: ignore[assignment,method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]


def at_once(sender: Callable[[int, Broker], None], brokers: list[Broker]) -> None:
    """``sender(n, broker)`` for every broker, each in a thread of its own, all at once."""
    threads = [threading.Thread(target=sender, args=(n, b)) for n, b in enumerate(brokers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive()


def _drain(b: Broker) -> list[sbroker.Message]:
    got: list[sbroker.Message] = []
    while True:
        with b.transaction() as tx:
            messages = tx.receive("TargetQueue")
        if not messages:
            return got
        got += messages


def conversing(b: Broker) -> str:
    """A dialog whose far side converses, sent on twice (the first creates the target, the
    second teaches the broker where the peer is): its next SEND may go direct."""
    handle = begin_and_send(b, "first")
    send(b, handle, "second")
    return handle


@pytest.fixture
def other(pg_url: str) -> Iterator[Broker]:
    """A second broker on the same database, as another host's."""
    b = Broker.open(pg_url)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def broker(pg_url: str) -> Iterator[Broker]:
    # A clock that stands still: the catalog checked once stays fresh, so a SEND statement
    # reads nothing and the round trips counted are the commit's.
    b = make_pair(Broker.open(pg_url, clock=FakeClock()))
    try:
        yield b
    finally:
        b.close()


def test_a_send_on_a_conversing_dialog_commits_in_one_round_trip(broker: Broker) -> None:
    handle = conversing(broker)
    with round_trips() as sent:
        send(broker, handle, "third")
    assert len(sent) == 1, sent
    assert "sb_send_direct" in sent[0] and sent[0].rstrip().endswith("COMMIT")
    got = _drain(broker)
    assert [(m.text(), m.message_sequence_number) for m in got] == [
        ("first", 0), ("second", 1), ("third", 2)]


def test_a_direct_send_that_meets_a_new_catalog_is_made_the_ordinary_way(
        broker: Broker, other: Broker) -> None:
    handle = conversing(broker)
    with broker.transaction() as tx:
        tx.send(handle, body="third")  # checked against the catalog this broker knows
        other.create_message_type("Unrelated")  # another host's DDL before our COMMIT
    with round_trips() as sent:
        send(broker, handle, "fourth")
    assert len(sent) == 1 and "sb_send_direct" in sent[0]  # direct again afterwards
    got = _drain(broker)
    assert [(m.text(), m.message_sequence_number) for m in got] == [
        ("first", 0), ("second", 1), ("third", 2), ("fourth", 3)]


def test_a_send_after_another_host_ended_the_dialog_fails_as_before(
        broker: Broker, other: Broker) -> None:
    handle = conversing(broker)
    with other.transaction() as tx:
        [message, _] = tx.receive("TargetQueue")
        tx.end_conversation(message.conversation_handle)
    with pytest.raises(sbroker.BrokerError) as failed:
        send(broker, handle, "too late")
    assert failed.value.number == 8429
    with broker.transaction() as tx:
        types = [m.message_type_name for m in tx.receive("InitQueue")]
    assert types == ["http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"]


def test_hosts_sending_on_one_dialog_at_once_number_every_message_once(
        broker: Broker, pg_url: str) -> None:
    """Each host's direct SEND locks the conversation: no number is given twice or skipped,
    and each host's messages keep their order."""
    handle = conversing(broker)
    others = [Broker.open(pg_url) for _ in range(2)]
    try:
        for n, other in enumerate(others):
            send(other, handle, f"{n}-warm")  # each host learns the conversing peer

        def sender(n: int, b: Broker) -> None:
            for i in range(40):
                send(b, handle, f"{n}-{i}")

        at_once(sender, others)
    finally:
        for other in others:
            other.close()
    got = _drain(broker)
    assert [m.message_sequence_number for m in got] == list(range(84))
    for n in range(2):
        mine = [m.text() for m in got if m.text().startswith(f"{n}-") and "warm" not in m.text()]
        assert mine == [f"{n}-{i}" for i in range(40)]


def test_a_commit_of_many_sends_on_conversing_dialogs_is_one_round_trip(broker: Broker) -> None:
    handles = [conversing(broker) for _ in range(3)]
    with round_trips() as sent, broker.transaction() as tx:
        for i in range(2):
            for handle in handles:
                tx.send(handle, body=f"{handle[:4]}-{i}")
        tx.send(tuple(handles), body="to all")
    assert len(sent) == 1 and "sb_send_direct_many" in sent[0], sent
    by_conversation: dict[str, list[tuple[str, int]]] = {}
    for m in _drain(broker):
        by_conversation.setdefault(m.conversation_handle, []).append(
            (m.text(), m.message_sequence_number))
    prefixes = sorted(messages[2][0][:4] for messages in by_conversation.values())
    assert prefixes == sorted(handle[:4] for handle in handles)  # one conversation each
    for messages in by_conversation.values():
        prefix = messages[2][0][:4]
        assert messages == [("first", 0), ("second", 1), (f"{prefix}-0", 2),
                            (f"{prefix}-1", 3), ("to all", 4)]


def test_many_sends_that_meet_a_new_catalog_are_made_the_ordinary_way(
        broker: Broker, other: Broker) -> None:
    handles = [conversing(broker) for _ in range(2)]
    with broker.transaction() as tx:
        for handle in handles:
            tx.send(handle, body="third")
        other.create_message_type("Unrelated")  # another host's DDL before our COMMIT
    with round_trips() as sent, broker.transaction() as tx:
        for handle in handles:
            tx.send(handle, body="fourth")
    assert len(sent) == 1 and "sb_send_direct_many" in sent[0]  # direct again afterwards
    got = _drain(broker)
    for handle in {m.conversation_handle for m in got}:
        assert [(m.text(), m.message_sequence_number) for m in got
                if m.conversation_handle == handle] == [
            ("first", 0), ("second", 1), ("third", 2), ("fourth", 3)]


def test_many_sends_one_on_a_dialog_another_host_ended_send_none(
        broker: Broker, other: Broker) -> None:
    """The one statement writes nothing, and the ordinary commit then fails for the ended
    conversation as it always did: the other conversation's message is not sent either."""
    ended = conversing(broker)
    kept = conversing(broker)
    with other.transaction() as tx:
        [first, _] = tx.receive("TargetQueue")  # the oldest group: ended's
        tx.end_conversation(first.conversation_handle)
    with pytest.raises(sbroker.BrokerError) as failed, broker.transaction() as tx:
        tx.send(kept, body="both")
        tx.send(ended, body="both")
    assert failed.value.number == 8429
    assert [m.text() for m in _drain(broker)] == ["first", "second"]  # kept's, none after


def test_hosts_sending_many_on_two_dialogs_in_opposite_orders_number_every_message_once(
        broker: Broker, pg_url: str) -> None:
    """Commits of several SENDs lock their conversations in one order whatever the order of
    the SENDs: two hosts naming two dialogs in opposite orders neither deadlock nor give a
    number twice."""
    pair = [conversing(broker) for _ in range(2)]
    others = [Broker.open(pg_url) for _ in range(2)]
    try:
        for other in others:
            with other.transaction() as tx:  # each host learns the conversing peers
                for handle in pair:
                    tx.send(handle, body="warm")

        def sender(n: int, b: Broker) -> None:
            order = pair if n == 0 else pair[::-1]
            for i in range(30):
                with b.transaction() as tx:
                    for handle in order:
                        tx.send(handle, body=f"{n}-{i}")

        at_once(sender, others)
    finally:
        for other in others:
            other.close()
    by_conversation: dict[str, list[sbroker.Message]] = {}
    for m in _drain(broker):
        by_conversation.setdefault(m.conversation_handle, []).append(m)
    assert len(by_conversation) == 2
    for messages in by_conversation.values():
        assert [m.message_sequence_number for m in messages] == list(range(64))
        for n in range(2):
            assert [m.text() for m in messages if m.text().startswith(f"{n}-")] == [
                f"{n}-{i}" for i in range(30)]
