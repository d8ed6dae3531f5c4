"""The adjacent-broker layer: handshake, refusal of strangers, integrity checks, timers."""

from __future__ import annotations

import random
from collections import defaultdict
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbroker.protocol import (
    AuthenticationFailed,
    ConnectionClosed,
    DialogEngine,
    DialogKey,
    Established,
    LocalProtocolError,
    Message,
    MessageReceived,
    Phase,
    Session,
    SessionConfig,
    SessionEvent,
)
from sbroker.protocol.frames import (
    Accept,
    Ack,
    AckEntry,
    Challenge,
    Close,
    Fragment,
    Frame,
    FrameType,
    Hello,
    Keepalive,
    Proof,
    Refuse,
    encode_body,
)
from sbroker.protocol.framing import seal
from sbroker.protocol.keys import HANDSHAKE_KEY
from sbroker.protocol.session import _TABLE

I_ID, R_ID = UUID(int=1), UUID(int=2)
SECRET = b"s3cret"


def cfg(instance: UUID, secret: bytes | None = SECRET, **kw: object) -> SessionConfig:
    return SessionConfig(instance, secret=secret, **kw)  # type: ignore[arg-type]


def engine() -> DialogEngine:
    durable: defaultdict[DialogKey, int] = defaultdict(int)
    return DialogEngine(rng=random.Random(0), receive_state=lambda k: durable[k])


def pair(
    ci: SessionConfig | None = None, cr: SessionConfig | None = None, seed: int = 0
) -> tuple[Session, Session]:
    rng = random.Random(seed)
    si = Session(ci or cfg(I_ID, expected_peer=R_ID), initiator=True, rng=rng, now=0.0)
    sr = Session(cr or cfg(R_ID), initiator=False, rng=rng, now=0.0)
    return si, sr


def pump(a: Session, b: Session, now: float = 0.0) -> int:
    """Exchange bytes until both are quiet; returns how many frames moved."""
    moved = 0
    while True:
        fa, fb = a.frames_to_send(now), b.frames_to_send(now)
        if not fa and not fb:
            return moved
        for f in fa:
            b.receive_data(f, now)
        for f in fb:
            a.receive_data(f, now)
        moved += len(fa) + len(fb)


def events(s: Session) -> list[SessionEvent]:
    out = []
    while (ev := s.next_event()) is not None:
        out.append(ev)
    return out


def established() -> tuple[Session, Session, DialogEngine, DialogEngine]:
    si, sr = pair()
    pump(si, sr)
    assert events(si) == [Established(R_ID, True)]
    assert events(sr) == [Established(I_ID, False)]
    ei, er = engine(), engine()
    si.attach(ei)
    sr.attach(er)
    return si, sr, ei, er


def message(seq: int = 0) -> Message:
    return Message(UUID(int=5), True, seq, "T", b"hello", "a", "b")


def test_handshake_authenticates_both_sides_and_exchanges_instance_ids() -> None:
    si, sr, _, _ = established()
    assert si.phase is sr.phase is Phase.ESTABLISHED
    assert si.peer_instance == R_ID and sr.peer_instance == I_ID


def test_messages_flow_over_an_established_session() -> None:
    si, sr, ei, er = established()
    ei.send_message(message())
    pump(si, sr)
    assert [type(e) for e in er.events()] == [MessageReceived]


def test_engine_for_attaches_the_engine_at_establishment() -> None:
    rng = random.Random(1)
    ei, er = engine(), engine()
    ei.send_message(message())
    si = Session(cfg(I_ID), initiator=True, rng=rng, now=0, engine_for=lambda _: ei)
    sr = Session(cfg(R_ID), initiator=False, rng=rng, now=0, engine_for=lambda _: er)
    pump(si, sr)
    assert si.engine is ei and sr.engine is er
    assert [type(e) for e in er.events()] == [MessageReceived]


def test_a_stranger_with_the_wrong_secret_is_refused_with_a_clear_event() -> None:
    si, sr = pair(ci=cfg(I_ID, secret=b"guess"))
    pump(si, sr)
    ev_i, ev_r = events(si), events(sr)
    assert isinstance(ev_i[0], AuthenticationFailed) and not ev_i[0].by_peer
    assert "does not know the shared secret" in ev_i[0].reason
    assert isinstance(ev_i[-1], ConnectionClosed) and ev_i[-1].error
    assert isinstance(ev_r[0], AuthenticationFailed) and ev_r[0].by_peer
    assert si.closed and sr.closed


def test_the_responder_refuses_an_initiator_that_cannot_prove_the_secret() -> None:
    """An initiator that skips the check of the responder's proof still cannot get in."""
    si, sr = pair(ci=cfg(I_ID, secret=b"guess"))
    si.receive_data(sr.data_to_send(0.0), 0.0)  # nothing from the responder yet
    sr.receive_data(si.data_to_send(0.0), 0.0)  # Hello
    challenge = sr.data_to_send(0.0)
    # a forged Proof from a peer that does not know the secret
    sr.receive_data(seal(Proof.TYPE, encode_body(Proof(b"\x00" * 32)), HANDSHAKE_KEY), 0.0)
    ev = events(sr)
    assert isinstance(ev[0], AuthenticationFailed) and not ev[0].by_peer
    assert isinstance(ev[1], ConnectionClosed)
    assert challenge  # the responder did answer the Hello


def test_a_peer_that_is_not_the_expected_instance_is_refused() -> None:
    si, sr = pair(ci=cfg(I_ID, expected_peer=UUID(int=42)))
    pump(si, sr)
    (first, *_) = events(sr)
    assert isinstance(first, AuthenticationFailed) and "not " in first.reason
    assert isinstance(events(si)[0], AuthenticationFailed)


def test_authentication_modes_must_agree() -> None:
    si, sr = pair(ci=cfg(I_ID, secret=None, transport_authenticated=True))
    pump(si, sr)
    assert "mode mismatch" in events(sr)[0].reason  # type: ignore[union-attr]


def test_transport_mode_relies_on_tls_and_binds_the_channel() -> None:
    both = {"secret": None, "transport_authenticated": True}
    si, sr = pair(
        ci=cfg(I_ID, channel_binding=b"certs", **both),
        cr=cfg(R_ID, channel_binding=b"certs", **both),
    )
    pump(si, sr)
    assert si.phase is Phase.ESTABLISHED
    si, sr = pair(
        ci=cfg(I_ID, channel_binding=b"certs", **both),
        cr=cfg(R_ID, channel_binding=b"other", **both),
    )
    pump(si, sr)
    assert si.closed and sr.closed


def test_a_session_needs_a_secret_or_tls() -> None:
    with pytest.raises(LocalProtocolError):
        SessionConfig(I_ID)
    with pytest.raises(LocalProtocolError):
        SessionConfig(I_ID, secret=b"")


def test_connecting_to_oneself_is_refused() -> None:
    si, sr = pair(ci=cfg(I_ID), cr=cfg(I_ID))
    pump(si, sr)
    assert events(sr)[0] == AuthenticationFailed("connection to self", by_peer=False)


def test_attach_before_establishment_is_a_local_error() -> None:
    si, _ = pair()
    with pytest.raises(LocalProtocolError):
        si.attach(engine())


def test_a_forged_fragment_is_never_delivered_and_is_counted() -> None:
    si, sr, _, er = established()
    header = message().header()
    frag = Fragment(DialogKey(UUID(int=5), True), 0, 0, 1, b"hello", header)
    sr.receive_data(seal(frag.TYPE, encode_body(frag), b"x" * 32), 0.0)
    sr.receive_data(seal(frag.TYPE, encode_body(frag), HANDSHAKE_KEY), 0.0)
    assert er.events() == [] and sr.stats.corrupt_frames == 2
    assert sr.phase is Phase.ESTABLISHED


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_bit_flipped_fragment_is_never_delivered(data: st.DataObject) -> None:
    si, sr, ei, er = established()
    ei.send_message(message())
    (wire,) = si.frames_to_send(0.0)
    bit = data.draw(st.integers(0, len(wire) * 8 - 1))
    damaged = bytearray(wire)
    damaged[bit // 8] ^= 1 << (bit % 8)
    sr.receive_data(bytes(damaged), 0.0)
    assert er.events() == []
    assert sr.stats.corrupt_frames == 1 or sr.closed  # header damage closes the connection


def test_damaged_framing_closes_the_connection_with_an_error() -> None:
    si, sr, _, _ = established()
    sr.receive_data(b"XX" + b"\x00" * 30, 0.0)
    (ev,) = events(sr)
    assert isinstance(ev, ConnectionClosed) and ev.error and "protocol error" in ev.error
    assert sr.stats.last_error == ev.error


def test_duplicated_handshake_frames_are_ignored() -> None:
    si, sr = pair()
    hello = si.frames_to_send(0.0)
    sr.receive_data(hello[0], 0.0)
    sr.receive_data(hello[0], 0.0)
    challenge = sr.frames_to_send(0.0)
    si.receive_data(challenge[0], 0.0)
    si.receive_data(challenge[0], 0.0)
    pump(si, sr)
    assert si.phase is sr.phase is Phase.ESTABLISHED
    assert sr.stats.unexpected_frames == 1 and si.stats.unexpected_frames == 1


def test_a_lost_accept_is_implied_by_the_first_session_keyed_frame() -> None:
    si, sr = pair()
    sr.receive_data(si.data_to_send(0.0), 0.0)
    si.receive_data(sr.data_to_send(0.0), 0.0)
    sr.receive_data(si.data_to_send(0.0), 0.0)
    sr.frames_to_send(0.0)  # the Accept is lost
    assert events(sr)[0] == Established(I_ID, False)
    er = engine()
    sr.attach(er)
    er.send_message(Message(UUID(int=5), False, 0, "T", b"r", "b", "a"))
    si.receive_data(sr.data_to_send(0.0), 0.0)
    assert si.phase is Phase.ESTABLISHED
    ei = engine()
    si.attach(ei)  # frames that came before the attach wait for it
    assert [type(e) for e in ei.events()] == [MessageReceived]


def test_handshake_times_out() -> None:
    si, _ = pair()
    assert si.next_timer() == 10.0
    si.handle_timer(9.9)
    assert not si.closed
    si.handle_timer(10.0)
    assert events(si) == [ConnectionClosed("handshake timed out", "handshake timed out")]
    assert si.next_timer() is None


def test_keepalive_then_dead_peer_detection() -> None:
    si, sr, _, _ = established()
    si.handle_timer(20.0)
    assert len(si.frames_to_send(20.0)) == 1  # a keepalive
    sr.handle_timer(65.0)
    (ev,) = events(sr)
    assert isinstance(ev, ConnectionClosed) and ev.error == "peer silent for too long"


def test_an_idle_connection_is_closed_in_an_orderly_way() -> None:
    ci = cfg(I_ID, idle_timeout=30.0, keepalive_interval=100.0, peer_timeout=200.0)
    cr = cfg(R_ID, idle_timeout=30.0, keepalive_interval=100.0, peer_timeout=200.0)
    si, sr = pair(ci, cr)
    pump(si, sr)
    events(si), events(sr)
    si.attach(engine())
    sr.attach(engine())
    assert si.next_timer() == 30.0
    si.handle_timer(30.0)
    assert events(si) == [ConnectionClosed("idle", None)]
    for f in si.frames_to_send(30.0):
        sr.receive_data(f, 30.0)
    assert events(sr) == [ConnectionClosed("closed by peer: idle", None)]


def test_a_busy_connection_is_not_idle() -> None:
    si, sr = pair(cfg(I_ID, idle_timeout=30.0), cfg(R_ID, idle_timeout=30.0))
    pump(si, sr)
    ei = engine()
    si.attach(ei)
    ei.send_message(message())
    si.frames_to_send(0.0)  # lost: the message stays unacknowledged
    si.handle_timer(40.0)
    assert not si.closed


def test_connection_lost_detaches_the_engine_which_resends_on_the_next_link() -> None:
    si, sr, ei, er = established()
    ei.send_message(message())
    si.frames_to_send(0.0)  # lost with the connection
    si.connection_lost(1.0, "reset")
    assert events(si) == [ConnectionClosed("reset", "reset")]
    assert si.engine is None
    si2, sr2 = pair(seed=1)
    pump(si2, sr2)
    si2.attach(ei)
    sr2.attach(er)
    pump(si2, sr2)
    assert [type(e) for e in er.events()] == [MessageReceived]


def test_stats_count_frames_and_bytes() -> None:
    si, sr, ei, _ = established()
    ei.send_message(message())
    pump(si, sr)
    assert si.stats.frames_sent == sr.stats.frames_received
    assert si.stats.bytes_sent == sr.stats.bytes_received > 0
    assert si.stats.established_at == 0.0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_arbitrary_bytes_never_raise_out_of_a_session(data: bytes, initiator: bool) -> None:
    s = Session(cfg(I_ID), initiator=initiator, rng=random.Random(0), now=0.0)
    s.receive_data(data, 0.0)
    events(s)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=120), max_size=6))
def test_arbitrary_bytes_after_establishment_never_deliver(chunks: list[bytes]) -> None:
    si, sr, _, er = established()
    for chunk in chunks:
        sr.receive_data(chunk, 0.0)
    assert er.events() == []


# -- every (role, phase, frame type) pair -----------------------------------------------------

_PHASES = {
    True: [Phase.AWAIT_CHALLENGE, Phase.AWAIT_ACCEPT, Phase.ESTABLISHED, Phase.CLOSED],
    False: [Phase.AWAIT_HELLO, Phase.AWAIT_PROOF, Phase.ESTABLISHED, Phase.CLOSED],
}
_FRAMES = [
    Hello(UUID(int=3), b"n" * 32),
    Challenge(UUID(int=3), b"m" * 32, b"p" * 32),
    Proof(b"q" * 32),
    Accept(),
    Refuse("no"),
    Fragment(DialogKey(UUID(int=5), True), 0, 0, 1, b"x", message().header()),
    Ack((AckEntry(DialogKey(UUID(int=5), False), 1),)),
    Keepalive(),
    Close("bye"),
]


def _session_in(initiator: bool, phase: Phase) -> tuple[Session, Session]:
    """A session of the given role driven into `phase`, and its peer."""
    si, sr = pair()
    me, peer = (si, sr) if initiator else (sr, si)
    steps = [(si, sr), (sr, si), (si, sr), (sr, si)]  # Hello, Challenge, Proof, Accept
    for src, dst in steps:
        if me.phase is phase:
            break
        for f in src.frames_to_send(0.0):
            dst.receive_data(f, 0.0)
    if phase is Phase.CLOSED:
        me.close("done", 0.0)
    assert me.phase is phase
    return me, peer


@pytest.mark.parametrize("initiator", [True, False], ids=["initiator", "responder"])
@pytest.mark.parametrize("phase_index", range(4))
@pytest.mark.parametrize("frame", _FRAMES, ids=lambda f: type(f).__name__)
def test_every_state_and_frame_pair_is_a_transition_or_is_ignored_and_counted(
    initiator: bool, phase_index: int, frame: Frame
) -> None:
    phase = _PHASES[initiator][phase_index]
    me, peer = _session_in(initiator, phase)
    peer_keys = peer._keys  # sealed as the real peer would, whenever it has keys
    if frame.TYPE in (FrameType.HELLO, FrameType.CHALLENGE, FrameType.PROOF, FrameType.REFUSE):
        key = HANDSHAKE_KEY
    elif peer_keys is not None:
        key = peer_keys.responder_to_initiator if initiator else peer_keys.initiator_to_responder
    else:
        key = b"no keys yet" * 3
    before = (me.stats.unexpected_frames, me.stats.corrupt_frames)
    received_before = me.stats.frames_received
    events(me)
    me.receive_data(seal(frame.TYPE, encode_body(frame), key), 1.0)
    after = events(me)
    if phase is Phase.CLOSED:  # a closed session ignores everything
        assert me.phase is Phase.CLOSED and after == []
        assert me.stats.frames_received == received_before
    elif (initiator, phase, frame.TYPE) in _TABLE:
        assert me.stats.unexpected_frames == before[0]
    else:
        assert me.phase is phase
        assert (me.stats.unexpected_frames, me.stats.corrupt_frames) != before
