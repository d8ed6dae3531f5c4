"""Route resolution and the transmitter's handling of the transmission queue, on one
database with a recording stand-in for the protocol transport (no sockets)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

import sbroker
from sbroker.core.clock import FakeClock
from sbroker.engine.catalog import Route
from sbroker.engine.dialogs import STATUS_NO_ROUTE
from sbroker.protocol import Message, MessageAcked
from sbroker.services.network.routing import parse_tcp, resolve
from sbroker.services.network.transmitter import FULL_SCAN_SECONDS, NUDGE_SECONDS, Transmitter

from .helpers import wait_for

ME = "11111111-1111-1111-1111-111111111111"
FAR = "22222222-2222-2222-2222-222222222222"


def _route(name: str, service: str | None, address: str, instance: str | None = None,
           expires: float | None = None) -> Route:
    return Route(name, service, instance, address, expires)


def _resolve(routes: list[Route], service: str, instance: str | None = None,
             local: tuple[str, ...] = ("Here",), now: float = 100.0) -> object:
    res = resolve(routes, me=ME, local_services=local, to_service=service,
                  to_instance=instance, now=now)
    return res.kind if res.kind != "remote" else res.address


AUTO = _route("AutoCreatedLocal", None, "LOCAL")


def test_local_service_without_tcp_route_is_local() -> None:
    assert _resolve([AUTO], "Here") == "local"
    assert _resolve([AUTO], "Here", ME) == "local"


def test_unknown_service_without_route_waits() -> None:
    res = resolve([AUTO], me=ME, local_services=(), to_service="There", to_instance=None,
                  now=0.0)
    assert res.kind == "none" and res.status == STATUS_NO_ROUTE


def test_service_route_and_instance_precedence() -> None:
    routes = [AUTO, _route("a", "There", "tcp://h1:1"),
              _route("b", "There", "tcp://h2:2", FAR)]
    assert _resolve(routes, "There") == ("h1", 1)  # no instance named: the plain route first
    assert _resolve(routes, "There", FAR) == ("h2", 2)  # service + instance wins
    assert _resolve(routes, "There", "33333333-3333-3333-3333-333333333333") == ("h1", 1)


def test_a_tcp_route_sends_even_a_local_service_away() -> None:
    assert _resolve([AUTO, _route("a", "Here", "tcp://h:9")], "Here") == ("h", 9)


def test_expired_routes_are_ignored() -> None:
    routes = [AUTO, _route("a", "There", "tcp://h:1", expires=50.0)]
    assert _resolve(routes, "There", now=49.0) == ("h", 1)
    assert _resolve(routes, "There", now=51.0) == "none"


def test_transport_route_derives_the_address_from_the_service_name() -> None:
    routes = [AUTO, _route("t", None, "TRANSPORT")]
    assert _resolve(routes, "tcp://10.0.0.5:4022/Orders") == ("10.0.0.5", 4022)
    assert _resolve(routes, "Orders") == "none"


def test_wildcard_and_local_routes() -> None:
    assert _resolve([AUTO, _route("w", None, "tcp://w:7")], "There") == ("w", 7)
    assert _resolve([AUTO, _route("l", "There", "LOCAL")], "There") == "none"


def test_parse_tcp() -> None:
    assert parse_tcp("tcp://[::1]:4022") == ("::1", 4022)
    assert parse_tcp("tcp://host") is None and parse_tcp("LOCAL") is None


# -- the transmitter on one database --------------------------------------------------------

class Recorder:
    """Stands for the transport: records what the transmitter hands over."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.sent: list[tuple[Message, tuple[str, int]]] = []

    def __call__(self, batch: list[tuple[Message, tuple[str, int], UUID | None]]) -> None:
        with self.cond:
            self.sent += [(m, a) for m, a, _ in batch]
            self.cond.notify_all()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(tmp_path / "t.db", clock=clock)
    b.create_queue("q")
    b.create_service("SvcA", "q")
    yield b
    b.close()


def _transmitter(b: sbroker.Broker, rec: Recorder, **kw: object) -> Transmitter:
    options: dict[str, object] = {"starvation": 10.0, "max_in_flight": 1000,
                                  "honor": lambda: b.catalog.honor_broker_priority}
    options.update(kw)
    t = Transmitter(b.engine, rec, **options)  # type: ignore[arg-type]
    t.start()
    return t


def _send(b: sbroker.Broker, n: int, to: str = "SvcB") -> str:
    with b.transaction() as tx:
        h = tx.begin_dialog("SvcA", to)
        for i in range(n):
            tx.send(h, body=f"{to}-{i}")
    return h


def test_no_route_waits_in_words_then_goes_when_a_route_appears(
        broker: sbroker.Broker) -> None:
    rec = Recorder()
    t = _transmitter(broker, rec)
    try:
        _send(broker, 3)
        wait_for(lambda: all(r["transmission_status"] == STATUS_NO_ROUTE
                             for r in broker.view("transmission_queue")))
        assert rec.sent == []
        broker.create_route("r", "SvcB", "tcp://127.0.0.1:4999")
        wait_for(lambda: len(rec.sent) == 3, what="sent once a route appeared")
        assert [m.body for m, _ in rec.sent] == [b"SvcB-0", b"SvcB-1", b"SvcB-2"]
        assert {a for _, a in rec.sent} == {("127.0.0.1", 4999)}
        assert rec.sent[0][0].origin_instance == UUID(broker.broker_instance)
    finally:
        t.stop()


def test_acknowledged_rows_are_deleted_and_a_closed_initiator_goes_with_its_last(
        broker: sbroker.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    import sbroker.services.network.transmitter as transmitter_module

    monkeypatch.setattr(transmitter_module, "FORGET_DELAY", 0.0)
    broker.create_route("r", "SvcB", "tcp://127.0.0.1:4999")
    rec = Recorder()
    forgotten: list[object] = []
    t = _transmitter(broker, rec, forget=forgotten.append)
    try:
        h = _send(broker, 2)
        wait_for(lambda: len(rec.sent) == 2)
        t.acked([MessageAcked(rec.sent[0][0].key, 0)])
        wait_for(lambda: len(broker.view("transmission_queue")) == 1)
        t.failed(("127.0.0.1", 4999), "cannot connect: refused")
        wait_for(lambda: broker.view("transmission_queue")[0]["transmission_status"]
                 == "cannot connect: refused", what="the failure in words")
        with broker.db.connection() as conn:  # as if both sides ended: closed, last row left
            conn.execute("UPDATE sb_endpoints SET state = 'CD' WHERE handle = ?", (h,))
        t.acked([MessageAcked(rec.sent[1][0].key, 1)])
        wait_for(lambda: not broker.view("conversation_endpoints"), what="initiator deleted")
        # both directions of the finished conversation leave the protocol core
        wait_for(lambda: {(k.conversation_id, k.from_initiator) for k in forgotten}  # type: ignore[attr-defined]
                 == {(rec.sent[0][0].conversation_id, d) for d in (True, False)})
    finally:
        t.stop()


def test_local_rows_are_left_to_the_engine(broker: sbroker.Broker) -> None:
    broker.alter_queue("q", status=False)
    broker.create_service("Local", "q", ["DEFAULT"])
    rec = Recorder()
    t = _transmitter(broker, rec)
    try:
        _send(broker, 1, to="Local")  # waits for the disabled queue, in the same database
        broker.create_route("r", "SvcB", "tcp://127.0.0.1:4999")
        _send(broker, 1)
        wait_for(lambda: len(rec.sent) == 1)
        assert rec.sent[0][0].to_service == "SvcB"
    finally:
        t.stop()


def test_priority_order_with_starvation_prevention(broker: sbroker.Broker,
                                                   clock: FakeClock) -> None:
    broker.honor_broker_priority = True
    broker.create_broker_priority("low", remote_service="Low", priority_level=1)
    broker.create_broker_priority("high", remote_service="High", priority_level=9)
    broker.create_route("r", None, "tcp://127.0.0.1:4999")
    _send(broker, 1, to="Low")  # old: it has waited 20 s when the transmitter looks
    clock.advance(20)
    _send(broker, 1, to="Low")
    _send(broker, 1, to="High")
    _send(broker, 1, to="Mid")
    rec = Recorder()
    t = _transmitter(broker, rec)
    try:
        wait_for(lambda: len(rec.sent) == 4)
        assert [m.body for m, _ in rec.sent] == [b"Low-0", b"High-0", b"Mid-0", b"Low-0"]
        assert [m.priority for m, _ in rec.sent] == [1, 9, 5, 1]
    finally:
        t.stop()


def test_without_honor_priority_send_order_and_priority_five(broker: sbroker.Broker) -> None:
    broker.create_broker_priority("high", remote_service="High", priority_level=9)
    broker.create_route("r", None, "tcp://127.0.0.1:4999")
    _send(broker, 1, to="Low")
    _send(broker, 1, to="High")
    rec = Recorder()
    t = _transmitter(broker, rec)
    try:
        wait_for(lambda: len(rec.sent) == 2)
        assert [m.to_service for m, _ in rec.sent] == ["Low", "High"]
        assert {m.priority for m, _ in rec.sent} == {5}
    finally:
        t.stop()


def test_bodies_are_handed_over_byte_for_byte(broker: sbroker.Broker) -> None:
    # The transmitter reads many bodies at once as one joined blob: empty ones, NUL bytes,
    # bytes that are not UTF-8 and a large one must all come out exactly as sent.
    bodies = [b"", b"\x00" * 7, bytes(range(256)), b"", b"\xff\xfe" * 40_000, b"end"]
    broker.create_route("r", "SvcB", "tcp://127.0.0.1:4999")
    with broker.transaction() as tx:
        h = tx.begin_dialog("SvcA", "SvcB")
        for body in bodies:
            tx.send(h, body=body)
    rec = Recorder()
    t = _transmitter(broker, rec)
    try:
        wait_for(lambda: len(rec.sent) == len(bodies))
        assert [m.body for m, _ in rec.sent] == bodies
        assert [m.seq for m, _ in rec.sent] == list(range(len(bodies)))
    finally:
        t.stop()


def test_the_nudge_runs_on_the_brokers_clock_not_on_real_time(broker: sbroker.Broker,
                                                               clock: FakeClock) -> None:
    broker.create_route("r", None, "tcp://127.0.0.1:4999")
    _send(broker, 1)
    rec = Recorder()
    t = _transmitter(broker, rec, known=lambda: {("127.0.0.1", 4999)})
    try:
        wait_for(lambda: len(rec.sent) == 1)
        # No acknowledgement comes: once NUDGE_SECONDS have passed on the broker's clock the
        # message is handed over again, long before that much real time has passed.
        clock.advance(NUDGE_SECONDS + FULL_SCAN_SECONDS)
        t.wake()
        wait_for(lambda: len(rec.sent) == 2, timeout=NUDGE_SECONDS / 2)
        assert rec.sent[1] == rec.sent[0]
    finally:
        t.stop()
