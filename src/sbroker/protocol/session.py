"""The adjacent-broker layer: one `Session` per connection between two broker instances.

Sans-IO: bytes in (`receive_data`), events out (`next_event`), bytes out (`data_to_send`),
time passed in. The session runs the handshake, seals and checks every frame, and pumps
dialog frames between the wire and an attached `DialogEngine`.

Handshake (initiator I, responder R, shared secret S; all proofs HMAC-SHA256 under S over a
transcript of both instance ids, both nonces, the mode and the channel binding)::

    I → R  Hello(instance_I, nonce_I, mode, expected_peer)
    R → I  Challenge(instance_R, nonce_R, proof_R)      I checks proof_R
    I → R  Proof(proof_I)                               R checks proof_I
    R → I  Accept  (first frame under the session key)

Session keys (one per direction) come from HKDF over S and both nonces. In
`AuthMode.TRANSPORT` (mutual TLS already verified the peer certificate) S is empty and the
same exchange only binds the instance ids and, through `channel_binding`, the TLS identities.
"""

from __future__ import annotations

import enum
import hmac
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from sbroker.protocol.dialog import DialogEngine
from sbroker.protocol.errors import LocalProtocolError, RemoteProtocolError
from sbroker.protocol.events import (
    AuthenticationFailed,
    ConnectionClosed,
    Established,
    SessionEvent,
)
from sbroker.protocol.frames import (
    NONCE_SIZE,
    Accept,
    Ack,
    AuthMode,
    Challenge,
    Close,
    Fragment,
    Frame,
    FrameType,
    Hello,
    Keepalive,
    Proof,
    Refuse,
    decode_body,
    encode_body,
)
from sbroker.protocol.framing import FrameDecoder, RawFrame, seal
from sbroker.protocol.keys import (
    HANDSHAKE_KEY,
    SessionKeys,
    derive_keys,
    prove,
    transcript,
)

__all__ = ["Phase", "Session", "SessionConfig", "SessionStats"]

_MAX_EARLY = 4096
_HANDSHAKE_TYPES = frozenset(
    {FrameType.HELLO, FrameType.CHALLENGE, FrameType.PROOF, FrameType.REFUSE}
)


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Who we are and how we authenticate; timeouts in seconds."""

    instance: UUID
    secret: bytes | None = None
    transport_authenticated: bool = False
    channel_binding: bytes = b""
    expected_peer: UUID | None = None
    handshake_timeout: float = 10.0
    keepalive_interval: float = 20.0
    peer_timeout: float = 65.0
    idle_timeout: float = 90.0

    def __post_init__(self) -> None:
        if self.secret is None and not self.transport_authenticated:
            raise LocalProtocolError("a session needs a shared secret or an authenticated TLS")
        if self.secret is not None and not self.secret:
            raise LocalProtocolError("the shared secret must not be empty")

    @property
    def mode(self) -> AuthMode:
        return AuthMode.SECRET if self.secret is not None else AuthMode.TRANSPORT


class Phase(enum.Enum):
    """Where a session stands; the handshake phases name what is awaited."""

    __hash__ = object.__hash__  # members are singletons: identity, not Enum's hash by name

    AWAIT_HELLO = "await_hello"
    AWAIT_CHALLENGE = "await_challenge"
    AWAIT_PROOF = "await_proof"
    AWAIT_ACCEPT = "await_accept"
    ESTABLISHED = "established"
    CLOSED = "closed"


@dataclass(slots=True)
class SessionStats:
    """Counters for `dm_broker_connections`."""

    created_at: float
    established_at: float | None = None
    frames_sent: int = 0
    frames_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    corrupt_frames: int = 0
    unexpected_frames: int = 0
    last_error: str | None = None
    last_activity: float = field(default=0.0)


class Session:
    """Sans-IO adjacent-broker connection: handshake, integrity checks and frame pump.

    `engine_for(peer_instance)` (optional) returns the `DialogEngine` of the authenticated
    peer; the session then attaches it the moment it is established. Without it the caller
    attaches one after the `Established` event (dialog frames that arrive meanwhile wait).
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        initiator: bool,
        rng: random.Random,
        now: float,
        engine_for: Callable[[UUID], DialogEngine] | None = None,
    ) -> None:
        self.config = config
        self._engine_for = engine_for
        self.initiator = initiator
        self.phase = Phase.AWAIT_CHALLENGE if initiator else Phase.AWAIT_HELLO
        self.peer_instance: UUID | None = None
        self.stats = SessionStats(created_at=now, last_activity=now)
        self._rng = rng
        self._secret = config.secret or b""
        self._nonce = rng.getrandbits(8 * NONCE_SIZE).to_bytes(NONCE_SIZE, "big")
        self._peer_nonce = b""
        self._keys: SessionKeys | None = None
        self._decoder = FrameDecoder()
        self._events: deque[SessionEvent] = deque()
        self._outbox: list[bytes] = []
        self._engine: DialogEngine | None = None
        self._early: list[tuple[Fragment | Ack, float]] = []
        self._last_sent = now
        self._last_received = now
        self._last_dialog = now
        if initiator:
            self._send(Hello(config.instance, self._nonce, config.mode, config.expected_peer))

    # -- keys -----------------------------------------------------------------------------

    def _send_key(self, ftype: FrameType) -> bytes:
        if ftype in _HANDSHAKE_TYPES:
            return HANDSHAKE_KEY
        assert self._keys is not None
        k = self._keys
        return k.initiator_to_responder if self.initiator else k.responder_to_initiator

    def _receive_key(self, ftype: int) -> bytes | None:
        if ftype in _HANDSHAKE_TYPES:
            return HANDSHAKE_KEY
        if self._keys is None:
            return None
        k = self._keys
        return k.responder_to_initiator if self.initiator else k.initiator_to_responder

    def _script(self, peer: UUID, peer_nonce: bytes) -> bytes:
        me, nonce = self.config.instance, self._nonce
        if self.initiator:
            return transcript(
                me, peer, nonce, peer_nonce, self.config.mode, self.config.channel_binding
            )
        return transcript(
            peer, me, peer_nonce, nonce, self.config.mode, self.config.channel_binding
        )

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED

    # -- bytes in -------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed bytes from the transport; never raises for anything the peer sent."""
        if self.phase is Phase.CLOSED:
            return
        self.stats.bytes_received += len(data)
        self._decoder.feed(data)
        try:
            while not self.closed:
                raw = self._decoder.next_frame()
                if raw is None:
                    break
                self._on_raw(raw, now)
        except RemoteProtocolError as exc:
            self._fail(f"protocol error: {exc}", now)

    def _on_raw(self, raw: RawFrame, now: float) -> None:
        key = self._receive_key(raw.ftype)
        if key is None:
            self.stats.unexpected_frames += 1  # session-keyed frame before the keys exist
            return
        if not raw.verify(key):
            self.stats.corrupt_frames += 1
            return
        self.stats.frames_received += 1
        self._last_received = self.stats.last_activity = now
        frame = decode_body(raw.ftype, raw.body)
        handler = _TABLE.get((self.initiator, self.phase, frame.TYPE))
        if handler is None:
            self.stats.unexpected_frames += 1  # stale duplicate or out-of-phase frame
            return
        handler(self, frame, now)

    # -- handshake transitions ------------------------------------------------------------

    def _on_hello(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Hello)
        if frame.mode is not self.config.mode:
            return self._refuse("authentication mode mismatch (shared secret vs TLS)", now)
        if frame.expected_peer is not None and frame.expected_peer != self.config.instance:
            return self._refuse(
                f"this is broker instance {self.config.instance}, " f"not {frame.expected_peer}",
                now,
            )
        if frame.instance == self.config.instance:
            return self._refuse("connection to self", now)
        self.peer_instance, self._peer_nonce = frame.instance, frame.nonce
        script = self._script(frame.instance, frame.nonce)
        self._keys = derive_keys(self._secret, frame.nonce, self._nonce, script)
        self._send(
            Challenge(self.config.instance, self._nonce, prove(self._secret, b"responder", script))
        )
        self.phase = Phase.AWAIT_PROOF

    def _on_challenge(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Challenge)
        expected = self.config.expected_peer
        if expected is not None and frame.instance != expected:
            return self._refuse(f"expected broker instance {expected}, got {frame.instance}", now)
        script = self._script(frame.instance, frame.nonce)
        if not _same(prove(self._secret, b"responder", script), frame.proof):
            return self._refuse(
                "authentication failed: the peer does not know the shared secret (the two"
                " endpoints' secrets differ)", now
            )
        self.peer_instance, self._peer_nonce = frame.instance, frame.nonce
        self._keys = derive_keys(self._secret, self._nonce, frame.nonce, script)
        self._send(Proof(prove(self._secret, b"initiator", script)))
        self.phase = Phase.AWAIT_ACCEPT

    def _on_proof(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Proof) and self.peer_instance is not None
        script = self._script(self.peer_instance, self._peer_nonce)
        if not _same(prove(self._secret, b"initiator", script), frame.proof):
            return self._refuse(
                "authentication failed: the peer does not know the shared secret (the two"
                " endpoints' secrets differ)", now
            )
        self._send(Accept())
        self._establish(now)

    def _on_accept(self, frame: Frame, now: float) -> None:
        self._establish(now)

    def _on_early_dialog(self, frame: Frame, now: float) -> None:
        """A valid session-keyed frame proves the responder accepted, even if Accept was lost."""
        self._establish(now)
        self._on_dialog(frame, now)

    def _establish(self, now: float) -> None:
        assert self.peer_instance is not None
        self.phase = Phase.ESTABLISHED
        self.stats.established_at = now
        self._last_dialog = now
        self._events.append(Established(self.peer_instance, self.initiator))
        if self._engine_for is not None:
            self.attach(self._engine_for(self.peer_instance))

    def _on_refuse(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Refuse)
        self._events.append(AuthenticationFailed(frame.reason, by_peer=True))
        self._shut(f"refused by peer: {frame.reason}", frame.reason, now)

    def _refuse(self, reason: str, now: float) -> None:
        self._send(Refuse(reason))
        self._events.append(AuthenticationFailed(reason, by_peer=False))
        self._shut(reason, reason, now)

    # -- established transitions ----------------------------------------------------------

    def _on_dialog(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Fragment | Ack)
        self._last_dialog = now
        if self.engine is not None:
            self.engine.frame_received(frame, now)
        elif len(self._early) < _MAX_EARLY:  # held until the caller attaches its engine
            self._early.append((frame, now))

    def _on_keepalive(self, frame: Frame, now: float) -> None:
        return

    def _on_close(self, frame: Frame, now: float) -> None:
        assert isinstance(frame, Close)
        self._shut(f"closed by peer: {frame.reason}", None, now)

    # -- the dialog engine ----------------------------------------------------------------

    def attach(self, engine: DialogEngine) -> None:
        """Carry `engine`'s frames on this connection (after `Established`)."""
        if self.phase is not Phase.ESTABLISHED:
            raise LocalProtocolError("attach a dialog engine only to an established session")
        if self._engine is not None and self._engine is not engine:
            self._engine.link_down(self)
        self._engine = engine
        engine.link_up(self)
        early, self._early = self._early, []
        for frame, at in early:
            engine.frame_received(frame, at)

    def detach(self, lost: bool = False) -> None:
        """Let go of the engine (`lost`: the connection ended without a Close frame)."""
        if self._engine is not None:
            self._engine.link_down(self, lost)
            self._engine = None

    @property
    def engine(self) -> DialogEngine | None:
        """The attached engine, unless another session has taken it over since."""
        e = self._engine
        return e if e is not None and e.owner is self else None

    # -- bytes out ------------------------------------------------------------------------

    def _send(self, frame: Frame) -> None:
        data = seal(frame.TYPE, encode_body(frame), self._send_key(frame.TYPE))
        self._outbox.append(data)

    def frames_to_send(self, now: float, max_frames: int | None = None) -> list[bytes]:
        """Sealed frames ready for the wire, each a whole frame (handy for simulations)."""
        engine = self.engine
        if self.phase is Phase.ESTABLISHED and engine is not None:
            while max_frames is None or len(self._outbox) < max_frames:
                frame = engine.next_frame(now)
                if frame is None:
                    break
                self._last_dialog = now
                self._send(frame)
        if max_frames is None or max_frames >= len(self._outbox):
            out, self._outbox = self._outbox, []
        else:
            out, self._outbox = self._outbox[:max_frames], self._outbox[max_frames:]
        if out:
            self._last_sent = self.stats.last_activity = now
            self.stats.frames_sent += len(out)
            self.stats.bytes_sent += sum(map(len, out))
        return out

    def data_to_send(self, now: float, max_frames: int | None = None) -> bytes:
        """Bytes ready for the wire (empty when there is nothing to send)."""
        return b"".join(self.frames_to_send(now, max_frames))

    # -- events ---------------------------------------------------------------------------

    def next_event(self) -> SessionEvent | None:
        return self._events.popleft() if self._events else None

    # -- time and closing -----------------------------------------------------------------

    def next_timer(self) -> float | None:
        """When `handle_timer` next has something to do (including the attached engine's)."""
        cfg = self.config
        if self.phase is Phase.CLOSED:
            return None
        if self.phase is not Phase.ESTABLISHED:
            return self.stats.created_at + cfg.handshake_timeout
        times = [self._last_sent + cfg.keepalive_interval, self._last_received + cfg.peer_timeout]
        engine = self.engine
        if engine is not None:
            t = engine.next_timer()
            if t is not None:
                times.append(t)
            if not engine.busy:
                times.append(self._last_dialog + cfg.idle_timeout)
        return min(times)

    def handle_timer(self, now: float) -> None:
        """Fire what is due: handshake timeout, keepalive, dead peer, idle close, retries."""
        cfg = self.config
        if self.phase is Phase.CLOSED:
            return
        if self.phase is not Phase.ESTABLISHED:
            if now >= self.stats.created_at + cfg.handshake_timeout:
                self._fail("handshake timed out", now)
            return
        if now >= self._last_received + cfg.peer_timeout:
            self._fail("peer silent for too long", now)
            return
        engine = self.engine
        if engine is not None:
            engine.handle_timer(now)
            if not engine.busy and now >= self._last_dialog + cfg.idle_timeout:
                self.close("idle", now)
                return
        if now >= self._last_sent + cfg.keepalive_interval:
            self._send(Keepalive())

    def close(self, reason: str, now: float) -> None:
        """Close in an orderly way: a Close frame is queued, flush it and close the socket."""
        if self.phase is Phase.CLOSED:
            return
        if self._keys is not None and self.phase is Phase.ESTABLISHED:
            self._send(Close(reason))
        self._shut(reason, None, now)

    def connection_lost(self, now: float, error: str | None = None) -> None:
        """The transport went away (EOF or error)."""
        if self.phase is not Phase.CLOSED:
            self._shut(error or "connection lost", error, now, lost=True)

    def _fail(self, error: str, now: float) -> None:
        self._shut(error, error, now)

    def _shut(self, reason: str, error: str | None, now: float, lost: bool = False) -> None:
        self.phase = Phase.CLOSED
        if error is not None:
            self.stats.last_error = error
        self.stats.last_activity = now
        self.detach(lost)
        self._events.append(ConnectionClosed(reason, error))


def _same(a: bytes, b: bytes) -> bool:
    return hmac.compare_digest(a, b)


_Handler = Callable[[Session, Frame, float], None]
_I, _R = True, False
_P = Phase
_T = FrameType
# (is initiator, phase, frame type) → transition. Pairs not listed are ignored and counted
# as unexpected (a duplicated or stale frame must not kill a connection).
_TABLE: dict[tuple[bool, Phase, FrameType], _Handler] = {
    (_R, _P.AWAIT_HELLO, _T.HELLO): Session._on_hello,
    (_I, _P.AWAIT_CHALLENGE, _T.CHALLENGE): Session._on_challenge,
    (_R, _P.AWAIT_PROOF, _T.PROOF): Session._on_proof,
    (_I, _P.AWAIT_ACCEPT, _T.ACCEPT): Session._on_accept,
    (_I, _P.AWAIT_ACCEPT, _T.FRAGMENT): Session._on_early_dialog,
    (_I, _P.AWAIT_ACCEPT, _T.ACK): Session._on_early_dialog,
    (_I, _P.AWAIT_ACCEPT, _T.KEEPALIVE): Session._on_accept,
    (_I, _P.AWAIT_CHALLENGE, _T.REFUSE): Session._on_refuse,
    (_I, _P.AWAIT_ACCEPT, _T.REFUSE): Session._on_refuse,
    (_R, _P.AWAIT_PROOF, _T.REFUSE): Session._on_refuse,
    (_I, _P.AWAIT_ACCEPT, _T.CLOSE): Session._on_close,
    (_R, _P.AWAIT_PROOF, _T.CLOSE): Session._on_close,
}
for _role in (_I, _R):
    _TABLE[(_role, _P.ESTABLISHED, _T.FRAGMENT)] = Session._on_dialog
    _TABLE[(_role, _P.ESTABLISHED, _T.ACK)] = Session._on_dialog
    _TABLE[(_role, _P.ESTABLISHED, _T.KEEPALIVE)] = Session._on_keepalive
    _TABLE[(_role, _P.ESTABLISHED, _T.CLOSE)] = Session._on_close
