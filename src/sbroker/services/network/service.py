"""The network service of a started broker: the endpoint listener (protocol transport plus
the receiver) and the transmitter, running when an endpoint is configured."""

from __future__ import annotations

import contextlib
import logging
import random
import tempfile
import threading
from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

from sbroker.core.errors import BrokerError
from sbroker.engine.api import EngineAPI
from sbroker.engine.listeners import Listener
from sbroker.protocol import (
    DialogConfig,
    DialogKey,
    Message,
    MessageAcked,
    PartialMessage,
)
from sbroker.services.network import config as cfg_mod
from sbroker.services.network.receiver import Receiver
from sbroker.services.network.rng import TransportRandom
from sbroker.services.network.routing import Address
from sbroker.services.network.transmitter import Transmitter
from sbroker.services.network.transport import (
    BrokerTransport,
    TransportConfig,
    TransportHandler,
)

log = logging.getLogger("sbroker.network")


class Transport(Protocol):
    """What the service uses of its transport: `BrokerTransport` (TCP), or an in-memory
    stand-in that tests drive on a fake clock."""

    def start(self) -> Address:
        """Begin listening; returns the bound address."""
        ...

    def stop(self) -> None:
        """Close every connection and stop."""
        ...

    def send_many(self, messages: list[Message], address: Address,
                  peer: UUID | None = None) -> None:
        """Transmit `messages` to the broker at `address` (any thread)."""
        ...

    def forget(self, key: DialogKey) -> None:
        """Drop the protocol state of a dialog direction."""
        ...

    def connections(self) -> list[dict[str, object]]:
        """Rows of dm_broker_connections."""
        ...

    def partial_messages(self) -> list[tuple[UUID, PartialMessage]]:
        """Messages still being reassembled, per peer."""
        ...


class TransportFactory(Protocol):
    """Builds the transport for an endpoint (`BrokerTransport` has this signature)."""

    def __call__(self, config: TransportConfig, handler: TransportHandler, *,
                 rng: random.Random | None = None,
                 clock: Callable[[], float] = ...,
                 wall_clock: Callable[[], float] = ...) -> Transport: ...


class _Handler:
    """The transport's view of the engine (called on the transport's loop thread)."""

    def __init__(self, receiver: Receiver, transmitter: Transmitter) -> None:
        self.receiver = receiver
        self.transmitter = transmitter

    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        try:
            self.receiver.deliver(peer, messages)
        except Exception as exc:
            log.warning("could not apply %d message(s) from %s now: %s", len(messages), peer, exc)
            raise

    def acked(self, peer: UUID, acks: list[MessageAcked]) -> None:
        self.transmitter.acked(acks)

    def receive_state(self, key: DialogKey) -> int:
        return self.receiver.receive_state(key)

    def connection_failed(self, address: Address, reason: str) -> None:
        self.transmitter.failed(address, reason)


class NetworkService:
    """Owns the endpoint DDL and, while the broker runs, the listener and transmitter."""

    def __init__(self, engine: EngineAPI, transport: TransportFactory = BrokerTransport
                 ) -> None:
        self.engine = engine
        # The one seam to the wire: tests put an in-memory transport here before start().
        self.transport_factory = transport
        self._running = False
        self.transport: Transport | None = None
        self.transmitter: Transmitter | None = None
        self.receiver: Receiver | None = None
        self.address: Address | None = None
        self._lock = threading.RLock()
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        engine.views.add("dm_broker_connections", self.connections)
        engine.views.add("dm_broker_partial_messages", self.partial_messages)
        engine.listeners.add(_Transmissions(self))

    # -- DDL ------------------------------------------------------------------------------
    def create_endpoint(self, host: str, port: int, *, exist_ok: bool = False,
                        **options: Any) -> None:
        if exist_ok:
            with self.engine.store.read() as conn:
                if cfg_mod.same(conn, host, port, options):
                    return
        self._run(cfg_mod.create(host, port, options))
        self._restart()

    def alter_endpoint(self, **options: Any) -> None:
        self._run(cfg_mod.alter(options))
        self._restart()

    def drop_endpoint(self) -> None:
        self._run(cfg_mod.drop)
        self._restart()

    def endpoint(self) -> cfg_mod.EndpointConfig | None:
        with self.engine.store.read() as conn:
            return cfg_mod.load(conn)

    def _run(self, fn: Any) -> Any:
        return self.engine.store.commit_path.run(fn)

    def _restart(self) -> None:
        if self._running:
            self.stop()
            self.start()

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Run the listener and the transmitter if an endpoint is configured."""
        with self._lock:
            self._running = True
            if self.transport is not None:
                return
            cfg = self.endpoint()
            if cfg is None or cfg.state != "started":
                return
            cfg.check_startable()
            self.engine.reap(force=True)  # an owner that died gives the endpoint up
            if not self._run(cfg_mod.claim(self.engine.session_id)):
                log.info("another process runs this database's endpoint: not starting it")
                return
            try:
                self._start(cfg)
            except BaseException:
                self._run(cfg_mod.release(self.engine.session_id))
                raise

    def _start(self, cfg: cfg_mod.EndpointConfig) -> None:
        engine = self.engine
        honor = engine.catalog().honor_broker_priority
        retry = cfg.tunable("retry_initial", 2.0)
        dialog = DialogConfig(
            fragment_size=int(cfg.tunable("fragment_size", 32 * 1024)),
            retry_initial_min=retry, retry_initial_max=retry * 1.5,
            retry_max=max(cfg.tunable("retry_max", 60.0), retry * 1.5),
            honor_priority=honor,
        )
        certificate, private_key, ca = cfg.certificate, cfg.private_key, cfg.ca
        encryption = cfg.encryption
        if certificate is None and encryption == "required" and cfg.secret is not None:
            try:
                from sbroker.services.network.tls import derived_certificates
            except ImportError:  # no 'cryptography': authenticated and checked, not encrypted
                log.warning("encryption='required' with a shared secret needs the"
                            " 'cryptography' package: connections run without TLS")
                encryption = "supported"
            else:
                self._tls_dir = tempfile.TemporaryDirectory(prefix="sbroker-tls-")
                certificate, private_key, ca = derived_certificates(
                    cfg.secret.encode("utf-8", "surrogateescape"), engine.broker_instance,
                    self._tls_dir.name)
        tcfg = TransportConfig(
            UUID(engine.broker_instance), host=cfg.host, port=cfg.port,
            secret=None if cfg.secret is None else cfg.secret.encode("utf-8", "surrogateescape"),
            certificate=certificate, private_key=private_key, ca=ca,
            encryption=encryption,  # type: ignore[arg-type]
            dialog=dialog, idle_timeout=cfg.tunable("idle_timeout", 90.0),
            certificates_from_secret=self._tls_dir is not None and cfg.certificate is None,
        )
        receiver: Receiver
        transmitter = Transmitter(
            engine, self._send, starvation=cfg.tunable("starvation_seconds", 10.0),
            max_in_flight=int(cfg.tunable("max_in_flight", 20_000)),
            honor=lambda: honor, neighbors=lambda: receiver.neighbors,
            forget=self._forget, known=self._known_addresses,
        )
        receiver = Receiver(engine, forwarding=cfg.message_forwarding,
                            forward_bytes=cfg.message_forward_size * 1024 * 1024,
                            on_outbox=transmitter.wake,
                            on_closed=lambda conv, d: transmitter.forget_later(conv, d))
        transport = self.transport_factory(
            tcfg, _Handler(receiver, transmitter), rng=TransportRandom(),
            clock=engine.clock.monotonic, wall_clock=engine.clock.now)
        try:
            self.address = transport.start()
        except OSError as exc:
            raise BrokerError(f"the broker endpoint cannot listen on {cfg.host}:{cfg.port}:"
                              f" {exc.strerror or exc}") from None
        self.transport, self.transmitter, self.receiver = transport, transmitter, receiver
        self._run(cfg_mod.set_listening_port(self.address[1]))
        transmitter.start()

    def _known_addresses(self) -> set[Address]:
        """Addresses this transport dialled and authenticated a peer at (open or closed)."""
        out: set[Address] = set()
        for row in self.connections():
            if row.get("is_accept") or not row.get("peer_instance"):
                continue
            host, _, port = str(row.get("peer", "")).rpartition(":")
            if port.isdigit():
                out.add((host, int(port)))
        return out

    def _forget(self, key: DialogKey) -> None:
        transport = self.transport
        if transport is not None:
            transport.forget(key)

    def _send(self, batch: list[tuple[Message, Address, UUID | None]]) -> None:
        transport = self.transport
        if transport is None:
            return
        groups: dict[tuple[Address, UUID | None], list[Message]] = {}
        for message, address, peer in batch:
            groups.setdefault((address, peer), []).append(message)
        for (address, peer), messages in groups.items():
            transport.send_many(messages, address, peer)

    def stop(self) -> None:
        with self._lock:
            self._running = False
            transmitter, transport = self.transmitter, self.transport
            self.transmitter = self.transport = self.receiver = None
            if transmitter is not None:
                transmitter.stop()
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.stop()
                with contextlib.suppress(Exception):
                    self._run(cfg_mod.release(self.engine.session_id))
            self.address = None
            if self._tls_dir is not None:
                self._tls_dir.cleanup()
                self._tls_dir = None

    # -- the view -------------------------------------------------------------------------
    def connections(self) -> list[dict[str, object]]:
        """Rows of dm_broker_connections (empty when the endpoint does not run)."""
        transport = self.transport
        return [] if transport is None else transport.connections()

    def partial_messages(self) -> list[dict[str, object]]:
        """Messages still being reassembled (status 2): they live in the protocol core, not in
        a queue, until complete; then they are enqueued whole in one transaction."""
        transport = self.transport
        if transport is None:
            return []
        return [
            {"peer_instance": str(peer).upper(),
             "conversation_id": str(p.key.conversation_id).upper(),
             "is_initiator_sender": p.key.from_initiator, "message_sequence_number": p.seq,
             "status": 2, "fragments_received": p.fragments_received,
             "fragment_count": p.fragment_count, "bytes_received": p.bytes_received}
            for peer, p in transport.partial_messages()
        ]


class _Transmissions(Listener):
    """This process's own commits into the transmission queue wake the transmitter at once.
    The change feed tells of other processes' commits; on PostgreSQL it says nothing of our
    own, and such a message waited for the transmitter's full scan (up to a second)."""

    def __init__(self, service: NetworkService) -> None:
        self.service = service

    def transmitted(self) -> None:
        sender = self.service.transmitter
        if sender is not None:
            sender.wake()
