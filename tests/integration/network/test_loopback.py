"""Two (or three) brokers in one process over real loopback TCP (port 0): conversations,
the close handshake, broker errors across instances, routes, forwarding and security."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import sbroker
from sbroker.core import messages as m
from sbroker.services.network import transmitter
from sbroker.services.network.transmitter import Transmitter

from .helpers import SECRET, endpoints, node, port, receive, route, tq, wait_for
from .proxy import FaultProxy, Faults


def _pair(tmp_path: Path, nodes: list[sbroker.Broker], **kw: object) -> tuple[
        sbroker.Broker, sbroker.Broker]:
    a = node(tmp_path, "a", services={"SvcA": []}, **kw)
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, **kw)
    nodes += [a, b]
    route(a, "SvcB", b)
    route(b, "SvcA", a)
    return a, b


def _begin(a: sbroker.Broker, *bodies: str, to: str = "SvcB", **kw: object) -> str:
    with a.transaction() as tx:
        h = tx.begin_dialog("SvcA", to, **kw)  # type: ignore[arg-type]
        for body in bodies:
            tx.send(h, body=body)
    return h


def test_dialog_both_ways_and_close_handshake(tmp_path: Path,
                                              nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    h = _begin(a, *(f"m{i}" for i in range(20)))
    got = receive(b, 20)
    assert [x.text() for x in got] == [f"m{i}" for i in range(20)]
    assert [x.message_sequence_number for x in got] == list(range(20))
    target = got[0].conversation_handle
    (ep,) = endpoints(b)
    assert ep["state"] == "CO" and ep["far_broker_instance"] == a.broker_instance
    with b.transaction() as tx:
        tx.send(target, body="reply")
        tx.end_conversation(target)
    back = receive(a, 2)
    assert [(x.message_type_name, x.message_body) for x in back] == [
        ("DEFAULT", b"reply"), (m.END_DIALOG, b"")]
    with a.transaction() as tx:
        tx.end_conversation(h)
    # both ended and acknowledged: the initiator is deleted, the target kept closed (anti-replay)
    wait_for(lambda: not endpoints(a) and not tq(a) and not tq(b), what="close handshake")
    wait_for(lambda: [e["state"] for e in endpoints(b)] == ["CD"], what="target closed")


def test_initiator_ends_first(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    h = _begin(a, "only")
    with a.transaction() as tx:
        tx.end_conversation(h)
    got = receive(b, 2)
    assert [x.message_type_name for x in got] == ["DEFAULT", m.END_DIALOG]
    with b.transaction() as tx:
        tx.end_conversation(got[0].conversation_handle)
    wait_for(lambda: not endpoints(a) and not tq(a) and not tq(b), what="initiator closed")
    assert [e["state"] for e in endpoints(b)] == ["CD"]


def test_no_route_waits_then_goes(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a", services={"SvcA": []})
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]})
    nodes += [a, b]
    _begin(a, "waiting")
    wait_for(lambda: [r["transmission_status"] for r in tq(a)] == [
        m_no_route()], what="no-route status")
    route(a, "SvcB", b)
    assert [x.text() for x in receive(b, 1)] == ["waiting"]


def m_no_route() -> str:
    from sbroker.engine.dialogs import STATUS_NO_ROUTE

    return STATUS_NO_ROUTE


def _error(msg: sbroker.Message) -> int:
    assert msg.message_type_name == m.ERROR
    return msg.error()[0]


def test_unknown_target_service(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    route(a, "Nowhere", b)
    h = _begin(a, "x", "y", to="Nowhere")
    (err,) = receive(a, 1)
    assert _error(err) == m.TARGET_SERVICE_NOT_FOUND
    with a.transaction() as tx:
        tx.end_conversation(h)
    wait_for(lambda: not endpoints(a) and not tq(a), what="refused dialog cleaned up")
    assert endpoints(b) == [] and b.peek("q") == []


def test_contract_not_supported(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    for x in (a, b):
        x.create_contract("Other", {"DEFAULT": "any"})
    _begin(a, "x", contract="Other")
    (err,) = receive(a, 1)
    assert _error(err) == m.CONTRACT_NOT_SUPPORTED


def test_validation_failure_reaches_the_sender(tmp_path: Path,
                                               nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    a.create_message_type("Doc")
    b.create_message_type("Doc", "well_formed_xml")
    for x in (a, b):
        x.create_contract("Docs", {"Doc": "initiator"})
    b.create_service("DocSvc", "q", ["Docs"])
    route(a, "DocSvc", b)
    with a.transaction() as tx:
        h = tx.begin_dialog("SvcA", "DocSvc", "Docs")
        tx.send(h, "Doc", "<ok/>")
        tx.send(h, "Doc", "not xml <")
    (err,) = receive(a, 1)
    assert _error(err) == m.VALIDATION_FAILED
    assert [x.text() for x in b.peek("q")] == []  # the conversation errored on both sides
    with a.transaction() as tx:
        tx.end_conversation(h)
    wait_for(lambda: not endpoints(a) and not tq(a) and not tq(b), what="closed after error")


def test_error_from_the_application_crosses(tmp_path: Path,
                                            nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    h = _begin(a, "work")
    (got,) = receive(b, 1)
    with b.transaction() as tx:
        tx.end_conversation(got.conversation_handle, error=42, description="nope")
    (err,) = receive(a, 1)
    assert err.error() == (42, "nope")
    with a.transaction() as tx:
        tx.end_conversation(h)
    wait_for(lambda: not endpoints(a) and not tq(a) and not tq(b), what="closed after error")


def test_lifetime_expires_on_both_sides(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    _begin(a, "short", lifetime=2)
    (first,) = receive(b, 1)
    assert first.text() == "short"
    (err_b,) = receive(b, 1, timeout=10)
    (err_a,) = receive(a, 1, timeout=10)
    assert _error(err_a) == _error(err_b) == m.LIFETIME_EXPIRED
    for x, msg in ((a, err_a), (b, err_b)):
        with x.transaction() as tx:
            tx.end_conversation(msg.conversation_handle)
    wait_for(lambda: not endpoints(a) and not tq(a) and not tq(b), what="expired ones gone")


def test_large_message_is_fragmented_and_small_ones_are_not_held_back(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes, fragment_size=1024)
    big = "B" * 300_000
    with a.transaction() as tx:
        h1 = tx.begin_dialog("SvcA", "SvcB")
        h2 = tx.begin_dialog("SvcA", "SvcB")
        tx.send(h1, body=big)
        tx.send(h2, body="small")
    got = receive(b, 2)
    assert sorted(len(x.message_body) for x in got) == [5, 300_000]
    assert got[0].text() == "small"  # interleaved: the small one is complete first
    assert b.view("dm_broker_partial_messages") == []


def test_forwarding_through_a_middle_instance(tmp_path: Path,
                                              nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a", services={"SvcA": []})
    mid = node(tmp_path, "mid", message_forwarding=True)
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]})
    nodes += [a, mid, b]
    route(a, "SvcB", mid)
    route(mid, "SvcB", b)
    route(mid, "SvcA", a)
    route(b, "SvcA", mid)
    h = _begin(a, *(f"f{i}" for i in range(10)))
    got = receive(b, 10)
    assert [x.text() for x in got] == [f"f{i}" for i in range(10)]
    with b.transaction() as tx:
        tx.send(got[0].conversation_handle, body="back")
    (back,) = receive(a, 1)
    assert back.text() == "back" and back.conversation_handle == h
    assert endpoints(mid) == []  # the middle holds no conversation
    wait_for(lambda: not tq(a) and not tq(b), what="acknowledged hop by hop")


def test_wrong_secret_is_refused(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a", services={"SvcA": []})
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, secret="another secret")
    nodes += [a, b]
    route(a, "SvcB", b)
    _begin(a, "secret stuff")
    status = wait_for(lambda: [r["transmission_status"] for r in tq(a) if
                               r["transmission_status"]], what="a failure status")
    assert b.peek("q") == [] and endpoints(b) == []
    assert status[0]  # the last error, in words
    assert any(w in status[0].lower() for w in ("authentic", "refused", "handshake", "ssl",
                                                 "closed", "certificate"))


@pytest.mark.parametrize("mode", ["frame", "bytes"])
def test_bit_flipped_fragments_are_never_delivered(tmp_path: Path,
                                                   nodes: list[sbroker.Broker],
                                                   mode: str) -> None:
    # "frame": no TLS, the keyed MAC drops the frame; "bytes": under TLS the record breaks
    encryption = "supported" if mode == "frame" else "required"
    a = node(tmp_path, "a", services={"SvcA": []}, encryption=encryption)
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, encryption=encryption)
    nodes += [a, b]
    faults = Faults(mode=mode, p_corrupt=0.2) if mode == "frame" else Faults(
        mode="bytes", p_corrupt=1.0, spare_first=3, max_corrupt=2)
    proxy = FaultProxy(port(b), faults, seed=7)
    route(a, "SvcB", proxy.start())
    route(b, "SvcA", a)
    try:
        bodies = [f"body-{i:03d}-" + "x" * 200 for i in range(60)]
        _begin(a, *bodies)
        got = receive(b, 60)
        assert [x.text() for x in got] == bodies
        assert proxy.counters.corrupted > 0
        if mode == "frame":
            corrupt = sum(int(r.get("corrupt_fragments") or r.get("corrupt_frames") or 0)
                          for r in b.view("dm_broker_connections"))
            assert corrupt > 0
    finally:
        proxy.stop()


def test_endpoint_without_credentials_refuses_to_start(tmp_path: Path) -> None:
    with sbroker.Broker.open(tmp_path / "x.db") as b:
        b.create_endpoint(port=0)
        with pytest.raises(sbroker.BrokerError, match="neither a secret nor certificates"):
            b.start()


def test_endpoint_ddl(tmp_path: Path) -> None:
    with sbroker.Broker.open(tmp_path / "x.db") as b:
        with pytest.raises(sbroker.BrokerError):
            b.alter_endpoint(port=5)
        b.create_endpoint(port=0, secret=SECRET, encryption="supported")
        with pytest.raises(sbroker.BrokerError):
            b.create_endpoint(port=0, secret=SECRET)
        with pytest.raises(sbroker.BrokerError):
            b.create_endpoint(port=0, secret=SECRET, encryption="sometimes")
        b.alter_endpoint(message_forwarding=True)
        endpoint = b.network.endpoint()
        assert endpoint is not None and endpoint.message_forwarding
        b.drop_endpoint()
        assert b.network.endpoint() is None
        with pytest.raises(sbroker.BrokerError):
            b.drop_endpoint()


def test_dm_broker_connections(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a, b = _pair(tmp_path, nodes)
    _begin(a, "hello")
    receive(b, 1)
    rows = wait_for(lambda: a.view("dm_broker_connections"), what="a connection row")
    assert any(str(r.get("peer_instance", "")).upper() == b.broker_instance for r in rows)
    a.stop()
    assert a.view("dm_broker_connections") == []


def test_one_endpoint_per_database_however_many_processes_start(tmp_path: Path) -> None:
    with sbroker.Broker.open(tmp_path / "x.db") as first, \
            sbroker.Broker.open(tmp_path / "x.db") as second:
        first.create_endpoint(port=0, secret=SECRET, encryption="supported")
        first.start()
        second.start()  # the endpoint is already run by a live session: not twice
        assert first.network.address is not None and second.network.address is None
        first.stop()
        second.stop()
        second.start()  # released: now this one runs it
        assert second.network.address is not None


def _certificates(folder: Path, name: str, ca_name: str) -> dict[str, str]:
    """A CA (by name, reused) and a certificate it signs for ``name``, as PEM files."""
    crypto = pytest.importorskip("cryptography")
    del crypto
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    end = datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)
    ca_key_path, ca_path = folder / f"{ca_name}.key", folder / f"{ca_name}.pem"
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    if not ca_path.exists():
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject)
                   .public_key(ca_key.public_key()).serial_number(1)
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        ca_key_path.write_bytes(pem_key(ca_key))
        ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .sign(ca_key, hashes.SHA256()))
    (folder / f"{name}.key").write_bytes(pem_key(key))
    (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return {"certificate": str(folder / f"{name}.pem"),
            "private_key": str(folder / f"{name}.key"), "ca": str(ca_path)}


@pytest.mark.parametrize("same_ca", [True, False])
def test_certificates_authenticate_peers(tmp_path: Path, nodes: list[sbroker.Broker],
                                         same_ca: bool) -> None:
    a_certs = _certificates(tmp_path, "a", "ca1")
    b_certs = _certificates(tmp_path, "b", "ca1" if same_ca else "ca2")
    a = node(tmp_path, "a", services={"SvcA": []}, secret=None, **a_certs)
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, secret=None, **b_certs)
    nodes += [a, b]
    route(a, "SvcB", b)
    _begin(a, "certified")
    if same_ca:
        assert [x.text() for x in receive(b, 1)] == ["certified"]
        rows = wait_for(lambda: a.view("dm_broker_connections"), what="a connection row")
        assert any("TLS" in str(r) for r in rows)
    else:
        wait_for(lambda: [r for r in tq(a) if r["transmission_status"]], what="a failure")
        assert b.peek("q") == [] and endpoints(b) == []


def test_transport_route_takes_the_address_from_the_service_name(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a", services={"SvcA": []})
    b = node(tmp_path, "b")
    nodes += [a, b]
    target = f"tcp://127.0.0.1:{port(b)}/Orders"
    b.create_service(target, "q", ["DEFAULT"])
    a.create_route("transport", None, "TRANSPORT")
    route(b, "SvcA", a)
    _begin(a, "via TRANSPORT", to=target)
    (got,) = receive(b, 1)
    assert got.text() == "via TRANSPORT" and got.service_name == target


def test_a_busy_port_is_a_clear_error(tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    a = node(tmp_path, "a")
    nodes.append(a)
    with sbroker.Broker.open(tmp_path / "other.db") as other:
        other.create_endpoint(port=port(a), secret=SECRET)
        with pytest.raises(sbroker.BrokerError, match="cannot listen on 127.0.0.1"):
            other.start()


def test_a_message_sent_after_the_transmission_queue_emptied_goes_at_once(
        tmp_path: Path, nodes: list[sbroker.Broker], monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite gives a new row the highest id left plus one, so once the transmission queue
    has emptied, ids come back below the transmitter's watermark. Such a row went only at
    the next full scan, a second later (every message of a quiet dialog took ~1 s). With
    full scans a long way off, it would not go at all."""
    monkeypatch.setattr(transmitter, "FULL_SCAN_SECONDS", 3600.0)
    a, b = _pair(tmp_path, nodes)
    h = _begin(a, "m0")
    assert [x.text() for x in receive(b, 1)] == ["m0"]
    wait_for(lambda: not tq(a), what="m0 acknowledged and deleted")
    with a.transaction() as tx:
        tx.send(h, body="m1")
    assert [x.text() for x in receive(b, 1)] == ["m1"]


@contextlib.contextmanager
def _cleaned_up_in_flight(tmp_path: Path, nodes: list[sbroker.Broker]) -> Iterator[
        tuple[sbroker.Broker, sbroker.Broker, FaultProxy, Transmitter]]:
    """A's message 'old' handed to the protocol core while B is down (a paused proxy), then
    its conversation ended WITH CLEANUP on A; yields (a, b, proxy, A's transmitter)."""
    a = node(tmp_path, "a", services={"SvcA": []})
    b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]})
    nodes += [a, b]
    proxy = FaultProxy(port(b), Faults(mode="bytes"))
    route(a, "SvcB", proxy.start())
    route(b, "SvcA", a)
    proxy.pause()
    try:
        old = _begin(a, "old")
        sender = a.network.transmitter
        assert sender is not None
        wait_for(lambda: sender.in_flight() == 1, what="'old' handed to the protocol core")
        with a.transaction() as tx:
            tx.end_conversation(old, cleanup=True)
        assert not tq(a)
        yield a, b, proxy, sender
    finally:
        proxy.stop()


def test_a_message_that_takes_the_id_of_a_cleaned_up_one_in_flight_is_delivered(
        tmp_path: Path, nodes: list[sbroker.Broker], monkeypatch: pytest.MonkeyPatch) -> None:
    """END CONVERSATION WITH CLEANUP deletes a row the transmitter has in flight (the peer is
    down). Were the next row given the same id, the transmitter would take it for the one in
    flight: never hand it over, and delete it unsent when the old message is acknowledged."""
    monkeypatch.setattr(transmitter, "FULL_SCAN_SECONDS", 3600.0)
    with _cleaned_up_in_flight(tmp_path, nodes) as (a, b, proxy, _):
        _begin(a, "new")
        proxy.resume()
        wait_for(lambda: "new" in [x.text() for x in receive(b, 1)], what="'new' delivered")
        wait_for(lambda: not tq(a), what="'new' acknowledged and deleted")


def test_messages_of_a_conversation_ended_with_cleanup_are_not_sent(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    """WITH CLEANUP removes the conversation's messages from the transmission queue without
    telling the far side: one already handed to the protocol core (the peer is down) must not
    go either once the peer is back, nor keep its room in flight."""
    with _cleaned_up_in_flight(tmp_path, nodes) as (a, b, proxy, sender):
        wait_for(lambda: sender.in_flight() == 0, what="'old' dropped from flight")
        _begin(a, "new")
        proxy.resume()
        got = receive(b, 1)
        wait_for(lambda: not tq(a), what="'new' acknowledged and deleted")
        with b.transaction() as tx:
            got += tx.receive("q")
        assert [x.text() for x in got] == ["new"]
