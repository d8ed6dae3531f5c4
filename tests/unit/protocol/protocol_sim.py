"""Deterministic simulation of broker instances running the sans-IO protocol core.

Nodes talk over an in-memory wire that drops, duplicates, delays (hence reorders) and
corrupts frames under one seeded `random.Random`, on a fake clock that jumps to the next
timer or delivery when everything waits. Each node's "application" keeps durable state in
dicts (its queues, its transmission queue, its next expected seq per dialog) and may crash:
it then loses every volatile object (engines, sessions, unpersisted deliveries) and restarts
from the durable state alone, re-submitting its transmission queue.

Forwarding is hop by hop: a middle node acknowledges a relayed message once it holds it in
its own durable transmission queue, and then owns its delivery to the next hop.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict
from dataclasses import dataclass
from uuid import UUID

from support.old_peer import OldSession

from sbroker.protocol import (
    AuthenticationFailed,
    ConnectionClosed,
    DialogConfig,
    DialogEngine,
    DialogKey,
    Established,
    Message,
    MessageAcked,
    MessageReceived,
    Session,
    SessionConfig,
)

SECRET = b"correct horse battery staple"


@dataclass
class Faults:
    """Per-frame fault probabilities and the wire's delay range (seconds)."""

    drop: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    min_delay: float = 0.001
    max_delay: float = 0.005
    crash_interval: float | None = None  # mean seconds between application crashes
    refuse: float = 0.0  # chance the application refuses to persist a delivery
    commit: float = 1.0  # chance per step that an application commits what it was given


class Node:
    """One broker instance: durable dicts plus volatile protocol objects."""

    def __init__(self, sim: Sim, name: str, services: set[str]) -> None:
        self.sim = sim
        self.name = name
        self.instance = UUID(int=sim.rng.getrandbits(128))
        self.services = services
        self.secret = SECRET
        self.routes: dict[str, UUID] = {}
        self.old = False  # decodes fragments as brokers before the optional fields did
        # durable
        self.queue: dict[DialogKey, list[bytes]] = defaultdict(list)
        self.next_seq: dict[DialogKey, int] = defaultdict(int)
        self.txq: dict[UUID, dict[tuple[DialogKey, int], Message]] = defaultdict(dict)
        # volatile
        self.engines: dict[UUID, DialogEngine] = {}
        self.pending: list[tuple[UUID, Message]] = []
        self.crashes = 0

    def engine(self, peer: UUID) -> DialogEngine:
        e = self.engines.get(peer)
        if e is None:
            e = self.engines[peer] = DialogEngine(
                self.sim.dialog_config,
                rng=self.sim.rng,
                receive_state=lambda key: self.next_seq[key],
            )
            for _, msg in sorted(self.txq[peer].items(), key=lambda kv: kv[0][1]):
                e.send_message(msg)
        return e

    def send(self, msg: Message) -> None:
        """Durably queue `msg` for its next hop and hand it to the core."""
        peer = self.routes[msg.to_service]
        self.txq[peer][(msg.key, msg.seq)] = msg
        self.engine(peer).send_message(msg)

    def wants(self, peer: UUID) -> bool:
        e = self.engines.get(peer)
        return bool(self.txq[peer]) or (e is not None and e.busy)

    def on_dialog_event(self, peer: UUID, ev: MessageReceived | MessageAcked) -> None:
        if isinstance(ev, MessageAcked):
            hop = self.sim.by_instance[peer]
            assert hop.next_seq[ev.key] > ev.seq, "acked before the next hop persisted it"
            del self.txq[peer][(ev.key, ev.seq)]
            self.sim.acked += 1
        else:
            self.pending.append((peer, ev.message))

    def commit(self, now: float) -> None:
        """Persist what was delivered (or refuse some of it), then tell the cores."""
        refused: set[DialogKey] = set()
        for peer, msg in self.pending:
            key = msg.key
            if key in refused:
                continue
            engine = self.engines[peer]
            if self.sim.rng.random() < self.sim.faults.refuse:
                refused.add(key)
                engine.message_refused(key, msg.seq)
                continue
            assert msg.seq == self.next_seq[key], f"{self.name}: {key} got {msg.seq}"
            self.next_seq[key] += 1
            if msg.to_service in self.services:
                self.queue[key].append(msg.body)
                self.sim.delivered += 1
            else:
                self.send(msg)
            engine.message_persisted(key, msg.seq, now)
        self.pending.clear()

    def crash(self) -> None:
        """Lose everything volatile; durable dicts survive."""
        self.crashes += 1
        self.engines.clear()
        self.pending.clear()


class Connection:
    """One simulated TCP connection: an initiator session and a responder session."""

    def __init__(self, sim: Sim, a: Node, b: Node, now: float) -> None:
        self.sim, self.a, self.b = sim, a, b
        self.sa = (OldSession if a.old else Session)(
            sim.session_config(a, expected=b.instance),
            initiator=True,
            rng=sim.rng,
            now=now,
            engine_for=a.engine,
        )
        self.sb = (OldSession if b.old else Session)(
            sim.session_config(b), initiator=False, rng=sim.rng, now=now, engine_for=b.engine
        )
        self.alive = True
        self.crashes = (a.crashes, b.crashes)  # a connection never outlives a crash of its ends

    def sides(self) -> tuple[tuple[Node, Session, Node], tuple[Node, Session, Node]]:
        return (self.a, self.sa, self.b), (self.b, self.sb, self.a)


class Sim:
    """The whole world: nodes, links, the lossy wire and the fake clock."""

    def __init__(
        self,
        seed: int,
        faults: Faults | None = None,
        dialog_config: DialogConfig | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.dialog_config = dialog_config or DialogConfig()
        self.now = 0.0
        self.nodes: list[Node] = []
        self.by_instance: dict[UUID, Node] = {}
        self.links: dict[frozenset[UUID], Connection | None] = {}
        self.retry_at: dict[frozenset[UUID], float] = {}
        self.wire: list[tuple[float, int, Connection, bool, bytes]] = []
        self.tick = 0
        self.delivered = 0
        self.acked = 0
        self.frames = 0
        self.auth_failures: list[str] = []
        self.next_crash = self._next_crash_time()

    def add_node(self, name: str, services: set[str]) -> Node:
        node = Node(self, name, services)
        self.nodes.append(node)
        self.by_instance[node.instance] = node
        return node

    def link(self, a: Node, b: Node) -> None:
        self.links[frozenset((a.instance, b.instance))] = None

    def session_config(self, node: Node, expected: UUID | None = None) -> SessionConfig:
        return SessionConfig(node.instance, secret=node.secret, expected_peer=expected)

    def _next_crash_time(self) -> float:
        interval = self.faults.crash_interval
        return float("inf") if interval is None else self.now + self.rng.expovariate(1 / interval)

    # -- the wire -------------------------------------------------------------------------

    def _put(self, conn: Connection, to_initiator: bool, data: bytes) -> None:
        f, rng = self.faults, self.rng
        self.frames += 1
        if rng.random() < f.drop:
            return
        copies = 2 if rng.random() < f.duplicate else 1
        for _ in range(copies):
            payload = data
            if rng.random() < f.corrupt:
                bit = rng.randrange(len(data) * 8)
                buf = bytearray(data)
                buf[bit // 8] ^= 1 << (bit % 8)
                payload = bytes(buf)
            self.tick += 1
            # delivery times on a 1 ms grid, so that one step delivers many frames
            at = math.ceil((self.now + rng.uniform(f.min_delay, f.max_delay)) * 1000) / 1000
            heapq.heappush(self.wire, (at, self.tick, conn, to_initiator, payload))

    def _drop_connection(self, conn: Connection) -> None:
        if not conn.alive:
            return
        conn.alive = False
        for _, s, _ in conn.sides():
            s.connection_lost(self.now)
        self._drain_session_events(conn)
        key = frozenset((conn.a.instance, conn.b.instance))
        if self.links.get(key) is conn:
            self.links[key] = None
            self.retry_at[key] = self.now + 0.5

    # -- one step -------------------------------------------------------------------------

    def _drain_session_events(self, conn: Connection) -> bool:
        closed = False
        for node, session, other in conn.sides():
            while (ev := session.next_event()) is not None:
                if isinstance(ev, Established):
                    assert ev.peer_instance == other.instance
                    if (conn.a.crashes, conn.b.crashes) != conn.crashes:
                        closed = True  # its end crashed: this connection is gone with it
                        continue
                    # The engine it was given is the node's (a newer connection may have
                    # taken that engine over since, so `session.engine` may already be None).
                    # A session established and closed within one step has detached already.
                    assert session.closed or session._engine is node.engine(other.instance)
                elif isinstance(ev, AuthenticationFailed):
                    self.auth_failures.append(ev.reason)
                elif isinstance(ev, ConnectionClosed):
                    closed = True
        return closed

    def _live_connections(self) -> list[Connection]:
        return [c for c in self.links.values() if c is not None]

    def step(self) -> bool:
        """Do everything due at `now`; returns True when something happened."""
        progress = False
        if self.now >= self.next_crash:
            victim = self.rng.choice(self.nodes)
            for conn in self._live_connections():
                if victim in (conn.a, conn.b):
                    self._drop_connection(conn)
            victim.crash()
            self.next_crash = self._next_crash_time()
            progress = True
        while self.wire and self.wire[0][0] <= self.now:
            _, _, conn, to_initiator, data = heapq.heappop(self.wire)
            if conn.alive:
                (conn.sa if to_initiator else conn.sb).receive_data(data, self.now)
                progress = True
        for conn in self._live_connections():
            for _, s, _ in conn.sides():
                t = s.next_timer()
                if t is not None and t <= self.now:
                    s.handle_timer(self.now)
                    progress = True
            if self._drain_session_events(conn) or conn.sa.closed or conn.sb.closed:
                self._drop_connection(conn)
        for node in self.nodes:
            for peer, engine in list(node.engines.items()):
                for ev in engine.events():
                    node.on_dialog_event(peer, ev)
                    progress = True
            if node.pending and self.rng.random() < self.faults.commit:
                node.commit(self.now)
                progress = True
        for conn in self._live_connections():
            for _, s, _ in conn.sides():
                for data in s.frames_to_send(self.now):
                    self._put(conn, s is conn.sb, data)
                    progress = True
        for key, conn in self.links.items():
            if conn is None and self.retry_at.get(key, 0.0) <= self.now:
                x, y = (self.by_instance[i] for i in sorted(key))
                if x.wants(y.instance) or y.wants(x.instance):
                    a, b = (x, y) if x.wants(y.instance) else (y, x)
                    self.links[key] = Connection(self, a, b, self.now)
                    progress = True
        return progress

    def _next_time(self) -> float:
        times = [self.next_crash]
        if any(node.pending for node in self.nodes):
            times.append(self.now + 0.001)  # a commit still to come
        if self.wire:
            times.append(self.wire[0][0])
        for conn in self._live_connections():
            for _, s, _ in conn.sides():
                t = s.next_timer()
                if t is not None:
                    times.append(t)
        for key, conn in self.links.items():
            if conn is None:
                x, y = (self.by_instance[i] for i in key)
                if x.wants(y.instance) or y.wants(x.instance):
                    times.append(self.retry_at.get(key, 0.0))
        return min(times)

    def run(self, done: object, max_time: float = 1e6) -> None:
        """Step until `done()` is true, jumping the clock when everything waits."""
        assert callable(done)
        idle = 0
        while not done():
            if self.step():
                idle = 0
                continue
            nxt = self._next_time()
            assert nxt != float("inf"), "simulation stalled with nothing scheduled"
            if nxt <= self.now:
                idle += 1
                assert idle < 1000, "simulation spins without progress"
                continue
            self.now = nxt
            assert self.now <= max_time, "simulation did not finish in time"
