"""The dialog layer toward one adjacent broker instance: exactly-once-in-order delivery.

One `DialogEngine` per peer broker instance, shared by every conversation with that peer.
It outlives connections: a `Session` attaches it when a connection is established and
detaches it when the connection ends; unacknowledged messages then go again on the next one.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

from sbroker.protocol.events import DialogEvent, Message
from sbroker.protocol.frames import Ack, DialogKey, Fragment
from sbroker.protocol.inbound import Inbound, PartialMessage
from sbroker.protocol.outbound import DialogConfig, Outbound

__all__ = ["DialogEngine"]


class DialogEngine:
    """Sans-IO dialog protocol: messages and confirmations in, frames and events out.

    `receive_state(key)` returns the durable "next expected seq" of a dialog direction (0
    for a conversation never seen); it is called once per direction and then cached, so the
    receiver de-duplicates correctly after a restart.
    """

    def __init__(
        self,
        config: DialogConfig | None = None,
        *,
        rng: random.Random,
        receive_state: Callable[[DialogKey], int],
    ) -> None:
        self.config = config or DialogConfig()
        self._out = Outbound(self.config, rng)
        self._in = Inbound(self.config, receive_state)
        self._events: deque[DialogEvent] = deque()
        self.frames_received = 0
        self.owner: object = None

    # -- caller → core --------------------------------------------------------------------

    def send_message(self, message: Message) -> None:
        """Queue `message` until acknowledged; re-submitting a held one is a no-op."""
        self._out.submit(message)

    def message_persisted(self, key: DialogKey, seq: int, now: float) -> None:
        """Message `seq` of `key` is durably enqueued (call in seq order): ack it soon."""
        self._in.persisted(key, seq, now)

    def message_refused(self, key: DialogKey, seq: int) -> None:
        """Message `seq` could not be enqueued; it and later unpersisted ones come again."""
        self._in.refused(key, seq)

    def set_receive_state(self, key: DialogKey, next_seq: int) -> None:
        """Override the durable next expected seq of `key` (e.g. after a restore)."""
        self._in.set_state(key, next_seq)

    def forget(self, key: DialogKey) -> None:
        """Drop all state of `key`, sent and received (the conversation is gone)."""
        self._out.forget(key)
        self._in.forget(key)

    # -- wire side (driven by the Session) ------------------------------------------------

    def frame_received(self, frame: Fragment | Ack, now: float) -> None:
        """Take one authenticated dialog frame from the peer."""
        self.frames_received += 1
        if frame.acks:
            for entry in frame.acks:
                self._events.extend(self._out.ack(entry, now))
            self._out.acks_done(now)
        if isinstance(frame, Fragment):
            if frame.trace is not None:  # a peer that writes optional fields reads them
                self._out.fields.seen()
            self._events.extend(self._in.fragment(frame, now))

    def next_frame(self, now: float) -> Fragment | Ack | None:
        """The next frame to send: a fragment carrying pending acks, or acks alone once due."""
        frag = self._out.next_fragment(now, lambda: self._in.take_acks(now))
        if frag is not None:
            return frag
        if self._in.ack_due(now):
            acks = self._in.take_acks(now)
            if acks:  # none when the gaps that were due have closed meanwhile
                return Ack(acks)
        return None

    def link_up(self, owner: object = None) -> None:
        """A connection (`owner`) now carries this engine; unacknowledged messages go again."""
        self.owner = owner
        self._out.link_up()

    def link_down(self, owner: object = None, lost: bool = False) -> None:
        """`owner`'s connection is gone (`lost`: without a Close from the peer, which may
        mean it could not read optional fields); ignored when another one has taken over."""
        if owner is self.owner:
            self.owner = None
            self._out.link_down(lost)

    # -- time -----------------------------------------------------------------------------

    def handle_timer(self, now: float) -> None:
        """Fire due retransmissions (acks that are due go out on the next `next_frame`)."""
        self._out.handle_timer(now)

    def next_timer(self) -> float | None:
        """When `handle_timer` / `next_frame` next has something to do, or None."""
        times = [t for t in (self._out.next_timer(), self._in.next_timer()) if t is not None]
        return min(times) if times else None

    # -- events and introspection ---------------------------------------------------------

    def next_event(self) -> DialogEvent | None:
        return self._events.popleft() if self._events else None

    def events(self) -> list[DialogEvent]:
        """All pending events at once (the queue is emptied)."""
        out = list(self._events)
        self._events.clear()
        return out

    @property
    def busy(self) -> bool:
        """Unacknowledged messages, pending acks or partial messages: not idle."""
        return bool(self._out.unacked or self._in.has_pending_acks or self._in.has_partial)

    @property
    def optional_fields(self) -> bool:
        """False once the peer is taken for one that cannot read optional fields (trace)."""
        return self._out.fields.on

    @property
    def unacked_messages(self) -> int:
        return self._out.unacked

    def partial_messages(self) -> list[PartialMessage]:
        return self._in.partial_messages()

    def stats(self) -> dict[str, int]:
        return {
            "unacked_messages": self._out.unacked,
            "fragments_sent": self._out.fragments_sent,
            "retransmissions": self._out.retransmissions,
            "fast_retransmissions": self._out.fast_retransmissions,
            "probes": self._out.probes,
            "frames_received": self.frames_received,
            "duplicates_dropped": self._in.duplicates,
            "dropped_out_of_window": self._in.dropped_out_of_window,
            "malformed_messages": self._in.malformed,
        }
