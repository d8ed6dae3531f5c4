"""The transmitter: hands rows of the transmission queue (and of the forwarding outbox) that a
route sends elsewhere to the protocol core, and deletes them when the peer acknowledges.

Order: with ``honor_broker_priority`` by priority, except that a message that has waited
longer than ``starvation_seconds`` goes first; otherwise in send order. A row with no route
waits with its ``transmission_status`` saying so, and goes as soon as a route appears (the
catalog version is watched). Connection failures are written into ``transmission_status``.
The core keeps what it was given until acknowledged (across reconnections); the durable
queue is the truth after a restart, when every row is handed over again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple
from uuid import UUID

from sbroker.core import threads
from sbroker.core.catalog import Catalog
from sbroker.engine.api import EngineAPI
from sbroker.engine.endpoints import NEVER
from sbroker.protocol import DialogKey, Message, MessageAcked
from sbroker.services.network.routing import Address, Resolution, resolve
from sbroker.storage.ports import Connection
from sbroker.storage.watermark import Watermark

log = logging.getLogger("sbroker.network")
FULL_SCAN_SECONDS = 1.0  # look at every waiting row this often (routes, lifetimes, reuse)
POLL_SECONDS = 0.01  # the change feed tells of other connections' commits at most this often
CLEANUP_SECONDS = 30.0
SCAN_BATCH = 2000  # rows handed over per pass: the first ones go while the rest are read
SCAN_FIRST = 250  # rows handed over in a pass with nothing in flight
FORGET_DELAY = 10.0  # seconds before a finished conversation leaves the protocol core
NUDGE_SECONDS = 3.0  # no acknowledgement for this long while messages wait: nudge

class _Row(NamedTuple):
    kind: str  # "tq" or "out"
    rid: int
    conv: str
    from_initiator: bool
    msn: int
    from_service: str
    to_service: str
    to_instance: str | None
    contract: str
    mtype: str
    priority: int
    enqueued_at: float
    status: str
    expires: float | None
    origin: str | None
    body: bytes
    trace: str | None = None  # the message's traceparent (transmission queue rows only)


def _split_bodies(rows: list[list[object]], blob: bytes) -> list[_Row]:
    """Rows of ``transmissions_by_ids`` (the trace context, then a body length last, in place
    of the body) with their bodies cut from the joined blob."""
    out: list[_Row] = []
    make = _Row._make
    pos = 0
    for r in rows:
        n = r[-1]
        assert isinstance(n, int)
        r[-1], r[-2] = r[-2], blob[pos : pos + n]
        out.append(make(r))
        pos += n
    if pos != len(blob):
        raise RuntimeError("transmission queue bodies do not add up to their lengths")
    return out


Send = Callable[[list[tuple[Message, Address, "UUID | None"]]], None]


class Transmitter:
    """A thread that feeds the protocol core from the durable queues."""

    def __init__(self, engine: EngineAPI, send: Send, *, starvation: float, max_in_flight: int,
                 known: Callable[[], set[Address]] = set,
                 honor: Callable[[], bool],
                 neighbors: Callable[[], set[UUID]] = set,
                 forget: Callable[[DialogKey], None] = lambda key: None) -> None:
        self.engine = engine
        self._clock = engine.clock  # every time read: tests drive it with a fake clock
        self._send = send
        self.starvation = starvation
        self.max_in_flight = max_in_flight
        self._honor = honor
        self._neighbors = neighbors
        self._known = known
        self._forget = forget
        self._forgets: list[tuple[float, DialogKey]] = []  # (monotonic deadline, key)
        self._cond = threading.Condition()
        self._acks: list[MessageAcked] = []
        self._failures: dict[Address, str] = {}
        self._wake = True
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._watching = contextlib.ExitStack()  # the change feed looks while we run
        engine.store.feed.subscribe(self._changed_elsewhere, min_interval=POLL_SECONDS)
        # (kind, rid) -> (key, seq, address); (key, seq) -> (kind, rid)
        self._flight: dict[tuple[str, int], tuple[DialogKey, int, Address]] = {}
        self._by_key: dict[tuple[DialogKey, int], tuple[str, int]] = {}
        self._status: dict[tuple[str, int], str] = {}
        self._mark: Watermark | None = None  # made by the first pass (the backend says how)
        self._last: dict[Address, tuple[Message, UUID | None]] = {}  # for nudges
        self._last_ack = self._clock.monotonic()
        # Parsed ids by their text, kept across passes: one UUID object per conversation
        # (and for this instance) also makes lookups keyed by them identity checks.
        self._uuids: dict[str, UUID] = {}
        self.sent = 0
        self.acknowledged = 0

    # -- called by the transport (loop thread) and the receiver ---------------------------
    def acked(self, acks: list[MessageAcked]) -> None:
        self._last_ack = self._clock.monotonic()
        with self._cond:
            self._acks.extend(acks)
            self._cond.notify_all()

    def failed(self, address: Address, reason: str) -> None:
        with self._cond:
            self._failures[address] = reason
            self._cond.notify_all()

    def forget_later(self, conversation_id: str, *directions: bool) -> None:
        """Drop the protocol core's state of a finished conversation after FORGET_DELAY (a
        last acknowledgement still due goes first; a late duplicate is still recognised from
        the database)."""
        at = self._clock.monotonic() + FORGET_DELAY
        with self._cond:
            self._forgets += [(at, DialogKey(UUID(conversation_id), d)) for d in directions]

    def wake(self) -> None:
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def _changed_elsewhere(self) -> None:
        if self._thread is not None:
            self.wake()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._stopping = False
        self._watching.enter_context(self.engine.store.feed.watch())
        self._thread = threading.Thread(target=self._run, name="sbroker-transmitter",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        threads.join(self._thread)
        self._thread = None
        self._watching.close()

    def _run(self) -> None:
        last_full = 0.0
        last_cleanup = self._clock.monotonic()
        catalog_version = ""
        while True:
            idle = False
            with self._cond:
                if not (self._acks or self._failures or self._wake or self._stopping):
                    # The one wait in real time: a poll for commits the change feed did not
                    # tell (it tells each subscriber at most every POLL_SECONDS).
                    idle = not self._cond.wait(FULL_SCAN_SECONDS)
                if self._stopping:
                    return
                acks, self._acks = self._acks, []
                failures, self._failures = self._failures, {}
                woken, self._wake = self._wake, False
            try:
                if acks:
                    self._delete_acked(acks)
                if failures:
                    self._record_failures(failures)
                now = self._clock.monotonic()
                # Woken by a commit: it may be DDL (a route another process just created),
                # which a snapshot checked up to 50 ms ago would hide until the next full
                # scan, a second later.
                cat = self.engine.catalog(max_age=0.0 if woken else 0.05)
                full = idle or now - last_full >= FULL_SCAN_SECONDS \
                    or cat.version != catalog_version
                if full or woken:
                    if full:
                        last_full, catalog_version = now, cat.version
                    self._scan(full)
                if full and self._flight and now - self._last_ack >= NUDGE_SECONDS:
                    self._nudge()
                if self._forgets and self._forgets[0][0] <= now:
                    self._forget_due(now)
                if now - last_cleanup >= CLEANUP_SECONDS:
                    last_cleanup = now
                    self._cleanup()
            except Exception:  # a failing pass must not kill the transmitter
                log.exception("transmitter pass failed")
                with self._cond:
                    self._cond.wait(0.5)

    # -- handing rows to the core -----------------------------------------------------------
    def _scan(self, full: bool) -> None:
        """Hand new rows over: those above the watermark, or every row (``full``)."""
        # Start small so that the first messages go while the next rows are read, then
        # take more per pass as the pipeline fills.
        room = min(SCAN_BATCH, max(SCAN_FIRST, 2 * len(self._flight)),
                   self.max_in_flight - len(self._flight))
        engine = self.engine
        cat = engine.catalog(max_age=0.05)
        now = engine.clock.now()
        mark = self._mark
        if mark is None:
            mark = self._mark = engine.store.watermark(self._clock.monotonic)
        with engine.store.read() as conn:
            conn.begin()
            try:
                rows, present, unread = self._candidates(conn, 0 if full else mark.value,
                                                         room)
            finally:
                conn.commit()
        if full:
            self._drop_vanished(present)
        if self._honor():
            limit = now - self.starvation
            rows.sort(key=lambda r: (r.enqueued_at > limit, -r.priority, r.kind, r.rid))
        else:
            rows.sort(key=lambda r: (r.enqueued_at, r.kind, r.rid))
        chosen, left = self._choose(rows, cat, room, now)
        batch = self._messages(chosen, cat.broker_instance)
        if batch:
            self._send(batch)
            self.sent += len(batch)
        if len(chosen) == room and room > 0 and len(self._flight) < self.max_in_flight:
            self.wake()  # more rows wait: take them in the next pass at once
        # The rest was handed over now or before, or passed over (local, no route).
        mark.advance(present, unread + left)

    def _choose(self, rows: list[_Row], cat: Catalog, room: int, now: float
                ) -> tuple[list[tuple[_Row, Address, str | None]], list[int]]:
        """The rows to hand over now, in order, with their address and target instance (at
        most ``room``), and the transmission-queue rows left for lack of room (read again
        next time). Rows with no route get that status written; local ones are passed
        over."""
        chosen: list[tuple[_Row, Address, str | None]] = []
        statuses: list[tuple[str, int, str]] = []
        left: list[int] = []
        me = cat.broker_instance
        routes: dict[tuple[str, str | None], Resolution] = {}
        for r in rows:
            to_instance = r.to_instance
            if r.kind == "tq" and to_instance is None and r.origin not in (None, me):
                to_instance = r.origin  # the far instance became known after the send
            res = routes.get((r.to_service, to_instance))
            if res is None:
                res = routes[(r.to_service, to_instance)] = resolve(
                    cat.routes, me=me, local_services=cat.services,
                    to_service=r.to_service, to_instance=to_instance, now=now)
            if res.kind == "local":
                continue  # the engine's own (disabled queue, waiting redelivery)
            if res.kind == "none" or res.address is None:
                if r.status != res.status:
                    statuses.append((r.kind, r.rid, res.status))
                continue
            if len(chosen) < room:
                chosen.append((r, res.address, res.target_instance))
            elif r.kind == "tq":
                left.append(r.rid)
        if statuses:
            self._write_statuses(statuses)
        return chosen, left

    def _messages(self, chosen: list[tuple[_Row, Address, str | None]], me: str
                  ) -> list[tuple[Message, Address, UUID | None]]:
        """The protocol messages of the chosen rows, recorded as in flight, each with the
        instance whose own connection it may reuse."""
        honor = self._honor()
        neighbors = self._neighbors()
        batch: list[tuple[Message, Address, UUID | None]] = []
        uuids = self._uuids
        if len(uuids) > 100_000:
            uuids.clear()
        me_id = uuids.get(me)
        if me_id is None:
            me_id = uuids[me] = UUID(me)
        for r, address, target in chosen:
            conv = uuids.get(r.conv)
            if conv is None:
                conv = uuids[r.conv] = UUID(r.conv)
            msg = Message(
                conv, bool(r.from_initiator), r.msn, r.mtype, bytes(r.body),
                r.from_service, r.to_service, r.contract,
                priority=r.priority if honor and 1 <= r.priority <= 10 else 5,
                origin_instance=me_id if r.kind == "tq" else UUID(r.origin or me),
                target_instance=UUID(target) if target else None,
                expires_at=None if r.expires is None or r.expires >= NEVER else r.expires,
                trace_context=r.trace,
            )
            self._flight[(r.kind, r.rid)] = (msg.key, msg.seq, address)
            self._by_key[(msg.key, msg.seq)] = (r.kind, r.rid)
            # A reply to an instance that talks to us directly reuses its connection.
            target_id = msg.target_instance
            batch.append((msg, address, target_id if target_id in neighbors else None))
            self._last[address] = (msg, batch[-1][2])
        return batch

    def _candidates(self, conn: Connection, after: int, room: int) -> tuple[
            list[_Row], list[int], list[int]]:
        """Rows not handed over yet: ids first (cheap), details for the new ones only; every
        transmission-queue id read; and those not handed over whose details were not read."""
        (text,) = conn.execute(conn.sql.transmission_ids_after, (after,)).fetchone()
        present = sorted(int(x) for x in text.split(",")) if text else []
        ids = [rid for rid in present if ("tq", rid) not in self._flight]
        unread: list[int] = []
        if not self._honor():  # send order: the oldest rows not handed over are enough
            ids, unread = ids[: max(room, 1)], ids[max(room, 1):]
        rows: list[_Row] = []
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            text, blob = conn.execute(conn.sql.transmissions_by_ids,
                                      (conn.ids(part),)).fetchone()
            rows += _split_bodies(json.loads(text), blob or b"")
        rows += [row for row in (_Row("out", *r) for r in conn.execute(conn.sql.outbox))
                 if ("out", row.rid) not in self._flight]
        return rows, present, unread

    def _drop_vanished(self, present: list[int]) -> None:
        """Forget messages in flight whose rows are gone though no acknowledgement deleted
        them: their endpoint went (END CONVERSATION WITH CLEANUP, a closed endpoint's end).
        The protocol core stops sending them, as SQL Server drops such messages from its
        transmission queue, and they no longer take room in flight."""
        ids = set(present)
        gone = [ref for ref in self._flight if ref[0] == "tq" and ref[1] not in ids]
        if not gone:
            return
        keys = set()
        for ref in gone:
            key, seq, _ = self._flight.pop(ref)
            self._by_key.pop((key, seq), None)
            self._status.pop(ref, None)
            keys.add(key)
        left = {key for key, _, _ in self._flight.values()}
        for key in keys - left:
            self._forget(key)
        log.info("dropped %d message(s) in flight whose conversation endpoint was deleted",
                 len(gone))

    # -- acknowledgements and failures --------------------------------------------------------
    def _delete_acked(self, acks: list[MessageAcked]) -> None:
        tq: list[tuple[int]] = []
        out: list[tuple[int]] = []
        for a in acks:
            ref = self._by_key.pop((a.key, a.seq), None)
            if ref is None:
                continue
            self._flight.pop(ref, None)
            self._status.pop(ref, None)
            (tq if ref[0] == "tq" else out).append((ref[1],))
        if not tq and not out:
            return

        def delete(conn: Connection) -> None:
            sql = conn.sql
            handles: set[str] = set()
            for part in range(0, len(tq), 500):
                ids = conn.ids(rid for (rid,) in tq[part : part + 500])
                (text,) = conn.execute(sql.handles_of_transmissions, (ids,)).fetchone()
                handles.update(text.split(",") if text else ())
                conn.execute(sql.delete_transmissions, (ids,))
            conn.executemany(sql.delete_outbox_message, out)
            # A closed initiator waited for its last message to be acknowledged.
            if handles:
                closed.extend(row[0] for row in conn.execute(sql.delete_closed_initiators,
                                                             (conn.ids(sorted(handles)),)))

        closed: list[str] = []
        self.engine.store.commit_path.run(delete, durable=False)
        self.acknowledged += len(tq) + len(out)
        for conversation_id in closed:
            self.forget_later(conversation_id, True, False)

    def _record_failures(self, failures: dict[Address, str]) -> None:
        statuses = [
            (ref[0], ref[1], failures[addr])
            for ref, (_, _, addr) in self._flight.items()
            if addr in failures and self._status.get(ref) != failures[addr]
        ]
        self._write_statuses(statuses)

    def _write_statuses(self, statuses: list[tuple[str, int, str]]) -> None:
        if not statuses:
            return

        def update(conn: Connection) -> None:
            for kind, rid, text in statuses:
                sql = conn.sql.set_transmission_status if kind == "tq" else \
                    conn.sql.set_outbox_status
                conn.execute(sql, (text, rid))

        self.engine.store.commit_path.run(update, durable=False)
        for kind, rid, text in statuses:
            if (kind, rid) in self._flight:
                self._status[(kind, rid)] = text

    def _nudge(self) -> None:
        """Hand the latest unacknowledged message of each address over again: a no-op for
        the core, but it wakes the connection that carries it (a connection that won a
        simultaneous dial can otherwise sit until its next keepalive)."""
        known = self._known()  # addresses a connection was once established with
        batch = [(msg, address, peer) for address, (msg, peer) in self._last.items()
                 if (msg.key, msg.seq) in self._by_key and (peer is not None or address in known)]
        if batch:
            self._send(batch)
        self._last_ack = self._clock.monotonic()

    def _forget_due(self, now: float) -> None:
        with self._cond:
            due = [key for at, key in self._forgets if at <= now]
            self._forgets = [(at, key) for at, key in self._forgets if at > now]
        for key in due:
            self._forget(key)

    def _cleanup(self) -> None:
        """Drop rows whose endpoint is gone and expired refusal/forwarding state."""
        now = self.engine.clock.now()

        def clean(conn: Connection) -> None:
            conn.execute(conn.sql.delete_orphan_transmissions)
            conn.execute(conn.sql.delete_expired_inbound, (now,))

        self.engine.store.commit_path.run(clean, durable=False)

    def in_flight(self) -> int:
        return len(self._flight)
