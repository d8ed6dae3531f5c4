"""A newer broker sending traced messages to a broker from before the optional fields
(docs/tracing.md, "Mixed versions"): the old one drops the connection on the first fragment that
carries them, the newer one then sends without them, and every message still arrives once, in
order, without its trace context; between two newer brokers the context travels. Sans-IO
sessions driven by hand on a fake clock: no sockets, no sleeps."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from uuid import UUID

import pytest
from protocol_sim import Faults, Sim
from support.old_peer import OldSession

from sbroker.protocol import (
    DialogConfig,
    DialogEngine,
    DialogKey,
    Message,
    MessageAcked,
    MessageReceived,
    Session,
    SessionConfig,
)

SECRET = b"s3cret"
A_ID, B_ID = UUID(int=1), UUID(int=2)
CONV = UUID(int=77)
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Broker:
    """One broker: its dialog engine toward the other (it outlives connections) and what
    its application persisted (next expected seq, messages in arrival order)."""

    def __init__(self, instance: UUID, old: bool = False) -> None:
        self.instance = instance
        self.old = old
        self.next_seq: defaultdict[DialogKey, int] = defaultdict(int)
        self.received: list[Message] = []
        self.acked: set[int] = set()
        self.engine = self.restart()

    def restart(self) -> DialogEngine:
        """A new process: volatile state gone, durable next seqs kept."""
        self.engine = DialogEngine(
            DialogConfig(fragment_size=16), rng=random.Random(int(self.instance)),
            receive_state=lambda key: self.next_seq[key],
        )
        return self.engine

    def session(self, peer: UUID, initiator: bool, now: float) -> Session:
        cls = OldSession if self.old else Session
        cfg = SessionConfig(self.instance, secret=SECRET, expected_peer=peer if initiator else None)
        return cls(cfg, initiator=initiator, rng=random.Random(now), now=now,
                   engine_for=lambda _: self.engine)

    def take_events(self, now: float) -> None:
        """Persist what arrived (then it may be acknowledged), note what was acknowledged."""
        for ev in self.engine.events():
            if isinstance(ev, MessageReceived):
                m = ev.message
                self.received.append(m)
                self.next_seq[m.key] = m.seq + 1
                self.engine.message_persisted(m.key, m.seq, now)
            elif isinstance(ev, MessageAcked):
                self.acked.add(ev.seq)


def messages(n: int, first: int = 0) -> list[Message]:
    """Traced and untraced messages of one dialog, some in several fragments."""
    return [
        Message(CONV, True, seq, "T", b"m%d-" % seq + b"x" * (seq * 7 % 40), "a", "b",
                trace_context=None if seq % 4 == 3 else TRACE)
        for seq in range(first, first + n)
    ]


def hang_up(sx: Session, sy: Session, now: float) -> None:
    """`sx` closed: its transport writes what it still had, then closes the socket."""
    for f in sx.frames_to_send(now):
        sy.receive_data(f, now)
    sy.connection_lost(now)


def connect(a: Broker, b: Broker, a_dials: bool, now: float,
            done: Callable[[], bool]) -> tuple[float, bool]:
    """One connection, driven until `done()` or until it ends; (the time, whether it was
    lost rather than left open)."""
    sa = a.session(b.instance, a_dials, now)
    sb = b.session(a.instance, not a_dials, now)
    for _ in range(10_000):
        moved = 0
        for sx, sy in ((sa, sb), (sb, sa)):
            frames = sx.frames_to_send(now)
            moved += len(frames)
            for f in frames:
                sy.receive_data(f, now)
        for sx, sy in ((sa, sb), (sb, sa)):
            if sx.closed and not sy.closed:
                hang_up(sx, sy, now)
        a.take_events(now)
        b.take_events(now)
        if sa.closed or sb.closed:
            return now, True
        if done():
            return now, False
        if not moved:
            now = min(t for t in (sa.next_timer(), sb.next_timer()) if t is not None)
            sa.handle_timer(now)
            sb.handle_timer(now)
    raise AssertionError("the connection never settled")


def deliver(a: Broker, b: Broker, sent: list[Message], a_dials: bool = True,
            now: float = 0.0) -> tuple[int, float]:
    """Send `sent` from `a` to `b`, reconnecting after each lost connection as the transport
    does; (connections used, the time)."""
    for m in sent:
        a.engine.send_message(m)

    def done() -> bool:
        return a.engine.unacked_messages == 0

    for n in range(1, 6):
        now, lost = connect(a, b, a_dials, now, done)
        if done():
            return n, now
        assert lost
        now += 1.0  # the reconnect backoff
    raise AssertionError("not delivered after 5 connections")


def arrived(b: Broker) -> list[tuple[int, bytes, str | None]]:
    return [(m.seq, m.body, m.trace_context) for m in b.received]


@pytest.mark.parametrize("a_dials", [True, False], ids=["new dials", "old dials"])
def test_an_old_peer_gets_every_traced_message_once_in_order_without_its_context(
        a_dials: bool) -> None:
    a, b = Broker(A_ID), Broker(B_ID, old=True)
    sent = messages(12)
    connections, _ = deliver(a, b, sent, a_dials)
    assert arrived(b) == [(m.seq, m.body, None) for m in sent]
    assert connections == 2  # the first one ended on the first traced fragment
    assert not a.engine.optional_fields


def test_later_messages_to_an_old_peer_go_without_the_field_from_then_on() -> None:
    a, b = Broker(A_ID), Broker(B_ID, old=True)
    _, now = deliver(a, b, messages(3))
    connections, _ = deliver(a, b, messages(5, first=3), now=now)
    assert connections == 1
    assert [seq for seq, _, _ in arrived(b)] == list(range(8))


def test_untraced_traffic_to_an_old_peer_needs_no_second_connection() -> None:
    a, b = Broker(A_ID), Broker(B_ID, old=True)
    sent = [m for m in messages(8) if m.trace_context is None]
    sent = [Message(CONV, True, i, "T", m.body, "a", "b") for i, m in enumerate(sent)]
    assert deliver(a, b, sent)[0] == 1
    assert arrived(b) == [(m.seq, m.body, None) for m in sent]
    assert a.engine.optional_fields


def test_two_new_peers_carry_the_context_on_one_connection() -> None:
    a, b = Broker(A_ID), Broker(B_ID)
    sent = messages(12)
    assert deliver(a, b, sent)[0] == 1
    assert arrived(b) == [(m.seq, m.body, m.trace_context) for m in sent]
    assert a.engine.optional_fields


def _cut_after_first_fragment(a: Broker, b: Broker, sent: list[Message]) -> None:
    """One connection that carries only fragment 0 of `sent[0]` (its trace) to `b`, then
    is lost: `b` holds the fragment, `a` has no acknowledgement."""
    for m in sent:
        a.engine.send_message(m)
    sa = a.session(b.instance, True, 0.0)
    sb = b.session(a.instance, False, 0.0)
    while not (sa.engine and sb.engine):
        for f in sa.frames_to_send(0.0, max_frames=1 if sa.engine else None):
            sb.receive_data(f, 0.0)
        for f in sb.frames_to_send(0.0):
            sa.receive_data(f, 0.0)
    for f in sa.frames_to_send(0.0, max_frames=1):
        sb.receive_data(f, 0.0)
    sa.connection_lost(0.0, "reset")
    sb.connection_lost(0.0, "reset")


def test_a_new_peer_lost_before_it_was_seen_reading_the_field_gets_it_once_plain() -> None:
    a, b = Broker(A_ID), Broker(B_ID)
    sent = Message(CONV, True, 0, "T", b"two fragments of 16 bytes", "a", "b",
                   trace_context=TRACE)
    _cut_after_first_fragment(a, b, [sent])
    assert not a.engine.optional_fields  # a doubt about a peer never seen reading it
    assert deliver(a, b, [], now=1.0)[0] == 1
    # fragment 0 came again without the field: the same fragment, dropped as a duplicate;
    # the message keeps the context its first copy carried
    assert arrived(b) == [(0, sent.body, TRACE)]
    assert b.engine.stats()["duplicates_dropped"] == 1


def test_a_peer_seen_reading_the_field_keeps_it_after_one_lost_connection() -> None:
    a, b = Broker(A_ID), Broker(B_ID)
    _, now = deliver(a, b, messages(2))  # acknowledged traced messages: seen reading it
    b.restart()  # b crashes while a has traced messages in flight
    _cut_after_first_fragment(a, b, messages(2, first=2))
    assert a.engine.optional_fields
    assert deliver(a, b, [], now=now + 1)[0] == 1
    assert arrived(b) == [(m.seq, m.body, m.trace_context) for m in messages(4)]


def test_an_old_build_put_back_in_place_of_a_new_peer_is_caught_on_the_second_loss() -> None:
    a, b = Broker(A_ID), Broker(B_ID)
    _, now = deliver(a, b, messages(4))
    b.old = True  # rolled back: same instance and database, old code
    b.restart()
    more = messages(6, first=4)
    connections, _ = deliver(a, b, more, now=now + 1)
    assert connections == 3  # two lost in a row on the first traced fragment, then plain
    assert arrived(b)[4:] == [(m.seq, m.body, None) for m in more]
    assert [seq for seq, _, _ in arrived(b)] == list(range(10))


def test_a_connection_closed_with_a_close_frame_is_no_doubt() -> None:
    a, b = Broker(A_ID), Broker(B_ID)
    a.engine.send_message(messages(1)[0])
    sa = a.session(b.instance, True, 0.0)
    sb = b.session(a.instance, False, 0.0)
    for _ in range(3):  # handshake, then the traced fragment goes out unacknowledged
        for f in sa.frames_to_send(0.0):
            sb.receive_data(f, 0.0)
        for f in sb.frames_to_send(0.0):
            sa.receive_data(f, 0.0)
    sb.close("idle", 0.0)
    hang_up(sb, sa, 0.0)
    assert sa.closed and sa.stats.last_error is None
    assert a.engine.optional_fields


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_old_peer_on_a_hostile_wire_with_crashes_gets_every_message_once_in_order(
        seed: int) -> None:
    """The protocol simulation (drops, duplicates, corruption, refusals, crashes of either
    broker: a crashed newer one starts again with optional fields and is refused again)."""
    faults = Faults(drop=0.05, duplicate=0.05, corrupt=0.03, max_delay=0.05,
                    crash_interval=0.5, refuse=0.02, commit=0.5)
    sim = Sim(seed, faults, DialogConfig(fragment_size=48, send_window=8, reorder_window=8))
    a, b = sim.add_node("A", {"svcA"}), sim.add_node("B", {"svcB"})
    b.old = True
    a.routes["svcB"], b.routes["svcA"] = b.instance, a.instance
    sim.link(a, b)
    expected: dict[DialogKey, list[bytes]] = {}
    for c in range(3):
        conv = UUID(int=sim.rng.getrandbits(128))
        for seq in range(30):
            text = b"%d:%d;" % (c, seq) * (20 if seq % 5 == 0 else 1)
            to_b = Message(conv, True, seq, "T", text, "svcA", "svcB",
                           trace_context=None if seq % 4 == 3 else TRACE)
            to_a = Message(conv, False, seq, "T", text, "svcB", "svcA")  # the old one's
            for sender, m in ((a, to_b), (b, to_a)):
                sender.send(m)
                expected.setdefault(m.key, []).append(m.body)
    total = sum(map(len, expected.values()))
    sim.run(lambda: sim.delivered == total and sim.acked == total, max_time=600.0)
    for key, bodies in expected.items():
        assert (b if key.from_initiator else a).queue[key] == bodies
