"""Receiver half of the dialog layer: de-duplication, reassembly, in-order delivery and acks
that wait for the caller's durable enqueue.

Per dialog direction two counters matter: `persisted_next` (durable, owned by the caller and
looked up once) and `delivered_next` (messages handed out but not yet confirmed). Fragments
of messages ahead of `delivered_next` are buffered within `reorder_window`; beyond it they are
dropped unacknowledged and come again by retransmission.

A message completed ahead of `delivered_next` also means a gap: an earlier message was lost,
or overtaken by a later one on a link that reorders. Once the gap has lasted
`DialogConfig.reorder_delay` (an overtaken message has come by then), acks of that dialog say
which of the following messages the receiver holds (`AckEntry.held`), so that the sender
resends the missing ones at once instead of waiting for its retry timer; the first such ack
goes out at that moment, without the ack delay.

An ack that is lost cannot be told from a lost message by the sender; when it was the last of
its dialog (no later one covers it), the sender would only find out by probing. So every ack
goes a second time two ack delays (at least 20 ms) later, unless a later ack of that dialog
has gone since.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.events import Message, MessageReceived
from sbroker.protocol.frames import (
    AckEntry,
    DialogKey,
    Fragment,
    MessageHeader,
)
from sbroker.protocol.outbound import DialogConfig

__all__ = ["HELD_BITS", "Inbound", "PartialMessage"]

HELD_BITS = 64  # messages after an ack's next_seq that its `held` bitmap covers
GAP_REPORTS = 8  # reports of one gap at least (more while the sender's first retry is not due)


@dataclass(frozen=True, slots=True)
class PartialMessage:
    """A message still being reassembled (status 2 in the queue views)."""

    key: DialogKey
    seq: int
    fragments_received: int
    fragment_count: int
    bytes_received: int


class _Reassembly:
    __slots__ = ("count", "header", "parts", "size", "trace")

    def __init__(self, count: int) -> None:
        self.count = count
        self.header: MessageHeader | None = None
        self.trace: str | None = None
        self.parts: dict[int, bytes] = {}
        self.size = 0

    @property
    def complete(self) -> bool:
        return len(self.parts) == self.count


class _InDialog:
    __slots__ = ("buffer", "delivered_next", "gap_at", "gap_reports", "persisted_next")

    def __init__(self, persisted_next: int) -> None:
        self.persisted_next = persisted_next
        self.delivered_next = persisted_next
        self.buffer: dict[int, _Reassembly] = {}
        self.gap_at: float | None = None  # when the current gap may be reported
        self.gap_reports = 0  # reports of the current gap so far

    def held(self, next_seq: int) -> int:
        """The `AckEntry.held` bitmap for an ack of `next_seq`: 0 unless messages wait
        behind a gap."""
        if not self.buffer:
            return 0
        bits = 0
        delivered = self.delivered_next
        for i in range(HELD_BITS):
            seq = next_seq + i
            if seq < delivered:
                bits |= 1 << i
            else:
                r = self.buffer.get(seq)
                if r is not None and r.complete:
                    bits |= 1 << i
        # No gap when every held message follows next_seq without a hole.
        return 0 if bits & (bits + 1) == 0 else bits


class Inbound:
    """Turns fragments into in-order `MessageReceived` events and keeps the pending acks."""

    def __init__(self, config: DialogConfig, receive_state: Callable[[DialogKey], int]) -> None:
        self.config = config
        self._lookup = receive_state
        self._dialogs: dict[DialogKey, _InDialog] = {}
        self._pending: dict[DialogKey, int] = {}
        self._gaps: dict[DialogKey, float] = {}  # gap reports due, and when
        self._repeats: dict[DialogKey, tuple[int, float]] = {}  # acks to send again, when
        self._ack_at: float | None = None
        # A standing gap is reported again every `_gap_every` seconds, `_gap_reports` times:
        # for as long as the sender's first retry takes (its retry_initial_min, taken to be
        # ours). The sender resends a reported message at most once per two of its shortest
        # round trips, and those include our time to persist (0.2 s and more on a busy
        # PostgreSQL): a resend lost as well needs a report that late to go again before
        # the retry timer.
        self._gap_every = max(2 * config.ack_delay, 2 * config.reorder_delay, 0.01)
        self._gap_reports = max(GAP_REPORTS,
                                math.ceil(config.retry_initial_min / self._gap_every))
        self.duplicates = 0
        self.dropped_out_of_window = 0
        self.buffered = 0  # messages held in reassembly / reorder buffers
        self.malformed = 0  # complete messages whose pieces did not add up (dropped)

    def _dialog(self, key: DialogKey) -> _InDialog:
        d = self._dialogs.get(key)
        if d is None:
            next_seq = self._lookup(key)
            if not isinstance(next_seq, int) or next_seq < 0:
                raise LocalProtocolError("receive_state must return a non-negative int")
            d = self._dialogs[key] = _InDialog(next_seq)
        return d

    def set_state(self, key: DialogKey, next_seq: int) -> None:
        """Tell the core the durable next expected seq of `key` (overrides the lookup)."""
        if next_seq < 0:
            raise LocalProtocolError("next_seq must be non-negative")
        self.forget(key)
        self._dialogs[key] = _InDialog(next_seq)

    def forget(self, key: DialogKey) -> None:
        d = self._dialogs.pop(key, None)
        if d is not None:
            self.buffered -= len(d.buffer)
        self._pending.pop(key, None)
        self._gaps.pop(key, None)
        self._repeats.pop(key, None)

    # -- fragments in ---------------------------------------------------------------------

    def fragment(self, frag: Fragment, now: float) -> list[MessageReceived]:
        """Take one authenticated fragment; returns the messages it completes, in order."""
        d = self._dialog(frag.key)
        seq = frag.seq
        if seq < d.persisted_next:
            self.duplicates += 1
            self._want_ack(frag.key, d.persisted_next, now)
            return []
        if seq < d.delivered_next:
            self.duplicates += 1  # delivered, waiting for the caller to persist it
            return []
        if seq >= d.delivered_next + self.config.reorder_window:
            self.dropped_out_of_window += 1
            return []
        if seq == d.delivered_next and frag.count == 1 and not d.buffer:
            return self._whole(frag, d)  # the common case: the next message, in one piece
        r = d.buffer.get(seq)
        if r is None:
            r = d.buffer[seq] = _Reassembly(frag.count)
            self.buffered += 1
        elif r.count != frag.count:
            # the sender restarted with another fragment size: start this message afresh
            r = d.buffer[seq] = _Reassembly(frag.count)
        if frag.index in r.parts:
            self.duplicates += 1
            if d.gap_at is not None:  # resent while it waits: the gap report was lost
                self._want_ack(frag.key, d.persisted_next, now)
            return []
        r.parts[frag.index] = frag.payload
        r.size += len(frag.payload)
        if frag.header is not None:
            r.header, r.trace = frag.header, frag.trace
        if seq != d.delivered_next:
            if r.complete and d.gap_at is None:
                self._gap(frag.key, d, now)
            return []
        if not r.complete:
            return []
        out = []
        while r is not None and r.complete:
            del d.buffer[d.delivered_next]
            self.buffered -= 1
            message = self._assemble(frag.key, d.delivered_next, r)
            if message is None:  # inconsistent pieces: drop them, retransmission retries
                self.malformed += 1
                break
            out.append(MessageReceived(message))
            d.delivered_next += 1
            r = d.buffer.get(d.delivered_next)
        d.gap_at = None
        if d.buffer:  # the front of the gap is filled, a later hole may remain
            self._gap(frag.key, d, now)
        return out

    def _gap(self, key: DialogKey, d: _InDialog, now: float) -> None:
        """A message completed behind a missing one: an ack of the dialog reports the gap
        once it has lasted the reorder delay."""
        d.gap_at = self._gaps[key] = at = now + self.config.reorder_delay
        d.gap_reports = 0
        if self._ack_at is None or self._ack_at > at:
            self._ack_at = at

    def _whole(self, frag: Fragment, d: _InDialog) -> list[MessageReceived]:
        """The next expected message arrived whole and nothing waits behind it."""
        header = frag.header
        if header is None or len(frag.payload) != header.body_length:
            self.malformed += 1  # inconsistent: dropped, retransmission retries
            return []
        d.delivered_next += 1
        return [MessageReceived(Message.from_header(frag.key, frag.seq, header, frag.payload,
                                                    frag.trace))]

    @staticmethod
    def _assemble(key: DialogKey, seq: int, r: _Reassembly) -> Message | None:
        header = r.header
        if header is None or r.size != header.body_length:
            return None
        body = b"".join(r.parts[i] for i in range(r.count))
        return Message.from_header(key, seq, header, body, r.trace)

    # -- caller confirmations -------------------------------------------------------------

    def persisted(self, key: DialogKey, seq: int, now: float) -> None:
        """The caller durably enqueued message `seq`: it may now be acknowledged."""
        d = self._dialogs.get(key)
        if d is None or seq != d.persisted_next or seq >= d.delivered_next:
            raise LocalProtocolError(f"message {seq} of {key} is not the next one delivered")
        d.persisted_next += 1
        self._want_ack(key, d.persisted_next, now)

    def refused(self, key: DialogKey, seq: int) -> None:
        """The caller could not enqueue `seq`: it and later delivered ones come again."""
        d = self._dialogs.get(key)
        if d is None or not d.persisted_next <= seq < d.delivered_next:
            raise LocalProtocolError(f"message {seq} of {key} is not awaiting persistence")
        d.delivered_next = seq

    # -- acks out -------------------------------------------------------------------------

    def _want_ack(self, key: DialogKey, next_seq: int, now: float) -> None:
        if self._pending.get(key, -1) < next_seq:
            self._pending[key] = next_seq
        at = now + self.config.ack_delay
        if self._ack_at is None or self._ack_at > at:  # (a gap report may be due later)
            self._ack_at = at

    def ack_due(self, now: float) -> bool:
        return self._ack_at is not None and now >= self._ack_at

    def next_timer(self) -> float | None:
        return self._ack_at

    def take_acks(self, now: float) -> tuple[AckEntry, ...]:
        """Up to `max_acks_per_frame` pending acks, removed from the pending set; a gap that
        has lasted the reorder delay makes its dialog's ack report what is held."""
        pending, dialogs, repeats = self._pending, self._dialogs, self._repeats
        if self._gaps:
            self._due_gaps(now)
        if repeats:
            self._due_repeats(now)
        if not pending:
            self._ack_at = self._next_due()
            return ()
        limit = self.config.max_acks_per_frame
        again = now + max(2 * self.config.ack_delay, 0.02)
        out = []
        for key, next_seq in pending.items():
            d = dialogs.get(key)
            held = 0
            if d is not None and d.gap_at is not None and d.gap_at <= now:
                held = d.held(next_seq)
            out.append(AckEntry(key, next_seq, held))
            if repeats.get(key, (-1,))[0] == next_seq:
                del repeats[key]  # this is the repeat
            elif not held:
                repeats[key] = (next_seq, again)
            if len(out) == limit:
                break
        for entry in out:
            del pending[entry.key]
        if not pending:
            self._ack_at = self._next_due()
        return tuple(out)

    def _next_due(self) -> float | None:
        """When the next gap report or repeated ack is due."""
        times = [*self._gaps.values(), *(at for _, at in self._repeats.values())]
        return min(times) if times else None

    def _due_repeats(self, now: float) -> None:
        """Acks due again: pending once more, unless a later ack of the dialog went since
        (it has its own repeat)."""
        for key, (next_seq, at) in list(self._repeats.items()):
            if at > now:
                continue
            d = self._dialogs.get(key)
            if d is None or d.persisted_next != next_seq:
                del self._repeats[key]
            elif self._pending.get(key, -1) < next_seq:
                self._pending[key] = next_seq

    def _due_gaps(self, now: float) -> None:
        """Gaps that have lasted the reorder delay (and still stand) get an ack, and again
        every two ack delays while they stand (a resend may be lost too), until the sender's
        retry timer would resend anyway."""
        due = [key for key, at in self._gaps.items() if at <= now]
        for key in due:
            del self._gaps[key]
            d = self._dialogs.get(key)
            if d is None or d.gap_at is None:
                continue
            if self._pending.get(key, -1) < d.persisted_next:
                self._pending[key] = d.persisted_next
            d.gap_reports += 1
            if d.gap_reports < self._gap_reports:
                self._gaps[key] = now + self._gap_every

    # -- introspection --------------------------------------------------------------------

    @property
    def has_pending_acks(self) -> bool:
        return bool(self._pending or self._gaps or self._repeats)

    @property
    def has_partial(self) -> bool:
        return self.buffered > 0

    def partial_messages(self) -> list[PartialMessage]:
        return [
            PartialMessage(key, seq, len(r.parts), r.count, r.size)
            for key, d in self._dialogs.items()
            for seq, r in sorted(d.buffer.items())
        ]
