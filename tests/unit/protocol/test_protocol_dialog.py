"""The dialog layer on its own: two engines joined frame by frame, no sessions, fake time."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from uuid import UUID

import pytest

from sbroker.protocol import (
    DialogConfig,
    DialogEngine,
    DialogKey,
    LocalProtocolError,
    Message,
    MessageAcked,
    MessageReceived,
)
from sbroker.protocol.frames import Ack, AckEntry, Fragment

CONV = UUID(int=1)
KEY = DialogKey(CONV, True)


def msg(seq: int, body: bytes = b"x", conv: UUID = CONV, priority: int = 5) -> Message:
    return Message(conv, True, seq, "T", body, "from", "to", priority=priority)


def engine(
    config: DialogConfig | None = None, state: dict[DialogKey, int] | None = None, seed: int = 0
) -> DialogEngine:
    durable = defaultdict(int, state or {})
    e = DialogEngine(config, rng=random.Random(seed), receive_state=lambda k: durable[k])
    e.link_up()
    return e


def frames(e: DialogEngine, now: float = 0.0) -> list[Fragment | Ack]:
    out = []
    while (f := e.next_frame(now)) is not None:
        out.append(f)
    return out


def deliver(fs: list[Fragment | Ack], to: DialogEngine, now: float = 0.0) -> None:
    for f in fs:
        to.frame_received(f, now)


def received(e: DialogEngine) -> list[Message]:
    return [ev.message for ev in e.events() if isinstance(ev, MessageReceived)]


def persist_all(e: DialogEngine, msgs: list[Message], now: float = 0.0) -> None:
    for m in msgs:
        e.message_persisted(m.key, m.seq, now)


def test_a_message_larger_than_a_fragment_is_cut_and_reassembled() -> None:
    a, b = engine(DialogConfig(fragment_size=4)), engine()
    a.send_message(msg(0, b"0123456789"))
    fs = frames(a)
    assert [f.payload for f in fs if isinstance(f, Fragment)] == [b"0123", b"4567", b"89"]
    deliver(fs[:2], b)
    assert received(b) == []
    assert [(p.fragments_received, p.fragment_count) for p in b.partial_messages()] == [(2, 3)]
    deliver(fs[2:], b)
    assert [m.body for m in received(b)] == [b"0123456789"]
    assert b.partial_messages() == []


def test_fragments_arriving_in_any_order_reassemble() -> None:
    a, b = engine(DialogConfig(fragment_size=2)), engine()
    a.send_message(msg(0, b"abcdefgh"))
    deliver(list(reversed(frames(a))), b)
    assert [m.body for m in received(b)] == [b"abcdefgh"]


def test_a_small_message_is_not_held_back_by_a_large_one() -> None:
    a = engine(DialogConfig(fragment_size=10))
    a.send_message(msg(0, b"L" * 1000, conv=UUID(int=1)))
    a.send_message(msg(0, b"small", conv=UUID(int=2)))
    fs = frames(a)
    order = [f.key.conversation_id.int for f in fs if isinstance(f, Fragment)]
    assert order.index(2) == 1  # right after the large message's first fragment


def test_priority_weighting_sends_more_fragments_of_higher_priority_without_starving() -> None:
    a = engine(DialogConfig(fragment_size=1, honor_priority=True))
    a.send_message(msg(0, b"h" * 100, conv=UUID(int=1), priority=9))
    a.send_message(msg(0, b"l" * 100, conv=UUID(int=2), priority=1))
    first = [f.key.conversation_id.int for f in frames(a)[:50]]
    assert first.count(1) == 45 and first.count(2) == 5


def test_messages_are_delivered_in_order_even_when_they_arrive_out_of_order() -> None:
    a, b = engine(), engine()
    for s in range(5):
        a.send_message(msg(s, bytes([s])))
    deliver(list(reversed(frames(a))), b)
    assert [m.seq for m in received(b)] == [0, 1, 2, 3, 4]


def test_acks_wait_for_durable_enqueue_and_then_go_alone_after_the_delay() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.2))
    a.send_message(msg(0))
    deliver(frames(a), b)
    got = received(b)
    assert frames(b, 10.0) == []  # delivered but not persisted: nothing to acknowledge
    persist_all(b, got, now=1.0)
    assert b.next_timer() == pytest.approx(1.2)
    assert frames(b, 1.1) == []  # waiting for return traffic to carry it
    acks = frames(b, 1.2)
    assert acks == [Ack(acks[0].acks)] and acks[0].acks[0].next_seq == 1
    deliver(acks, a)
    assert a.events() == [MessageAcked(KEY, 0)]
    assert a.unacked_messages == 0


def test_acks_piggyback_on_return_traffic() -> None:
    a, b = engine(), engine()
    a.send_message(msg(0))
    deliver(frames(a), b)
    persist_all(b, received(b))
    b.send_message(Message(CONV, False, 0, "T", b"reply", "to", "from"))
    (reply,) = frames(b)
    assert isinstance(reply, Fragment) and reply.acks[0].key == KEY
    deliver([reply], a)
    events = a.events()
    assert MessageAcked(KEY, 0) in events and len(events) == 2


def test_duplicates_are_acknowledged_and_not_delivered_twice() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0))
    a.send_message(msg(0))
    fs = frames(a)
    deliver(fs, b)
    persist_all(b, received(b))
    frames(b)  # the first ack is lost
    deliver(fs, b)  # the retransmission
    assert received(b) == []
    assert [f.acks[0].next_seq for f in frames(b) if isinstance(f, Ack)] == [1]


def test_a_duplicate_still_awaiting_persistence_is_dropped_silently() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0))
    a.send_message(msg(0))
    fs = frames(a)
    deliver(fs + fs, b)
    assert len(received(b)) == 1
    assert frames(b) == []


def test_after_a_restart_the_durable_next_seq_decides_what_is_a_duplicate() -> None:
    b = engine(DialogConfig(ack_delay=0), state={KEY: 3})
    a = engine()
    for s in range(5):
        a.send_message(msg(s))
    deliver(frames(a), b)
    assert [m.seq for m in received(b)] == [3, 4]
    deliver(frames(b), a)
    assert [ev.seq for ev in a.events() if isinstance(ev, MessageAcked)] == [0, 1, 2]


def timed(a: DialogEngine, b: DialogEngine) -> None:
    """One message there and its ack back after b's ack delay: `a` has timed a round trip
    (50 ms)."""
    a.send_message(msg(0))
    deliver(frames(a, 0.0), b, 0.0)
    persist_all(b, received(b), 0.0)
    deliver(frames(b, 0.05), a, 0.05)
    assert a.events() == [MessageAcked(KEY, 0)]


def test_a_lost_message_is_sent_again_once_the_receiver_reports_the_gap() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    for s in range(5):
        a.send_message(msg(s))
    fs = frames(a, 0.0)
    deliver([f for f in fs if f.seq != 1], b, 0.0)  # 1 is lost
    persist_all(b, received(b), 0.0)
    assert frames(b, 0.005) == []  # a gap younger than the reorder delay may be reordering
    (report,) = frames(b, 0.01)
    assert report == Ack((AckEntry(KEY, 1, held=0b1110),))  # 1 missing; 2, 3, 4 held
    deliver([report], a, 0.011)
    assert [f.seq for f in frames(a, 0.011) if isinstance(f, Fragment)] == [1]
    assert a.stats()["fast_retransmissions"] == 1 and a.stats()["retransmissions"] == 0


def test_a_resend_lost_too_is_sent_again_before_the_retry_timer_on_a_slow_receiver() -> None:
    # b persists slowly (a busy PostgreSQL): a's shortest round trip is 0.45 s, so it resends
    # a reported message at most every 0.9 s. b's reports must last that long.
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    a.send_message(msg(0))
    deliver(frames(a, 0.0), b, 0.0)
    persist_all(b, received(b), 0.4)
    deliver(frames(b, 0.45), a, 0.45)
    assert a.events() == [MessageAcked(KEY, 0)]
    for s in range(1, 6):
        a.send_message(msg(s))
    fs = frames(a, 1.0)
    deliver([f for f in fs if f.seq != 1], b, 1.0)  # 1 is lost
    resent = []
    now = 1.0
    while (t := b.next_timer()) is not None and t < 2.9:  # a's retry timer: 2 to 3 s
        now = t
        deliver(frames(b, now), a, now)  # b's gap reports
        resent += [(now, f.seq) for f in frames(a, now) if isinstance(f, Fragment)]
    times = [t for t, seq in resent if seq == 1]
    assert len(times) == len(resent) >= 2  # the resends are lost as well: 1 goes again
    assert times[0] < 1.1 and times[1] < 2.1  # long before a's retry timer
    assert all(later - t >= 0.9 for t, later in itertools.pairwise(times))  # not sooner
    assert a.stats()["fast_retransmissions"] == len(times)
    assert a.stats()["retransmissions"] == 0


def test_a_gap_is_not_reported_when_the_missing_message_was_only_overtaken() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    for s in range(3):
        a.send_message(msg(s))
    f0, f1, f2 = frames(a, 0.0)
    deliver([f0, f2], b, 0.0)
    deliver([f1], b, 0.004)  # overtaken, arrives within the reorder delay
    persist_all(b, received(b), 0.004)
    assert [f.acks for f in frames(b, 0.1)] == [(AckEntry(KEY, 3),)]


def test_a_lost_last_message_is_probed_after_a_few_round_trips_not_the_retry_time() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    timed(a, b)
    a.send_message(msg(1))
    assert len(frames(a, 0.06)) == 1  # lost
    probe_at = a.next_timer()
    assert probe_at is not None and 0.06 < probe_at < 0.5  # the retry timer: 2 to 3 s
    a.handle_timer(probe_at)
    (probe,) = frames(a, probe_at)
    deliver([probe], b, probe_at)
    persist_all(b, received(b), probe_at)
    deliver(frames(b, probe_at + 0.05), a, probe_at + 0.05)
    assert a.events() == [MessageAcked(KEY, 1)] and a.stats()["probes"] == 1


def test_a_lost_last_message_is_probed_as_soon_as_later_messages_are_acked() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    timed(a, b)
    other = DialogKey(UUID(int=2), True)
    a.send_message(msg(1))
    for s in range(5):
        a.send_message(msg(s, conv=other.conversation_id))
    fs = frames(a, 0.06)
    deliver([f for f in fs if f.key != KEY], b, 0.06)  # KEY's message 1 is lost
    persist_all(b, received(b), 0.06)
    deliver(frames(b, 0.11), a, 0.11)  # acks of `other`, sent after it
    assert [(f.key, f.seq) for f in frames(a, 0.11)] == [(KEY, 1)]  # no timer needed
    assert a.stats()["probes"] == 1


def test_a_lost_ack_is_recovered_by_a_probe_and_probes_stop_after_max_probes() -> None:
    a, b = engine(DialogConfig(max_probes=2)), engine(DialogConfig(ack_delay=0.05))
    timed(a, b)
    a.send_message(msg(1))
    deliver(frames(a, 0.06), b, 0.06)
    persist_all(b, received(b), 0.06)
    assert len(frames(b, 0.11)) == 1  # the ack is lost
    probes = []
    now = 0.11
    while (t := a.next_timer()) is not None and t < 2.0:
        now = t
        a.handle_timer(now)
        probes += frames(a, now)
    assert len(probes) == 2 and a.stats()["retransmissions"] == 0  # then the retry timer
    deliver(probes[:1], b, now)  # a duplicate: acknowledged again
    deliver(frames(b, now + 0.05), a, now + 0.05)
    assert a.events() == [MessageAcked(KEY, 1)]


def test_an_ack_goes_twice_so_that_a_lost_last_ack_needs_no_probe() -> None:
    a, b = engine(), engine(DialogConfig(ack_delay=0.05))
    a.send_message(msg(0))
    deliver(frames(a, 0.0), b, 0.0)
    persist_all(b, received(b), 0.0)
    assert len(frames(b, 0.05)) == 1  # lost
    assert frames(b, 0.09) == []
    (again,) = frames(b, 0.16)
    deliver([again], a, 0.16)
    assert a.events() == [MessageAcked(KEY, 0)] and a.stats()["probes"] == 0
    assert frames(b, 1.0) == []  # twice, not more


def test_without_fast_retransmit_only_the_retry_timer_resends() -> None:
    a, b = engine(DialogConfig(fast_retransmit=False)), engine(DialogConfig(ack_delay=0.05))
    timed(a, b)
    for s in range(1, 4):
        a.send_message(msg(s))
    deliver([f for f in frames(a, 0.06) if f.seq != 1], b, 0.06)
    deliver(frames(b, 0.1), a, 0.1)  # a gap report
    assert frames(a, 0.1) == [] and a.next_timer() is not None and a.next_timer() >= 2.0


def test_set_receive_state_overrides_the_lookup() -> None:
    b = engine()
    b.set_receive_state(KEY, 2)
    b.frame_received(Fragment(KEY, 2, 0, 1, b"x", msg(2).header()), 0.0)
    assert [m.seq for m in received(b)] == [2]
    with pytest.raises(LocalProtocolError):
        b.set_receive_state(KEY, -1)


def test_fragments_beyond_the_reorder_window_are_dropped_unacknowledged() -> None:
    a, b = engine(), engine(DialogConfig(reorder_window=2, ack_delay=0))
    for s in range(3):
        a.send_message(msg(s))
    deliver(frames(a)[1:], b)  # 0 is lost; 1 is buffered, 2 is beyond the window
    assert received(b) == [] and b.stats()["dropped_out_of_window"] == 1
    assert frames(b) == []
    # Once the gap has lasted the reorder delay, a gap report goes back (0 missing, 1 held);
    # 2 is not acknowledged in any way.
    assert frames(b, 0.01) == [Ack((AckEntry(KEY, 0, held=0b10),))]


def test_refused_messages_are_delivered_again_on_retransmission() -> None:
    a, b = engine(), engine()
    a.send_message(msg(0))
    a.send_message(msg(1))
    deliver(frames(a), b)
    got = received(b)
    b.message_persisted(KEY, 0, 0.0)
    b.message_refused(KEY, 1)
    a.handle_timer(3.0)
    deliver(frames(a, 3.0), b)
    assert [m.seq for m in received(b)] == [1]
    assert got[1].seq == 1


def test_persisting_out_of_order_or_unknown_messages_is_a_local_error() -> None:
    a, b = engine(), engine()
    a.send_message(msg(0))
    a.send_message(msg(1))
    deliver(frames(a), b)
    with pytest.raises(LocalProtocolError):
        b.message_persisted(KEY, 1, 0.0)
    with pytest.raises(LocalProtocolError):
        b.message_persisted(DialogKey(UUID(int=99), True), 0, 0.0)
    with pytest.raises(LocalProtocolError):
        b.message_refused(KEY, 5)


def test_retransmission_backs_off_exponentially_with_jitter_and_a_cap() -> None:
    a = engine(DialogConfig(retry_max=10.0), seed=3)
    a.send_message(msg(0))
    now, sends = 0.0, []
    while now < 40:
        if frames(a, now):
            sends.append(now)
        t = a.next_timer()
        assert t is not None
        now = t
        a.handle_timer(now)
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert 2.0 <= gaps[0] <= 3.0
    assert gaps[1] == pytest.approx(2 * gaps[0]) and gaps[2] == pytest.approx(4 * gaps[0])
    assert max(gaps) == pytest.approx(10.0)


def test_the_send_window_limits_messages_in_flight_per_dialog() -> None:
    a, b = engine(DialogConfig(send_window=2)), engine(DialogConfig(ack_delay=0))
    for s in range(5):
        a.send_message(msg(s))
    fs = frames(a)
    assert [f.seq for f in fs if isinstance(f, Fragment)] == [0, 1]
    deliver(fs, b)
    persist_all(b, received(b))
    deliver(frames(b), a)
    assert [f.seq for f in frames(a) if isinstance(f, Fragment)] == [2, 3]


def test_resubmitting_a_held_message_is_a_no_op_and_out_of_order_submission_is_sorted() -> None:
    a, b = engine(), engine()
    a.send_message(msg(1))
    a.send_message(msg(0))
    a.send_message(msg(1))
    assert a.unacked_messages == 2
    deliver(frames(a), b)
    assert [m.seq for m in received(b)] == [0, 1]


def test_a_new_link_resends_everything_unacknowledged_at_once() -> None:
    a = engine()
    a.send_message(msg(0))
    assert len(frames(a)) == 1
    a.link_down()
    assert frames(a) == []
    a.link_up()
    assert len(frames(a)) == 1


def test_forget_drops_a_conversation_in_both_directions() -> None:
    a = engine()
    a.send_message(msg(0))
    a.forget(KEY)
    assert a.unacked_messages == 0 and frames(a) == [] and not a.busy


def test_invalid_messages_are_refused_at_the_boundary() -> None:
    with pytest.raises(LocalProtocolError):
        Message(CONV, True, -1, "T", b"", "a", "b")
    with pytest.raises(LocalProtocolError):
        Message(CONV, True, 0, "T", "text", "a", "b")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        engine().send_message(Message(CONV, True, 0, "T", b"", "a", "b", priority=0))
    with pytest.raises(LocalProtocolError):
        DialogConfig(fragment_size=0)
    with pytest.raises(LocalProtocolError):
        DialogConfig(retry_initial_min=3, retry_initial_max=2)


def test_a_sender_restarted_with_another_fragment_size_still_gets_through() -> None:
    before, b = engine(DialogConfig(fragment_size=3)), engine()
    before.send_message(msg(0, b"abcdefgh"))
    deliver(frames(before)[:2], b)  # then the sender crashes
    after = engine(DialogConfig(fragment_size=5))
    after.send_message(msg(0, b"abcdefgh"))
    deliver(frames(after), b)
    assert [m.body for m in received(b)] == [b"abcdefgh"]


def test_an_ack_beyond_the_send_window_skips_messages_the_peer_already_holds() -> None:
    """After a restart the receiver may already hold more than the sender's window."""
    a, b = engine(DialogConfig(send_window=2)), engine(DialogConfig(ack_delay=0), {KEY: 4})
    for s in range(6):
        a.send_message(msg(s))
    deliver(frames(a), b)  # 0 and 1: duplicates, acknowledged up to 4
    deliver(frames(b), a)
    assert [ev.seq for ev in a.events() if isinstance(ev, MessageAcked)] == [0, 1, 2, 3]
    assert [f.seq for f in frames(a) if isinstance(f, Fragment)] == [4, 5]


def test_pieces_that_do_not_add_up_are_dropped_and_the_retransmission_delivers() -> None:
    b = engine()
    header = msg(0, b"abcd").header()
    b.frame_received(Fragment(KEY, 0, 0, 2, b"ab", header), 0.0)
    b.frame_received(Fragment(KEY, 0, 1, 2, b"c"), 0.0)  # one byte short: a buggy peer
    assert received(b) == [] and b.partial_messages() == []
    b.frame_received(Fragment(KEY, 0, 0, 2, b"ab", header), 0.0)
    b.frame_received(Fragment(KEY, 0, 1, 2, b"cd"), 0.0)
    assert [m.body for m in received(b)] == [b"abcd"]


def test_a_whole_message_whose_length_disagrees_is_dropped_and_the_retransmission_delivers(
) -> None:
    b = engine()
    header = msg(0, b"abcd").header()
    b.frame_received(Fragment(KEY, 0, 0, 1, b"abc", header), 0.0)  # one byte short
    assert received(b) == [] and b.stats()["malformed_messages"] == 1
    b.frame_received(Fragment(KEY, 0, 0, 1, b"abcd", header), 0.0)
    b.frame_received(Fragment(KEY, 1, 0, 1, b"next", msg(1, b"next").header()), 0.0)
    assert [(m.seq, m.body) for m in received(b)] == [(0, b"abcd"), (1, b"next")]
