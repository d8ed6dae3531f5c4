"""Sender half of the dialog layer: windows, fragmentation, round-robin interleaving and
retransmission with exponential backoff.

Loss is also repaired before the retry timer (``fast_retransmit``): a message the receiver
reports missing behind later ones it holds (``AckEntry.held``) is sent again at once, and a
dialog whose last message stays unacknowledged (a lost tail, or its lost ack, which no later
message of the dialog can reveal) has it sent again as a probe, whose ack tells what is still
missing: as soon as acks arrive for messages of other dialogs sent a few transmissions after
it (the receiver acknowledges in about the order it received), or else after a few round
trips — at most ``max_probes`` times, backing off. The round-trip time comes from acks of
messages sent once. The retry timer and its backoff are unchanged; what these resend early
it simply restarts.

The caller's durable transmission queue is the source of truth: this object only holds the
messages handed to it until they are acknowledged, and may be rebuilt from that queue at any
time (re-submitting a message that is already held is a no-op).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.events import Message, MessageAcked
from sbroker.protocol.extras import PeerFields
from sbroker.protocol.frames import (
    AckEntry,
    DialogKey,
    Fragment,
    MessageHeader,
)

__all__ = ["DialogConfig", "Outbound"]

REORDER_SENDS = 4
"""Transmissions by which an ack may come out of order (a faulty link swapping frames)
before a dialog's unacknowledged last message counts as lost."""


@dataclass(frozen=True, slots=True)
class DialogConfig:
    """Tunables of the dialog layer; the defaults are SQL Server's (retry 2 to 3 s, cap ~60 s:
    docs/network.md)."""

    fragment_size: int = 32 * 1024
    send_window: int = 256
    reorder_window: int = 256
    ack_delay: float = 0.05
    reorder_delay: float = 0.01
    retry_initial_min: float = 2.0
    retry_initial_max: float = 3.0
    retry_factor: float = 2.0
    retry_max: float = 60.0
    honor_priority: bool = False
    max_acks_per_frame: int = 256
    fast_retransmit: bool = True
    max_probes: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.fragment_size <= 8 * 1024 * 1024:
            raise LocalProtocolError("fragment_size must be 1 byte .. 8 MiB")
        if self.send_window < 1 or self.reorder_window < 1:
            raise LocalProtocolError("windows must be at least 1")
        if self.ack_delay < 0 or not 0 < self.retry_initial_min <= self.retry_initial_max:
            raise LocalProtocolError("bad ack delay or initial retry interval")
        if self.reorder_delay < 0:
            raise LocalProtocolError("reorder_delay must be >= 0")
        if self.retry_factor < 1 or self.retry_max < self.retry_initial_max:
            raise LocalProtocolError("bad retry factor or cap")
        if not 1 <= self.max_acks_per_frame <= 4096:
            raise LocalProtocolError("max_acks_per_frame must be 1..4096")
        if self.max_probes < 0:
            raise LocalProtocolError("max_probes must be >= 0")


class _OutMsg:
    """One unacknowledged message and where its current transmission stands."""

    __slots__ = ("count", "fast_at", "gen", "header", "message", "next_index", "queued",
                 "resent", "rto", "sent_at", "sent_no", "traced")

    def __init__(self, message: Message, header: MessageHeader, count: int, rto: float) -> None:
        self.message = message
        self.header = header
        self.count = count
        self.next_index = 0
        self.rto = rto
        self.gen = 0
        self.queued = False
        self.sent_at: float | None = None  # when its last fragment last went out
        self.sent_no = 0  # the Outbound's count of whole messages sent, at that moment
        self.resent = False  # sent more than once: its ack times no round trip
        self.fast_at = -math.inf  # when an ack last had it resent at once
        self.traced = False  # fragment 0 went with optional fields on the current link


class _OutDialog:
    """Unacknowledged messages of one dialog direction, in seq order."""

    __slots__ = ("by_seq", "jobs", "msgs", "probe_at", "probe_queued", "probes", "released",
                 "resent_at")

    def __init__(self) -> None:
        self.msgs: deque[_OutMsg] = deque()
        self.by_seq: dict[int, _OutMsg] = {}
        self.released = 0  # msgs[:released] are inside the send window
        self.jobs: list[int] = []  # heap of seqs waiting for (re)transmission
        self.probe_at: float | None = None  # when to probe the tail, if no ack comes first
        self.probe_queued: float | None = None  # its entry in Outbound._probes (lazily moved)
        self.probes = 0  # probes since the last ack that moved forward
        self.resent_at = -math.inf  # the last early or timed resend of any of its messages


class Outbound:
    """Holds messages until acknowledged and yields their fragments fairly."""

    def __init__(self, config: DialogConfig, rng: random.Random) -> None:
        self.config = config
        self._rng = rng
        self._dialogs: dict[DialogKey, _OutDialog] = {}
        self._active: deque[DialogKey] = deque()
        self._active_set: set[DialogKey] = set()
        self._turn_used = 0
        self._timers: list[tuple[float, int, DialogKey, int, int]] = []
        self._probes: list[tuple[float, int, DialogKey]] = []  # lazily moved (probe_at)
        self._tick = 0
        self._sends = 0  # whole messages sent (transmissions), counting resends
        self._acked_no = 0  # the latest transmission (sent once) an ack covered
        self._tails: list[tuple[int, DialogKey]] = []  # (its sent_no, dialog) waiting for acks
        self._link_up = False
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._min_rtt = math.inf
        self.fields = PeerFields()  # whether fragment 0 carries optional fields (trace)
        self.retransmissions = 0
        self.fast_retransmissions = 0
        self.probes = 0
        self.fragments_sent = 0
        self.unacked = 0

    # -- submission and acknowledgement ---------------------------------------------------

    def submit(self, message: Message) -> None:
        """Take a message for transmission; one already held (same key and seq) is ignored."""
        header = message.header()  # validates names, priority and instances
        key = message.key
        d = self._dialogs.get(key)
        if d is None:
            d = self._dialogs[key] = _OutDialog()
        if message.seq in d.by_seq:
            return
        size = self.config.fragment_size
        count = max(1, -(-len(message.body) // size))
        rto = self._rng.uniform(self.config.retry_initial_min, self.config.retry_initial_max)
        m = _OutMsg(message, header, count, rto)
        d.by_seq[message.seq] = m
        self.unacked += 1
        if not d.msgs or message.seq > d.msgs[-1].message.seq:
            d.msgs.append(m)
        else:  # re-submitted out of order: rare, keep the deque sorted
            items = sorted([*d.msgs, m], key=lambda x: x.message.seq)
            pos = items.index(m)
            d.msgs = deque(items)
            if pos < d.released:
                d.released += 1
                self._queue(key, d, m)
        self._release(key, d)

    def ack(self, entry: AckEntry, now: float) -> list[MessageAcked]:
        """Apply a cumulative acknowledgement (and resend what it reports missing); returns
        one event per message it covers."""
        d = self._dialogs.get(entry.key)
        if d is None:
            return []
        acked = []
        last = None
        while d.msgs and d.msgs[0].message.seq < entry.next_seq:
            m = last = d.msgs.popleft()
            if m.traced:
                self.fields.seen()
            del d.by_seq[m.message.seq]
            d.released = max(0, d.released - 1)  # an ack may cover unsent messages
            m.gen += 1
            self.unacked -= 1
            acked.append(MessageAcked(entry.key, m.message.seq))
        if last is not None and last.sent_at is not None and not last.resent:
            if last.sent_no > self._acked_no:
                self._acked_no = last.sent_no
            if last.sent_at > d.resent_at:  # not held up behind a repaired loss
                self._sample(now - last.sent_at, now)
        if not d.msgs:
            del self._dialogs[entry.key]
            return acked
        if acked:
            d.probes = 0
            self._release(entry.key, d)
            self._arm_probe(entry.key, d, now)
        if entry.held and self.config.fast_retransmit:
            self._resend_missing(entry, d, now)
        return acked

    def _resend_missing(self, entry: AckEntry, d: _OutDialog, now: float) -> None:
        """Queue at once the messages the receiver reports missing behind ones it holds
        (the receiver waited its reorder delay: they are lost), each at most once per two
        shortest round trips (its resend may still be on the way)."""
        held, base, by_seq = entry.held, entry.next_seq, d.by_seq
        # A resend is on its way for about a round trip without the ack delay: the shortest.
        guard = 2 * self._min_rtt if self._srtt is not None else (
            self.config.retry_initial_min / 4)
        for i in range(held.bit_length()):
            m = by_seq.get(base + i)
            if m is None:
                continue
            if not held >> i & 1 and not m.queued and m.sent_at is not None and (
                    now - m.fast_at >= guard):
                m.fast_at = d.resent_at = now
                self.fast_retransmissions += 1
                self._queue(entry.key, d, m)

    def _sample(self, rtt: float, now: float) -> None:
        """One round trip (send to ack, including the receiver's ack delay)."""
        self._min_rtt = min(self._min_rtt, rtt)
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
            for key, d in self._dialogs.items():  # tails sent before probes were possible
                if d.probe_at is None and d.released:
                    self._arm_probe(key, d, now)
        else:
            self._rttvar += (abs(self._srtt - rtt) - self._rttvar) / 4
            self._srtt += (rtt - self._srtt) / 8

    def _pto(self) -> float | None:
        """How long a dialog's tail may stay unacknowledged before a probe; None (no probes)
        until a round trip has been timed: a peer that never acks is only retried."""
        srtt, cfg = self._srtt, self.config
        if srtt is None:
            return None
        # The peer may hold its ack back by its ack delay (taken to be ours).
        pto = max(2 * srtt, srtt + 4 * self._rttvar) + cfg.ack_delay
        return min(pto, cfg.retry_initial_min / 2)

    def _arm_probe(self, key: DialogKey, d: _OutDialog, now: float) -> None:
        """Probe the dialog's tail after the probe time (backing off), unless something of
        it is queued to go anyway (the probe is armed again once that is sent)."""
        pto = self._pto()
        if (pto is None or not self.config.fast_retransmit
                or d.probes >= self.config.max_probes or self._first_job(d) is not None):
            d.probe_at = None
            return
        d.probe_at = at = now + pto * (1 << d.probes)
        if d.probe_queued is None or at < d.probe_queued:
            self._push_probe(key, d, at)
        tail = d.msgs[d.released - 1] if d.released else None
        if tail is not None and tail.sent_no:
            heapq.heappush(self._tails, (tail.sent_no, key))

    def acks_done(self, now: float) -> None:
        """After a frame's acks: probe at once the dialogs whose last message is still
        unacknowledged although acks came for messages sent well after it."""
        tails, dialogs = self._tails, self._dialogs
        while tails and tails[0][0] + REORDER_SENDS < self._acked_no:
            sent_no, key = heapq.heappop(tails)
            d = dialogs.get(key)
            if d is None or not d.released or d.probe_at is None:
                continue  # acked since, or already probed
            tail = d.msgs[d.released - 1]
            if tail.sent_no == sent_no and not tail.queued:
                d.probe_at = None
                self._probe(key, d, now)

    def _push_probe(self, key: DialogKey, d: _OutDialog, at: float) -> None:
        d.probe_queued = at
        self._tick += 1
        heapq.heappush(self._probes, (at, self._tick, key))

    def forget(self, key: DialogKey) -> None:
        """Drop every held message of `key` (the conversation ended or was cleaned up)."""
        d = self._dialogs.pop(key, None)
        if d is not None:
            self.unacked -= len(d.msgs)
            for m in d.msgs:
                m.gen += 1

    def _release(self, key: DialogKey, d: _OutDialog) -> None:
        limit = min(len(d.msgs), self.config.send_window)
        while d.released < limit:
            self._queue(key, d, d.msgs[d.released])
            d.released += 1

    def _queue(self, key: DialogKey, d: _OutDialog, m: _OutMsg) -> None:
        m.next_index = 0
        if not m.queued:
            m.queued = True
            heapq.heappush(d.jobs, m.message.seq)
        if key not in self._active_set:
            self._active_set.add(key)
            self._active.append(key)

    # -- link state -----------------------------------------------------------------------

    def link_up(self) -> None:
        """A connection is ready: everything in the windows goes again from fragment 0."""
        self._link_up = True
        for key, d in self._dialogs.items():
            d.resent_at = -math.inf  # a fresh start: acks on the new link time round trips
            d.probes = 0
            for i in range(d.released):
                m = d.msgs[i]
                m.gen += 1
                m.sent_at = None
                m.traced = False
                self._queue(key, d, m)

    def link_down(self, lost: bool = False) -> None:
        """The connection ended; `lost`: without a Close from the peer (see `PeerFields`)."""
        self._link_up = False
        if lost and self.fields.on and any(
                m.traced for d in self._dialogs.values() for m in d.msgs):
            self.fields.doubt()

    # -- producing fragments --------------------------------------------------------------

    def next_fragment(
        self, now: float, acks: Callable[[], tuple[AckEntry, ...]] = tuple
    ) -> Fragment | None:
        """The next fragment to put on the wire, carrying `acks()`, or None."""
        if not self._link_up:
            return None
        while self._active:
            key = self._active[0]
            d = self._dialogs.get(key)
            m = self._first_job(d) if d is not None else None
            if d is None or m is None:
                self._active.popleft()
                self._active_set.discard(key)
                self._turn_used = 0
                continue
            frag = self._fragment_of(m, acks())
            m.next_index += 1
            self.fragments_sent += 1
            if m.next_index == m.count:
                heapq.heappop(d.jobs)
                m.queued = False
                m.gen += 1
                m.resent = m.sent_at is not None
                m.sent_at = now
                self._sends += 1
                m.sent_no = self._sends
                self._tick += 1
                heapq.heappush(self._timers, (now + m.rto, self._tick, key, m.message.seq, m.gen))
                self._arm_probe(key, d, now)  # (not while more of the dialog is queued)
            self._turn_used += 1
            quantum = m.message.priority if self.config.honor_priority else 1
            if self._turn_used >= quantum:
                self._active.rotate(-1)
                self._turn_used = 0
            return frag
        return None

    @staticmethod
    def _first_job(d: _OutDialog) -> _OutMsg | None:
        while d.jobs:
            m = d.by_seq.get(d.jobs[0])
            if m is not None and m.queued:
                return m
            heapq.heappop(d.jobs)
        return None

    def _fragment_of(self, m: _OutMsg, acks: tuple[AckEntry, ...]) -> Fragment:
        size = self.config.fragment_size
        i = m.next_index
        msg = m.message
        payload = msg.body[i * size : (i + 1) * size]
        if i:
            return Fragment(msg.key, msg.seq, i, m.count, payload, None, acks)
        trace = msg.trace_context if self.fields.on else None
        m.traced = trace is not None
        return Fragment(msg.key, msg.seq, i, m.count, payload, m.header, acks, trace)

    # -- retransmission -------------------------------------------------------------------

    def _live(self, key: DialogKey, seq: int, gen: int) -> _OutMsg | None:
        d = self._dialogs.get(key)
        m = d.by_seq.get(seq) if d is not None else None
        return m if m is not None and m.gen == gen else None

    def handle_timer(self, now: float) -> None:
        """Retransmit every message whose retry time has come, backing off exponentially;
        probe the tails that stayed unacknowledged."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, key, seq, gen = heapq.heappop(timers)
            m = self._live(key, seq, gen)
            if m is None or not self._link_up:
                continue
            m.rto = min(m.rto * self.config.retry_factor, self.config.retry_max)
            self.retransmissions += 1
            d = self._dialogs[key]
            d.resent_at = now
            self._queue(key, d, m)
        probes = self._probes
        while probes and probes[0][0] <= now:
            at, _, key = heapq.heappop(probes)
            p = self._dialogs.get(key)
            if p is None or p.probe_queued != at:
                continue  # gone, or an earlier entry took its place
            p.probe_queued = None
            if p.probe_at is None:
                continue
            if p.probe_at > now:  # moved later since it was queued
                self._push_probe(key, p, p.probe_at)
                continue
            p.probe_at = None
            self._probe(key, p, now)

    def _probe(self, key: DialogKey, d: _OutDialog, now: float) -> None:
        """Send the dialog's last message in flight again: its ack (or the gap it reveals)
        tells the sender what the receiver still lacks."""
        if not self._link_up or not d.released or self._first_job(d) is not None:
            return
        m = d.msgs[d.released - 1]
        if m.sent_at is None:
            return
        d.probes += 1
        d.resent_at = now
        self.probes += 1
        self._queue(key, d, m)

    def next_timer(self) -> float | None:
        timers = self._timers
        while timers and self._live(timers[0][2], timers[0][3], timers[0][4]) is None:
            heapq.heappop(timers)
        probes, dialogs = self._probes, self._dialogs
        while probes:
            at, _, key = probes[0]
            d = dialogs.get(key)
            if d is not None and d.probe_queued == at:
                break
            heapq.heappop(probes)  # gone, or an earlier entry took its place
        times = [t[0][0] for t in (timers, probes) if t]
        return min(times) if times else None

    # -- introspection --------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self._active)
