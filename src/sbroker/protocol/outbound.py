"""Sender half of the dialog layer: windows, fragmentation, round-robin interleaving and
retransmission with exponential backoff.

The caller's durable transmission queue is the source of truth: this object only holds the
messages handed to it until they are acknowledged, and may be rebuilt from that queue at any
time (re-submitting a message that is already held is a no-op).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.events import Message, MessageAcked
from sbroker.protocol.frames import (
    AckEntry,
    DialogKey,
    Fragment,
    MessageHeader,
)

__all__ = ["DialogConfig", "Outbound"]


@dataclass(frozen=True, slots=True)
class DialogConfig:
    """Tunables of the dialog layer; the defaults follow the seed (retry 2 to 3 s, cap ~60 s)."""

    fragment_size: int = 32 * 1024
    send_window: int = 256
    reorder_window: int = 256
    ack_delay: float = 0.05
    retry_initial_min: float = 2.0
    retry_initial_max: float = 3.0
    retry_factor: float = 2.0
    retry_max: float = 60.0
    honor_priority: bool = False
    max_acks_per_frame: int = 256

    def __post_init__(self) -> None:
        if not 1 <= self.fragment_size <= 8 * 1024 * 1024:
            raise LocalProtocolError("fragment_size must be 1 byte .. 8 MiB")
        if self.send_window < 1 or self.reorder_window < 1:
            raise LocalProtocolError("windows must be at least 1")
        if self.ack_delay < 0 or not 0 < self.retry_initial_min <= self.retry_initial_max:
            raise LocalProtocolError("bad ack delay or initial retry interval")
        if self.retry_factor < 1 or self.retry_max < self.retry_initial_max:
            raise LocalProtocolError("bad retry factor or cap")
        if not 1 <= self.max_acks_per_frame <= 4096:
            raise LocalProtocolError("max_acks_per_frame must be 1..4096")


class _OutMsg:
    """One unacknowledged message and where its current transmission stands."""

    __slots__ = ("count", "gen", "header", "message", "next_index", "queued", "rto")

    def __init__(self, message: Message, header: MessageHeader, count: int, rto: float) -> None:
        self.message = message
        self.header = header
        self.count = count
        self.next_index = 0
        self.rto = rto
        self.gen = 0
        self.queued = False


class _OutDialog:
    """Unacknowledged messages of one dialog direction, in seq order."""

    __slots__ = ("by_seq", "jobs", "msgs", "released")

    def __init__(self) -> None:
        self.msgs: deque[_OutMsg] = deque()
        self.by_seq: dict[int, _OutMsg] = {}
        self.released = 0  # msgs[:released] are inside the send window
        self.jobs: list[int] = []  # heap of seqs waiting for (re)transmission


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
        self._tick = 0
        self._link_up = False
        self.retransmissions = 0
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

    def ack(self, entry: AckEntry) -> list[MessageAcked]:
        """Apply a cumulative acknowledgement; returns one event per message it covers."""
        d = self._dialogs.get(entry.key)
        if d is None:
            return []
        acked = []
        while d.msgs and d.msgs[0].message.seq < entry.next_seq:
            m = d.msgs.popleft()
            del d.by_seq[m.message.seq]
            d.released = max(0, d.released - 1)  # an ack may cover unsent messages
            m.gen += 1
            self.unacked -= 1
            acked.append(MessageAcked(entry.key, m.message.seq))
        if not d.msgs:
            del self._dialogs[entry.key]
        elif acked:
            self._release(entry.key, d)
        return acked

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
            for i in range(d.released):
                m = d.msgs[i]
                m.gen += 1
                self._queue(key, d, m)

    def link_down(self) -> None:
        self._link_up = False

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
                self._tick += 1
                heapq.heappush(self._timers, (now + m.rto, self._tick, key, m.message.seq, m.gen))
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
        header = m.header if i == 0 else None
        return Fragment(msg.key, msg.seq, i, m.count, payload, header, acks)

    # -- retransmission -------------------------------------------------------------------

    def _live(self, key: DialogKey, seq: int, gen: int) -> _OutMsg | None:
        d = self._dialogs.get(key)
        m = d.by_seq.get(seq) if d is not None else None
        return m if m is not None and m.gen == gen else None

    def handle_timer(self, now: float) -> None:
        """Retransmit every message whose retry time has come, backing off exponentially."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, key, seq, gen = heapq.heappop(timers)
            m = self._live(key, seq, gen)
            if m is None or not self._link_up:
                continue
            m.rto = min(m.rto * self.config.retry_factor, self.config.retry_max)
            self.retransmissions += 1
            self._queue(key, self._dialogs[key], m)

    def next_timer(self) -> float | None:
        timers = self._timers
        while timers and self._live(timers[0][2], timers[0][3], timers[0][4]) is None:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    # -- introspection --------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self._active)
