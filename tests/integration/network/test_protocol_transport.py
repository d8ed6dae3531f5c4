"""The TCP/TLS transport over real loopback sockets (port 0): delivery, refusal of
strangers, mutual TLS, idle close and reopen, and the dm_broker_connections rows."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import pytest

from sbroker.protocol import (
    DialogConfig,
    DialogKey,
    LocalProtocolError,
    Message,
    MessageAcked,
)
from sbroker.services.network.transport import Address, BrokerTransport, TransportConfig

SECRET = b"transport secret"
WAIT = 20.0


class Recorder:
    """A handler that 'persists' to dicts and lets the test wait for outcomes."""

    def __init__(self, refuse_first: int = 0) -> None:
        self.cond = threading.Condition()
        self.queue: dict[DialogKey, list[bytes]] = defaultdict(list)
        self.acks: list[tuple[DialogKey, int]] = []
        self.failures: list[str] = []
        self.refuse_left = refuse_first

    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        with self.cond:
            if self.refuse_left:
                self.refuse_left -= 1
                raise RuntimeError("queue disabled")
            for m in messages:
                assert m.seq == len(self.queue[m.key]), "duplicate or out of order"
                self.queue[m.key].append(m.body)
            self.cond.notify_all()

    def acked(self, peer: UUID, acks: list[MessageAcked]) -> None:
        with self.cond:
            self.acks.extend((a.key, a.seq) for a in acks)
            self.cond.notify_all()

    def receive_state(self, key: DialogKey) -> int:
        return len(self.queue[key])

    def connection_failed(self, address: Address, reason: str) -> None:
        with self.cond:
            self.failures.append(reason)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool]) -> None:
        """Wait for `predicate`, re-checked on every handler call and every 20 ms."""
        deadline = time.monotonic() + WAIT
        while not predicate():  # outside the lock: it may ask the transport's loop thread
            assert time.monotonic() < deadline, "timed out waiting"
            with self.cond:
                self.cond.wait(0.02)

    def delivered(self) -> int:
        return sum(map(len, self.queue.values()))


def start(instance: int, handler: Recorder, **kw: object) -> tuple[BrokerTransport, Address]:
    cfg = TransportConfig(UUID(int=instance), port=0, **kw)  # type: ignore[arg-type]
    t = BrokerTransport(cfg, handler)
    return t, t.start()


@pytest.fixture
def transports() -> Iterator[list[BrokerTransport]]:
    started: list[BrokerTransport] = []
    yield started
    for t in started:
        t.stop()


def messages(n_conv: int, per: int, from_initiator: bool = True) -> list[Message]:
    return [
        Message(UUID(int=1000 + c), from_initiator, s, "T", f"{c}:{s}".encode() * 3, "a", "b")
        for c in range(n_conv)
        for s in range(per)
    ]


def test_messages_cross_loopback_exactly_once_in_order_on_one_connection(
    transports: list[BrokerTransport],
) -> None:
    ha, hb = Recorder(), Recorder()
    a, _ = start(1, ha, secret=SECRET, encryption="disabled")
    b, addr_b = start(2, hb, secret=SECRET, encryption="disabled")
    transports += [a, b]
    sent = messages(10, 100)
    a.send_many(sent, addr_b, UUID(int=2))
    hb.wait(lambda: hb.delivered() == len(sent))
    ha.wait(lambda: len(ha.acks) == len(sent))
    for m in sent:
        assert hb.queue[m.key][m.seq] == m.body
    (row,) = a.connections()
    assert row["state_desc"] == "CONNECTED" and row["peer_instance"] == str(UUID(int=2))
    assert row["total_fragments_sent"] >= len(sent) and row["corrupt_fragments"] == 0
    assert row["total_bytes_sent"] == b.connections()[0]["total_bytes_received"]
    assert row["encryption_algorithm_desc"] is None and row["authentication_method"] == "SECRET"
    (brow,) = b.connections()
    assert brow["is_accept"]
    assert b.partial_messages() == []


def test_replies_reuse_the_connection_and_an_unknown_instance_is_learned(
    transports: list[BrokerTransport],
) -> None:
    ha, hb = Recorder(), Recorder()
    a, addr_a = start(1, ha, secret=SECRET, encryption="disabled")
    b, addr_b = start(2, hb, secret=SECRET, encryption="disabled")
    transports += [a, b]
    for m in messages(2, 5):
        a.send(m, addr_b)  # the route does not name the broker instance
    hb.wait(lambda: hb.delivered() == 10)
    for m in messages(2, 5, from_initiator=False):
        b.send(m, addr_a, UUID(int=1))
    ha.wait(lambda: ha.delivered() == 10)
    assert len(a.connections()) == len(b.connections()) == 1


def test_a_refused_delivery_is_retransmitted_later(transports: list[BrokerTransport]) -> None:
    ha, hb = Recorder(), Recorder(refuse_first=1)
    quick = DialogConfig(retry_initial_min=0.05, retry_initial_max=0.1, retry_max=1.0)
    cfg = {"secret": SECRET, "encryption": "disabled", "dialog": quick}
    a, _ = start(1, ha, **cfg)
    b, addr_b = start(2, hb, **cfg)
    transports += [a, b]
    for m in messages(1, 3):
        a.send(m, addr_b, UUID(int=2))
    hb.wait(lambda: hb.delivered() == 3)
    assert hb.refuse_left == 0


def test_a_peer_with_the_wrong_secret_is_refused(transports: list[BrokerTransport]) -> None:
    ha, hb = Recorder(), Recorder()
    a, _ = start(1, ha, secret=b"wrong", encryption="disabled")
    b, addr_b = start(2, hb, secret=SECRET, encryption="disabled")
    transports += [a, b]
    a.send(messages(1, 1)[0], addr_b, UUID(int=2))
    ha.wait(lambda: any("shared secret" in f for f in ha.failures))
    assert hb.delivered() == 0
    hb.wait(lambda: any("shared secret" in str(r["last_error"]) for r in b.connections()))
    assert all(r["state_desc"] == "CLOSED" for r in b.connections())


def test_an_unreachable_peer_is_reported(transports: list[BrokerTransport]) -> None:
    ha = Recorder()
    a, _ = start(1, ha, secret=SECRET, encryption="disabled")
    transports.append(a)
    b, addr_b = start(2, Recorder(), secret=SECRET, encryption="disabled")
    b.stop()
    a.send(messages(1, 1)[0], addr_b, UUID(int=2))
    ha.wait(lambda: any("cannot connect" in f for f in ha.failures))


def test_an_idle_connection_closes_and_reopens_on_demand(
    transports: list[BrokerTransport],
) -> None:
    ha, hb = Recorder(), Recorder()
    cfg = {"secret": SECRET, "encryption": "disabled", "idle_timeout": 0.2}
    a, _ = start(1, ha, **cfg)
    b, addr_b = start(2, hb, **cfg)
    transports += [a, b]
    first, second = messages(1, 2)
    a.send(first, addr_b, UUID(int=2))
    ha.wait(lambda: len(ha.acks) == 1)
    ha.wait(lambda: all(r["state_desc"] == "CLOSED" for r in a.connections()))
    a.send(second, addr_b, UUID(int=2))
    hb.wait(lambda: hb.delivered() == 2)
    states = [r["state_desc"] for r in a.connections()]
    assert states.count("CONNECTED") == 1 and "CLOSED" in states


def test_endpoint_configuration_is_checked() -> None:
    with pytest.raises(LocalProtocolError):
        TransportConfig(UUID(int=1), encryption="disabled")  # neither secret nor certificate
    with pytest.raises(LocalProtocolError):
        TransportConfig(UUID(int=1), secret=b"s")  # TLS required without certificates
    with pytest.raises(LocalProtocolError):
        TransportConfig(UUID(int=1), secret=b"s", certificate="c.pem", encryption="supported")


# -- mutual TLS -----------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


_EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _make_ca(d: Path, name: str) -> None:
    """A self-signed authority `name`.pem / `name`.key."""
    _openssl("req", "-x509", *_EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-subj", f"/CN={name}", "-days", "2", cwd=d)  # fmt: skip


def _make_leaf(d: Path, name: str, ca: str) -> None:
    """A broker certificate `name`.pem / `name`.key signed by the authority `ca`."""
    _openssl("req", *_EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", cwd=d)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    d = tmp_path_factory.mktemp("pki")
    _make_ca(d, "ca")
    _make_ca(d, "rogue_ca")
    for name in ("a", "b"):
        _make_leaf(d, name, "ca")
    _make_leaf(d, "stranger", "rogue_ca")
    return d


def tls(d: Path, name: str, ca: str = "ca") -> dict[str, object]:
    return {
        "certificate": str(d / f"{name}.pem"),
        "private_key": str(d / f"{name}.key"),
        "ca": str(d / f"{ca}.pem"),
        "encryption": "required",
    }


def test_mutual_tls_carries_messages_encrypted(
    pki: Path, transports: list[BrokerTransport]
) -> None:
    ha, hb = Recorder(), Recorder()
    a, _ = start(1, ha, **tls(pki, "a"))
    b, addr_b = start(2, hb, **tls(pki, "b"))
    transports += [a, b]
    for m in messages(3, 20):
        a.send(m, addr_b, UUID(int=2))
    hb.wait(lambda: hb.delivered() == 60)
    ha.wait(lambda: len(ha.acks) == 60)
    (row,) = a.connections()
    assert str(row["encryption_algorithm_desc"]).startswith("TLS")
    assert row["authentication_method"] == "CERTIFICATE"
    for m in messages(3, 1):
        a.forget(m.key)
        b.forget(m.key)


def test_mutual_tls_with_a_secret_as_well(pki: Path, transports: list[BrokerTransport]) -> None:
    ha, hb = Recorder(), Recorder()
    a, _ = start(1, ha, secret=SECRET, **tls(pki, "a"))
    b, addr_b = start(2, hb, secret=SECRET, **tls(pki, "b"))
    transports += [a, b]
    a.send(messages(1, 1)[0], addr_b, UUID(int=2))
    hb.wait(lambda: hb.delivered() == 1)


def test_a_certificate_from_another_authority_is_refused(
    pki: Path, transports: list[BrokerTransport]
) -> None:
    ha, hb = Recorder(), Recorder()
    a, _ = start(1, ha, **tls(pki, "stranger", ca="ca"))
    b, addr_b = start(2, hb, **tls(pki, "b"))
    transports += [a, b]
    a.send(messages(1, 1)[0], addr_b, UUID(int=2))
    ha.wait(lambda: bool(ha.failures))
    assert hb.delivered() == 0
