"""An in-memory wire between brokers' network services, in place of TCP.

`Wire.transport` has `BrokerTransport`'s signature: put it in `NetworkService.transport_factory`
before the broker starts, and the real receiver, transmitter and protocol sessions run over
frames the wire carries. The wire drops, duplicates and delays (hence reorders) frames under
one seeded `random.Random`, and delivers them on a `FakeClock`, which `Wire.run` moves to
the next delivery or timer whenever nothing is due. The test's thread does all the stepping;
the transmitter's thread only hands messages over (`send_many`), which the next step takes.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from sbroker import FakeClock
from sbroker.protocol import (
    AuthenticationFailed,
    DialogEngine,
    DialogKey,
    Established,
    Message,
    MessageAcked,
    PartialMessage,
    Session,
    SessionConfig,
)
from sbroker.services.network.transport import Address, TransportConfig, TransportHandler

REDIAL_SECONDS = 0.5


@dataclass
class Faults:
    """Chance per frame of each fault, and the wire's delays (seconds)."""

    drop: float = 0.05
    duplicate: float = 0.05
    reorder: float = 0.05
    delay: float = 0.001  # every frame's trip
    reorder_delay: float = 0.02  # most a reordered frame is held back on top of it


@dataclass
class Counts:
    """What the wire did, so that a test can show its faults really happened."""

    frames: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    delivered: dict[Address, int] = field(default_factory=lambda: defaultdict(int))


@dataclass(eq=False)
class Link:
    """One connection: the dialling transport's session and the accepting one's."""

    dialer: MemoryTransport
    acceptor: MemoryTransport
    dialing: Session
    accepting: Session
    alive: bool = True

    def sides(self) -> tuple[tuple[MemoryTransport, Session], tuple[MemoryTransport, Session]]:
        return (self.dialer, self.dialing), (self.acceptor, self.accepting)


class Wire:
    """The brokers' shared medium: addresses, links, frames in flight and the fake clock."""

    def __init__(self, clock: FakeClock, seed: int, faults: Faults | None = None) -> None:
        self.clock = clock
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.counts = Counts()
        self.lock = threading.RLock()  # the transports' state; other threads only queue
        self.calls = threading.Condition(self.lock)
        self.transports: dict[Address, MemoryTransport] = {}
        self.links: list[Link] = []
        self.redial_at: dict[tuple[MemoryTransport, Address], float] = {}
        self._frames: list[tuple[float, int, Link, bool, bytes]] = []
        self._ticks = itertools.count()
        self._ports = itertools.count(40_001)

    def transport(self, config: TransportConfig, handler: TransportHandler, *,
                  rng: random.Random | None = None, clock: Callable[[], float] | None = None,
                  wall_clock: Callable[[], float] | None = None) -> MemoryTransport:
        """The transport factory. The wire's seed and clock stand in for the service's
        randomness and clocks, so that one seed replays one run."""
        return MemoryTransport(self, config, handler, random.Random(self.rng.getrandbits(64)))

    # -- frames ---------------------------------------------------------------------------
    def put(self, link: Link, to_dialer: bool, data: bytes) -> None:
        f, rng, n = self.faults, self.rng, self.counts
        n.frames += 1
        if rng.random() < f.drop:
            n.dropped += 1
            return
        copies = 1
        if rng.random() < f.duplicate:
            n.duplicated += 1
            copies = 2
        for _ in range(copies):
            delay = f.delay
            if rng.random() < f.reorder:
                n.reordered += 1
                delay += rng.uniform(0.0, f.reorder_delay)
            at = round(self.clock.monotonic() + delay, 3)  # a 1 ms grid: steps batch frames
            heapq.heappush(self._frames, (at, next(self._ticks), link, to_dialer, data))

    # -- stepping -------------------------------------------------------------------------
    def step(self) -> bool:
        """Do everything due now; True when something happened."""
        with self.lock:
            now = self.clock.monotonic()
            progress = any([t.take_calls(now) for t in list(self.transports.values())])
            while self._frames and self._frames[0][0] <= now:
                _, _, link, to_dialer, data = heapq.heappop(self._frames)
                if link.alive:
                    (link.dialing if to_dialer else link.accepting).receive_data(data, now)
                    progress = True
            for link in list(self.links):
                for _, session in link.sides():
                    t = session.next_timer()
                    if t is not None and t <= now:
                        session.handle_timer(now)
                        progress = True
                progress = self._events(link, now) or progress
            for transport in list(self.transports.values()):
                progress = transport.dialog_events(now) or progress
            for link in list(self.links):
                progress = self._write(link, now) or progress
            for (transport, address), at in list(self.redial_at.items()):
                if at <= now:
                    del self.redial_at[(transport, address)]
                    transport.redial(address, now)
                    progress = True
            return progress

    def _events(self, link: Link, now: float) -> bool:
        progress = False
        for transport, session in link.sides():
            while (ev := session.next_event()) is not None:
                progress = True
                if isinstance(ev, Established):
                    transport.established(link, session, ev.peer_instance)
                elif isinstance(ev, AuthenticationFailed):
                    transport.handler.connection_failed(link.acceptor.address, ev.reason)
        if link.alive and (link.dialing.closed or link.accepting.closed):
            self.drop(link, now)
            progress = True
        return progress

    def _write(self, link: Link, now: float) -> bool:
        progress = False
        for _, session in link.sides():
            for data in session.frames_to_send(now):
                self.put(link, session is link.accepting, data)
                progress = True
        return progress

    def drop(self, link: Link, now: float) -> None:
        """The connection is gone: both sessions learn it; the dialler redials if it must."""
        link.alive = False
        for _, session in link.sides():
            session.connection_lost(now)
            while session.next_event() is not None:
                pass
        self.links.remove(link)
        for transport in (link.dialer, link.acceptor):
            transport.link_gone(link)

    def next_time(self) -> float | None:
        times = [self._frames[0][0]] if self._frames else []
        times += self.redial_at.values()
        for link in self.links:
            for _, session in link.sides():
                t = session.next_timer()
                if t is not None:
                    times.append(t)
        return min(times, default=None)

    def quiet(self) -> bool:
        """Nothing in flight and nothing owed: only another thread can start something."""
        with self.lock:
            return not self._frames and not any(t.owes() for t in self.transports.values())

    def run(self, done: Callable[[], bool], stall: float = 30.0) -> None:
        """Step until `done()`, moving the fake clock when nothing is due. When the wire is
        quiet it waits (real time, at most `stall` seconds) for a transmitter's hand-over."""
        while not done():
            if self.step():
                continue
            if self.quiet():
                with self.calls:
                    if not any(t.inbox for t in self.transports.values()):
                        assert self.calls.wait(stall), "the wire stalled: nothing to carry"
                continue
            nxt = self.next_time()
            assert nxt is not None, "the wire waits for nothing"
            now = self.clock.monotonic()
            self.clock.advance(max(0.0, nxt - now))


class MemoryTransport:
    """One broker's side of the wire: `BrokerTransport`'s interface, no sockets or threads."""

    def __init__(self, wire: Wire, config: TransportConfig, handler: TransportHandler,
                 rng: random.Random) -> None:
        self.wire = wire
        self.config = config
        self.handler = handler
        self.rng = rng
        self.address: Address = ("127.0.0.1", 0)
        self.inbox: list[tuple[list[Message], Address, UUID | None] | DialogKey] = []
        self.engines: dict[UUID, DialogEngine] = {}
        self.peers: dict[UUID, Address] = {}
        self.waiting: defaultdict[Address, list[Message]] = defaultdict(list)

    # -- the service's side (any thread) --------------------------------------------------
    def start(self) -> Address:
        with self.wire.lock:
            self.address = ("127.0.0.1", next(self.wire._ports))
            self.wire.transports[self.address] = self
        return self.address

    def stop(self) -> None:
        with self.wire.lock:
            self.wire.transports.pop(self.address, None)
            for link in [x for x in self.wire.links if self in (x.dialer, x.acceptor)]:
                self.wire.drop(link, self.wire.clock.monotonic())

    def send_many(self, messages: list[Message], address: Address,
                  peer: UUID | None = None) -> None:
        with self.wire.calls:
            self.inbox.append((list(messages), address, peer))
            self.wire.calls.notify_all()

    def forget(self, key: DialogKey) -> None:
        with self.wire.calls:
            self.inbox.append(key)
            self.wire.calls.notify_all()

    def connections(self) -> list[dict[str, object]]:
        with self.wire.lock:
            return [{"is_accept": link.acceptor is self, "state_desc": "CONNECTED",
                     "peer_instance": str(link.acceptor.config.instance),
                     "peer": f"{link.acceptor.address[0]}:{link.acceptor.address[1]}"}
                    for link in self.wire.links if self in (link.dialer, link.acceptor)]

    def partial_messages(self) -> list[tuple[UUID, PartialMessage]]:
        with self.wire.lock:
            return [(p, m) for p, e in self.engines.items() for m in e.partial_messages()]

    # -- the wire's side (the stepping thread, under the wire's lock) ---------------------
    def engine(self, peer: UUID) -> DialogEngine:
        e = self.engines.get(peer)
        if e is None:
            e = self.engines[peer] = DialogEngine(self.config.dialog, rng=self.rng,
                                                  receive_state=self.handler.receive_state)
        return e

    def take_calls(self, now: float) -> bool:
        calls, self.inbox = self.inbox, []
        for call in calls:
            if isinstance(call, DialogKey):
                for e in self.engines.values():
                    e.forget(call)
                continue
            messages, address, peer = call
            peer = peer or next((p for p, a in self.peers.items() if a == address), None)
            if peer is None:
                self.waiting[address] += messages
            else:
                for message in messages:
                    self.engine(peer).send_message(message)
            self.redial(address, now)
        return bool(calls)

    def redial(self, address: Address, now: float) -> None:
        """Open a link to `address` unless one exists (either way) or nothing waits."""
        wire = self.wire
        other = wire.transports.get(address)
        if any(self in (x.dialer, x.acceptor) and other in (x.dialer, x.acceptor)
               for x in wire.links) or (self, address) in wire.redial_at:
            return
        if other is None:
            self.handler.connection_failed(address, f"no broker at {address[0]}:{address[1]}")
            wire.redial_at[(self, address)] = now + REDIAL_SECONDS
            return
        wire.links.append(Link(self, other, self.session(True, now), other.session(False, now)))

    def session(self, initiator: bool, now: float) -> Session:
        cfg = self.config
        sc = SessionConfig(cfg.instance, secret=cfg.secret, handshake_timeout=cfg.handshake_timeout,
                           idle_timeout=cfg.idle_timeout)
        return Session(sc, initiator=initiator, rng=self.rng, now=now, engine_for=self.engine)

    def established(self, link: Link, session: Session, peer: UUID) -> None:
        if session is link.dialing:
            self.peers[peer] = link.acceptor.address
            for message in self.waiting.pop(link.acceptor.address, []):
                self.engine(peer).send_message(message)

    def dialog_events(self, now: float) -> bool:
        """Acknowledgements to the transmitter; received messages through the receiver
        (durably, as the real applier does), then the protocol is told they are held."""
        progress = False
        for peer, engine in list(self.engines.items()):
            events = engine.events()
            if not events:
                continue
            progress = True
            acks = [ev for ev in events if isinstance(ev, MessageAcked)]
            if acks:
                self.handler.acked(peer, acks)
            messages = [ev.message for ev in events if not isinstance(ev, MessageAcked)]
            if not messages:
                continue
            try:
                self.handler.deliver(peer, messages)
            except Exception:  # not enqueued now: retransmission brings them again
                first: dict[DialogKey, int] = {}
                for m in messages:
                    first.setdefault(m.key, m.seq)
                for key, seq in first.items():
                    engine.message_refused(key, seq)
                continue
            self.wire.counts.delivered[self.address] += len(messages)
            for m in messages:
                engine.message_persisted(m.key, m.seq, now)
        return progress

    def owes(self) -> bool:
        """Messages waiting for a link or for an acknowledgement, or acks to send."""
        return bool(any(self.waiting.values()) or any(e.busy for e in self.engines.values()))

    def link_gone(self, link: Link) -> None:
        if link.dialer is self and self.owes():
            self.wire.redial_at.setdefault((self, link.acceptor.address),
                                           self.wire.clock.monotonic() + REDIAL_SECONDS)
