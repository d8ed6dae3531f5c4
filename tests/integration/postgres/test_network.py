"""Two broker databases on PostgreSQL talking over TCP (docs/network.md, on PostgreSQL):
a dialog both ways, fragments of a large message, the end of the conversation on both sides."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.postgres import RunServer

import sbroker
from sbroker import Broker
from sbroker.services.network import transmitter
from sbroker.storage import watermark
from sbroker.storage.postgres.locks import PgTxStorage

SECRET = "postgres network secret"
FAST = {"retry_initial": 0.2, "retry_max": 2.0}


def _node(url: str, services: dict[str, list[str]]) -> Broker:
    b = Broker.open(url)
    b.create_queue("q")
    for service, contracts in services.items():
        b.create_service(service, "q", contracts)
    b.create_endpoint(port=0, secret=SECRET, encryption="disabled", fragment_size=1024,
                      **FAST)
    b.start()
    return b


@pytest.fixture
def nodes(postgres: RunServer) -> Iterator[tuple[Broker, Broker]]:
    urls = [postgres.new_database(), postgres.new_database()]
    a = _node(urls[0], {"A": []})
    b = _node(urls[1], {"B": ["DEFAULT"]})
    try:
        yield a, b
    finally:
        a.close()
        b.close()
        for url in urls:
            postgres.drop(url)


def _receive(b: Broker, count: int) -> list[sbroker.Message]:
    got: list[sbroker.Message] = []
    for _ in range(60):
        with b.transaction() as tx:
            got += tx.receive("q", timeout=0.5)
        if len(got) >= count:
            break
    return got


def test_a_dialog_between_two_postgresql_databases(nodes: tuple[Broker, Broker]) -> None:
    a, b = nodes
    assert a.network.address is not None and b.network.address is not None
    a.create_route("to-b", "B", f"tcp://127.0.0.1:{b.network.address[1]}",
                   broker_instance=b.broker_instance)
    b.create_route("to-a", "A", f"tcp://127.0.0.1:{a.network.address[1]}",
                   broker_instance=a.broker_instance)
    big = "x" * 5000  # five fragments
    with a.transaction() as tx:
        handle = tx.begin_dialog("A", "B", broker_instance=b.broker_instance)
        for i in range(20):
            tx.send(handle, body=f"m{i}")
        tx.send(handle, body=big)
    got = _receive(b, 21)
    assert [m.text() for m in got] == [f"m{i}" for i in range(20)] + [big]
    with b.transaction() as tx:
        tx.send(got[0].conversation_handle, body="reply")
        tx.end_conversation(got[0].conversation_handle)
    back = _receive(a, 2)
    assert [m.message_type_name for m in back] == ["DEFAULT", sbroker.END_DIALOG]
    assert back[0].text() == "reply"
    with a.transaction() as tx:
        tx.end_conversation(handle)
    assert a.view("transmission_queue") == [] or all(
        r["transmission_status"] == "" for r in a.view("transmission_queue"))


def test_a_message_sent_by_the_serving_process_goes_at_once(
        nodes: tuple[Broker, Broker], monkeypatch: pytest.MonkeyPatch) -> None:
    """The change feed tells a process of other processes' commits only: a message sent by
    the process that runs the endpoint (``broker.start()``, then SEND) waited for the
    transmitter's full scan, up to a second (here pushed off)."""
    monkeypatch.setattr(transmitter, "FULL_SCAN_SECONDS", 3600.0)
    a, b = nodes
    assert b.network.address is not None
    a.create_route("to-b", "B", f"tcp://127.0.0.1:{b.network.address[1]}")
    for body in ("first", "second"):
        with a.transaction() as tx:
            tx.send(tx.begin_dialog("A", "B"), body=body)
        assert [m.text() for m in _receive(b, 1)] == [body]


def test_a_message_committed_after_a_later_one_was_read_goes_at_once(
        nodes: tuple[Broker, Broker], monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts commit at once: the transaction that took transmission id N can commit after
    the one that took N + 1 was read and handed over. Its row went only at the next full scan
    (a second later, here pushed off); the transmitter now holds the hole open."""
    monkeypatch.setattr(transmitter, "FULL_SCAN_SECONDS", 3600.0)
    monkeypatch.setattr(watermark, "GAP_SECONDS", 3600.0)
    a, b = nodes
    assert b.network.address is not None
    a.create_route("to-b", "B", f"tcp://127.0.0.1:{b.network.address[1]}")
    with a.transaction() as tx:
        late, early = tx.begin_dialog("A", "B"), tx.begin_dialog("A", "B")
    inserted, release = threading.Event(), threading.Event()
    original = PgTxStorage.commit

    def commit(self: PgTxStorage, apply: Callable[[Any], None], **kw: Any) -> None:
        if threading.current_thread().name != "late":
            return original(self, apply, **kw)

        def apply_then_wait(conn: Any) -> None:
            apply(conn)
            conn.flush()  # the row has its id; the COMMIT waits
            inserted.set()
            assert release.wait(30)

        return original(self, apply_then_wait, **kw)

    monkeypatch.setattr(PgTxStorage, "commit", commit)

    def send_late() -> None:
        with a.transaction() as tx:
            tx.send(late, body="late")

    sender = threading.Thread(target=send_late, name="late")
    sender.start()
    try:
        assert inserted.wait(30)
        with a.transaction() as tx:
            tx.send(early, body="early")
        assert [m.text() for m in _receive(b, 1)] == ["early"]
    finally:
        release.set()
        sender.join(30)
    assert [m.text() for m in _receive(b, 1)] == ["late"]
