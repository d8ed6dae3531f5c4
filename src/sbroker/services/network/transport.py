"""A thin asyncio I/O loop around the sans-IO core: TCP listener and connector, optional
mutual TLS, one connection per peer broker instance, idle close and reopen on demand.

The loop runs in its own thread; `send`, `connections` and `stop` may be called from any
thread. The handler is called on the loop thread, except `deliver`, which runs on the
applier's thread (see `applier`) and must durably enqueue the messages before it returns
(that return is what lets the acknowledgements go).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import random
import ssl
import threading
from collections import defaultdict
from collections.abc import Callable
from uuid import UUID

from sbroker.core import threads
from sbroker.core.clock import SYSTEM_CLOCK
from sbroker.protocol.dialog import DialogEngine
from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.events import (
    AuthenticationFailed,
    ConnectionClosed,
    Established,
    Message,
    MessageAcked,
)
from sbroker.protocol.frames import DialogKey
from sbroker.protocol.inbound import PartialMessage
from sbroker.protocol.session import Phase, Session, SessionConfig
from sbroker.services.network.applier import Applier
from sbroker.services.network.endpoint import (
    Address,
    TransportConfig,
    TransportHandler,
    auth_failure,
    refused_row,
    tls_failure,
)

__all__ = ["Address", "BrokerTransport", "TransportConfig", "TransportHandler"]

_log = logging.getLogger(__name__)
FLUSH_FRAMES = 64  # frames encoded and written per turn of the pump


class _Conn:
    """One TCP connection and its session."""

    _ids = itertools.count(1)

    def __init__(
        self, session: Session, writer: asyncio.StreamWriter, address: Address, wall: float
    ) -> None:
        self.id = next(self._ids)
        self.session = session
        self.writer = writer
        self.address = address
        self.connect_time = wall
        self.login_time: float | None = None
        self.wake = asyncio.Event()
        tls = writer.get_extra_info("ssl_object")
        self.encryption: str | None = None
        if isinstance(tls, ssl.SSLObject):
            cipher = tls.cipher()
            self.encryption = f"{tls.version()} {cipher[0] if cipher else ''}".strip()


class BrokerTransport:
    """Connections to peer brokers, carrying each peer's `DialogEngine`."""

    def __init__(
        self,
        config: TransportConfig,
        handler: TransportHandler,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
        wall_clock: Callable[[], float] = SYSTEM_CLOCK.now,
    ) -> None:
        self.config = config
        self.handler = handler
        self._rng = rng or random.SystemRandom()
        self._clock = clock
        self._wall = wall_clock
        self._engines: dict[UUID, DialogEngine] = {}
        self._conns: dict[int, _Conn] = {}
        self._by_peer: dict[UUID, _Conn] = {}
        self._addresses: dict[UUID, Address] = {}
        self._waiting: defaultdict[Address, list[Message]] = defaultdict(list)
        self._dialing: set[Address] = set()
        self._backoff: dict[Address, float] = {}
        self._plain: set[UUID] = set()  # peers sent no optional fields (said once in the log)
        self._closed_rows: list[dict[str, object]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._applier: Applier | None = None
        self._contexts = config.contexts()
        self._own_der = b""
        if self._contexts is not None and config.certificate:
            with open(config.certificate) as f:
                self._own_der = ssl.PEM_cert_to_DER_cert(f.read())
        self.address: Address | None = None

    # -- lifecycle (any thread) -----------------------------------------------------------

    def start(self) -> Address:
        """Start the loop thread and the listener; returns the bound (host, port)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._applier = Applier(  # before the listener: nothing received may go unapplied
            self.handler.deliver, applied=self._applied, refused=self._refused, post=self._post
        )
        self._thread = threading.Thread(target=main, name="sbroker-transport", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._applier.stop()
            self._applier = None
            raise failure[0]
        assert self.address is not None
        return self.address

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection in an orderly way and stop the loop thread."""
        loop = self._loop
        if loop is None or self._thread is None:
            return
        if self._applier is not None:  # no commit after stop() returns
            self._applier.stop()
            self._applier = None
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        threads.join(self._thread, timeout)
        self._loop = self._thread = None

    def send(self, message: Message, address: Address, peer: UUID | None = None) -> None:
        """Transmit `message` to the broker at `address` (whose instance may be unknown)."""
        loop = self._loop
        if loop is None:
            raise LocalProtocolError("the transport is not started")
        loop.call_soon_threadsafe(self._send, message, address, peer)

    def send_many(
        self, messages: list[Message], address: Address, peer: UUID | None = None
    ) -> None:
        """`send` for a batch (one wake-up of the loop thread instead of one per message)."""
        loop = self._loop
        if loop is None:
            raise LocalProtocolError("the transport is not started")
        loop.call_soon_threadsafe(self._send_batch, list(messages), address, peer)

    def forget(self, key: DialogKey) -> None:
        """Drop the protocol state of a dialog direction (its conversation is gone)."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._forget, key)

    def partial_messages(self) -> list[tuple[UUID, PartialMessage]]:
        """Messages still being reassembled, per peer (status 2 in the queue views)."""
        loop = self._loop
        if loop is None:
            return []

        async def collect() -> list[tuple[UUID, PartialMessage]]:
            return [(p, m) for p, e in self._engines.items() for m in e.partial_messages()]

        return asyncio.run_coroutine_threadsafe(collect(), loop).result(5.0)

    def connections(self) -> list[dict[str, object]]:
        """Rows of `dm_broker_connections` (open connections, then recently closed ones)."""
        loop = self._loop
        if loop is None:
            return list(self._closed_rows)

        async def rows() -> list[dict[str, object]]:
            return [self._row(c) for c in self._conns.values()] + list(self._closed_rows)

        return asyncio.run_coroutine_threadsafe(rows(), loop).result(5.0)

    # -- loop side ------------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accepted, self.config.host, self.config.port
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (host, port)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        writers = [conn.writer for conn in self._conns.values()]
        for conn in list(self._conns.values()):
            conn.session.close("shutting down", self._clock())
            self._flush(conn)
            conn.writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in writers:  # let the sockets really close before the loop stops
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def _spawn(self, coro: object) -> None:
        assert asyncio.iscoroutine(coro)
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _engine(self, peer: UUID) -> DialogEngine:
        e = self._engines.get(peer)
        if e is None:
            e = self._engines[peer] = DialogEngine(
                self.config.dialog, rng=self._rng, receive_state=self.handler.receive_state
            )
        return e

    def _send_batch(self, messages: list[Message], address: Address, peer: UUID | None) -> None:
        if peer is None:
            peer = next((p for p, a in self._addresses.items() if a == address), None)
        if peer is None:
            self._waiting[address].extend(messages)
            self._dial(address)
            return
        self._addresses[peer] = address
        engine = self._engine(peer)
        for message in messages:
            engine.send_message(message)
        conn = self._by_peer.get(peer)
        if conn is not None:
            conn.wake.set()
        else:
            self._dial(address)

    def _forget(self, key: DialogKey) -> None:
        for engine in self._engines.values():
            engine.forget(key)
        for address, waiting in self._waiting.items():  # for a peer not met yet
            self._waiting[address] = [m for m in waiting if m.key != key]

    def _send(self, message: Message, address: Address, peer: UUID | None) -> None:
        self._send_batch([message], address, peer)

    def _dial(self, address: Address) -> None:
        """Connect to `address` unless a dial there is already under way (until handshake)."""
        if address not in self._dialing:
            self._dialing.add(address)
            self._spawn(self._connect(address))

    def _session(self, initiator: bool, binding: bytes) -> Session:
        cfg = self.config
        sc = SessionConfig(
            cfg.instance,
            secret=cfg.secret,
            transport_authenticated=self._contexts is not None,
            channel_binding=binding,
            handshake_timeout=cfg.handshake_timeout,
            idle_timeout=cfg.idle_timeout,
        )
        return Session(
            sc, initiator=initiator, rng=self._rng, now=self._clock(), engine_for=self._engine
        )

    def _binding(self, writer: asyncio.StreamWriter) -> bytes:
        """Both certificates, in a canonical order, so both ends compute the same bytes."""
        tls = writer.get_extra_info("ssl_object")
        if not isinstance(tls, ssl.SSLObject):
            return b""
        peer = tls.getpeercert(binary_form=True) or b""
        return b"".join(
            sorted((hashlib.sha256(self._own_der).digest(), hashlib.sha256(peer).digest()))
        )

    async def _connect(self, address: Address) -> None:
        try:
            ctx = self._contexts[1] if self._contexts else None
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*address, ssl=ctx), self.config.handshake_timeout
            )
        except (TimeoutError, OSError) as exc:  # ssl.SSLError is an OSError
            self._dialing.discard(address)
            in_tls = isinstance(exc, ssl.SSLError) or (ctx is not None and isinstance(
                exc, ConnectionResetError | ConnectionAbortedError))
            self._failed(address, self._tls_failure(exc, address) if in_tls else
                         f"cannot connect to {address[0]}:{address[1]}: {exc}")
            return
        session = self._session(True, self._binding(writer))
        await self._run(_Conn(session, writer, address, self._wall()), reader)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:  # so that stop() cancels accepted connections too
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        peer = writer.get_extra_info("peername") or ("?", 0)
        if self._contexts is not None:  # TLS here, not in start_server: failures are seen
            try:
                await writer.start_tls(self._contexts[0],
                                       ssl_handshake_timeout=self.config.handshake_timeout)
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                self._refused_peer((peer[0], peer[1]), self._tls_failure(exc, peer, True))
                writer.close()
                return
        session = self._session(False, self._binding(writer))
        await self._run(_Conn(session, writer, (peer[0], peer[1]), self._wall()), reader)

    async def _run(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        self._conns[conn.id] = conn
        self._process(conn)  # the initiator's Hello goes at once
        pump = asyncio.ensure_future(self._pump(conn))
        try:
            while not conn.session.closed:
                try:
                    data = await reader.read(256 * 1024)
                except (OSError, ssl.SSLError) as exc:
                    conn.session.connection_lost(self._clock(), f"read failed: {exc}")
                    break
                if not data:
                    conn.session.connection_lost(self._clock())
                    break
                conn.session.receive_data(data, self._clock())
                self._process(conn)
                conn.wake.set()  # the pump recomputes its next timer (acks may be due soon)
        except Exception as exc:  # a handler failure must not leave the connection hanging
            _log.exception("broker connection %s failed", conn.id)
            conn.session.connection_lost(self._clock(), f"internal error: {exc!r}")
        finally:
            self._process(conn)
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            self._closed(conn)

    async def _pump(self, conn: _Conn) -> None:
        """Fire timers and write whatever the core has to say, until the session closes."""
        session = conn.session
        while not session.closed:
            t = session.next_timer()
            delay = None if t is None else max(0.0, t - self._clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.wake.wait(), delay)
            conn.wake.clear()
            session.handle_timer(self._clock())
            self._process(conn)
            try:
                await conn.writer.drain()
                if conn.wake.is_set():
                    await asyncio.sleep(0)  # more to write: let reads in first
            except (OSError, ssl.SSLError) as exc:
                session.connection_lost(self._clock(), f"write failed: {exc}")
                self._process(conn)

    def _process(self, conn: _Conn) -> None:
        """Handle session and dialog events, then write the frames they produced."""
        session = conn.session
        while (ev := session.next_event()) is not None:
            if isinstance(ev, Established):
                self._established(conn, ev.peer_instance)
            elif isinstance(ev, AuthenticationFailed):
                self.handler.connection_failed(conn.address, auth_failure(conn.address, ev.reason))
            elif isinstance(ev, ConnectionClosed):
                self._flush(conn)
                conn.writer.close()
        peer = session.peer_instance
        if peer is not None and peer in self._engines:
            self._dialog_events(peer, self._engines[peer])
        self._flush(conn)

    def _established(self, conn: _Conn, peer: UUID) -> None:
        conn.login_time = self._wall()
        if conn.session.initiator:
            self._dialing.discard(conn.address)
            self._addresses[peer] = conn.address
            self._backoff.pop(conn.address, None)
            for message in self._waiting.pop(conn.address, []):
                self._engine(peer).send_message(message)
        other = self._by_peer.get(peer)
        if other is not None and other is not conn:
            # both sides dialled at once: keep the one the lower instance initiated
            keep_initiated_by_us = self.config.instance < peer
            loser = other if conn.session.initiator == keep_initiated_by_us else conn
            winner = conn if loser is other else other
            self._by_peer[peer] = winner
            if winner.session.engine is None:
                winner.session.attach(self._engine(peer))
            loser.session.close("duplicate connection", self._clock())
            loser.wake.set()
            winner.wake.set()  # it may hold messages handed over while it had no engine
            return
        self._by_peer[peer] = conn

    def _dialog_events(self, peer: UUID, engine: DialogEngine) -> None:
        events = engine.events()
        if not events:
            return
        acks = [ev for ev in events if isinstance(ev, MessageAcked)]
        if acks:
            self.handler.acked(peer, acks)
        messages = [ev.message for ev in events if not isinstance(ev, MessageAcked)]
        applier = self._applier  # stop() may clear it from another thread
        if messages and applier is not None:
            applier.submit(peer, messages)

    def _post(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the loop thread (from the applier's thread)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the transport is stopped")
        loop.call_soon_threadsafe(fn)

    def _applied(self, peer: UUID, messages: list[Message]) -> None:
        """`messages` are durable: their acknowledgements may go."""
        engine = self._engines.get(peer)
        if engine is None:
            return
        now = self._clock()
        for m in messages:
            with contextlib.suppress(LocalProtocolError):  # forgotten meanwhile
                engine.message_persisted(m.key, m.seq, now)
        conn = self._by_peer.get(peer)
        if conn is not None:
            conn.wake.set()  # the pump reschedules: an acknowledgement is now due

    def _refused(self, peer: UUID, messages: list[Message]) -> None:
        """Not enqueued: these and what queued behind them come again by retransmission."""
        applier = self._applier
        stale = applier.resume(peer) if applier is not None else []
        engine = self._engines.get(peer)
        if engine is None:
            return
        first: dict[DialogKey, int] = {}
        for m in [*messages, *stale]:
            first.setdefault(m.key, m.seq)
        for key, seq in first.items():
            with contextlib.suppress(LocalProtocolError):  # forgotten meanwhile
                engine.message_refused(key, seq)

    def _flush(self, conn: _Conn) -> None:
        """Write what the session has, at most FLUSH_FRAMES frames at a time: the first
        frames of a large batch go out while the rest are still to be encoded, and reads
        (acknowledgements) are handled in between; the pump comes back for the rest."""
        frames = conn.session.frames_to_send(self._clock(), FLUSH_FRAMES)
        if frames and not conn.writer.is_closing():
            conn.writer.write(b"".join(frames))
        if len(frames) == FLUSH_FRAMES:
            conn.wake.set()

    def _closed(self, conn: _Conn) -> None:
        self._conns.pop(conn.id, None)
        if conn.session.initiator:
            self._dialing.discard(conn.address)
        self._closed_rows = [self._row(conn), *self._closed_rows][:50]
        if not conn.writer.is_closing():
            conn.writer.close()
        peer = conn.session.peer_instance
        if peer is not None and self._by_peer.get(peer) is conn:
            del self._by_peer[peer]
        engine = self._engines.get(peer) if peer is not None else None
        if peer is not None and engine is not None and not engine.optional_fields and (
                peer not in self._plain):
            self._plain.add(peer)
            _log.warning("broker instance %s cannot read a message's trace context (a broker"
                         " from before it?): its messages go without it from now on", peer)
        error = conn.session.stats.last_error
        if error and "authentication failed" in error:
            error = auth_failure(conn.address, error)
        if conn.session.initiator and (error or conn.login_time is None):
            self.handler.connection_failed(
                conn.address, error or "connection closed by the peer during the handshake"
            )
        address = self._addresses.get(peer) if peer is not None else None
        self._redial_if_needed(address or conn.address)

    def _tls_failure(self, exc: BaseException, address: Address, accepting: bool = False) -> str:
        return tls_failure(exc, address, from_secret=self.config.certificates_from_secret,
                           accepting=accepting)

    def _refused_peer(self, address: Address, reason: str) -> None:
        """A peer failed the TLS handshake on an accepted connection: say so in the log and
        in dm_broker_connections (no session was made, so no other row will)."""
        _log.warning("refused a connection from %s:%s: %s", address[0], address[1], reason)
        row = refused_row(next(_Conn._ids), address, self._wall(), reason)
        self._closed_rows = [row, *self._closed_rows][:50]

    def _failed(self, address: Address, reason: str) -> None:
        self.handler.connection_failed(address, reason)
        self._redial_if_needed(address)

    def _redial_if_needed(self, address: Address) -> None:
        """Dial again later when messages for `address` still wait for acknowledgement."""
        if self._connected(address):
            return
        pending = bool(self._waiting.get(address)) or any(
            a == address and p in self._engines and self._engines[p].unacked_messages
            for p, a in self._addresses.items()
        )
        if not pending or address in self._dialing:
            return
        delay = self._backoff.get(address, self.config.reconnect_min)
        self._backoff[address] = min(delay * 2, self.config.reconnect_max)
        assert self._loop is not None
        self._loop.call_later(delay, self._redial, address)

    def _connected(self, address: Address) -> bool:
        """A connection we dialled to `address`, or any connection to the peer there."""
        return any(
            c.address == address and c.session.initiator for c in self._conns.values()
        ) or any(self._by_peer.get(p) for p, a in self._addresses.items() if a == address)

    def _redial(self, address: Address) -> None:
        if not self._connected(address):
            self._dial(address)

    def _row(self, conn: _Conn) -> dict[str, object]:
        """One `dm_broker_connections` row, with SQL Server's column names where they exist."""
        s = conn.session
        st = s.stats
        phase = s.phase
        state = {Phase.CLOSED: "CLOSED", Phase.ESTABLISHED: "CONNECTED"}.get(phase, "CONNECTING")
        auth = [m for m, on in (("CERTIFICATE", self._contexts), ("SECRET", self.config.secret))
                if on]  # fmt: skip
        idle_for = self._clock() - st.last_activity
        return {
            "connection_id": conn.id,
            "peer": f"{conn.address[0]}:{conn.address[1]}",
            "peer_instance": str(s.peer_instance) if s.peer_instance else None,
            "is_accept": not s.initiator,
            "state_desc": state,
            "connect_time": conn.connect_time,
            "login_time": conn.login_time,
            "last_activity_time": self._wall() - max(0.0, idle_for),
            "authentication_method": ", ".join(auth),
            "encryption_algorithm_desc": conn.encryption,
            "total_fragments_sent": st.frames_sent,
            "total_fragments_received": st.frames_received,
            "total_bytes_sent": st.bytes_sent,
            "total_bytes_received": st.bytes_received,
            "corrupt_fragments": st.corrupt_frames,
            "last_error": st.last_error,
        }
