"""Issue 40's lean queue on SQLite as SQL alone: the statements an engine would run for W1 and
W2 on it, the same on today's schema, and the pages each commit writes to the WAL.

The lean queue lives beside a broker database made the ordinary way (its endpoints, catalog
and transmission queue are today's); docs/lean-schema.md says why each choice:

- ``lean_m``: a message row holds only what RECEIVE cannot find elsewhere (the receiving
  endpoint's rowid stands for handle, service, contract, queue and group id; message type
  and validation are one small integer; the message id 16 bytes), with ONE index, the
  group's RECEIVE order; ``bucket`` > 0 leads that index with the message's bucket of
  positions (2**bucket rows each; 0 for timers and for groups of several conversations),
  so that a commit's rows for many groups land in a few leaves, not one leaf per group;
- ``lean_ready``: one row per group with ready messages (queue, top priority, position of
  its next message) for RECEIVE to pick the next group from; a trigger keeps it on SEND,
  writing only when a group becomes ready or its priority rises;
- numbering with no write to the endpoint row per SEND: without buckets the next msn is the
  conversation's last one still in the queue (read in the group index) + 1, else the
  sender's send_seq, which catches up when rows leave the queue; with buckets, from a
  narrow table of (endpoint, next msn), one page for many conversations;
- positions never given twice: AUTOINCREMENT as today, or (``keep_top``) a plain rowid and
  the rule that no delete removes the highest row (its mark stays).

Received rows are marked and swept, or deleted at once when dense, as sweeper.py does.
"""

from __future__ import annotations

import functools
import itertools
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from bench.floor import BATCH, GROUPS, _message, _sbroker_schema
from bench.systems.sqlite import connect
from bench.workloads import body

SCHEMA = """
CREATE TABLE lean_m (
    id INTEGER PRIMARY KEY {autoinc},
    grp INTEGER NOT NULL,         -- the group's number (sb_endpoints.group_key)
    conv INTEGER NOT NULL,        -- the receiving endpoint (sb_endpoints.conv_order)
    pri INTEGER NOT NULL,
    msn INTEGER NOT NULL,
    status INTEGER NOT NULL,
    is_timer INTEGER NOT NULL DEFAULT 0,
    solo INTEGER NOT NULL DEFAULT 1,  -- its group has one conversation
    mtype INTEGER NOT NULL,       -- message type and validation, numbered in the catalog
    body BLOB NOT NULL,
    message_id BLOB NOT NULL,     -- 16 bytes
    enqueued_at REAL NOT NULL,
    bucket INTEGER AS (CASE WHEN is_timer = 0 AND solo = 1 THEN (id >> {bits}) + 1 ELSE 0 END)
);
CREATE INDEX lean_m_group ON lean_m({lead}grp, status, pri DESC, conv, is_timer DESC, msn);
CREATE TABLE lean_ready (
    grp INTEGER PRIMARY KEY, queue_id INTEGER NOT NULL, pri INTEGER NOT NULL,
    head INTEGER NOT NULL         -- position of the group's next message in RECEIVE order
) WITHOUT ROWID;
CREATE INDEX lean_ready_pick ON lean_ready(queue_id, pri DESC, head);
CREATE TABLE lean_seq (conv INTEGER PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO lean_seq SELECT conv_order, send_seq FROM sb_endpoints;
CREATE TABLE lean_consumed (id INTEGER PRIMARY KEY);
CREATE TABLE lean_locks (grp INTEGER PRIMARY KEY, owner TEXT NOT NULL) WITHOUT ROWID;
CREATE TRIGGER lean_m_ready AFTER INSERT ON lean_m WHEN new.status = 1
BEGIN
    INSERT INTO lean_ready(grp, queue_id, pri, head)
    SELECT new.grp, e.queue_id, new.pri, new.id FROM sb_endpoints e
    WHERE e.conv_order = new.conv
    ON CONFLICT(grp) DO UPDATE SET pri = excluded.pri, head = excluded.head
    WHERE excluded.pri > lean_ready.pri;
END;
"""
PROBED_MSN = """max(coalesce((SELECT max(m.msn) + 1 FROM lean_m m WHERE m.grp = p.group_key
    AND m.status = 1 AND m.pri = p.priority AND m.conv = p.conv_order AND m.is_timer = 0), 0),
    s.send_seq)"""
COUNTED_MSN = "(SELECT next FROM lean_seq WHERE conv = s.conv_order)"
SEND_DIRECT = """
INSERT INTO lean_m(grp, conv, pri, msn, status, is_timer, mtype, body, message_id, enqueued_at)
SELECT p.group_key, p.conv_order, p.priority, {msn}, 1, 0, ?, ?, ?, ?
FROM sb_endpoints s, sb_endpoints p
WHERE s.conv_order = ? AND s.handle = ? AND p.conv_order = ? AND s.state = 'CO'
    AND p.state = 'CO' AND +p.conversation_id = s.conversation_id
    AND +p.is_initiator = 1 - s.is_initiator
    AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle)
    AND (SELECT value FROM sb_meta WHERE key = 'catalog_version') = ?
"""
BUMP = "UPDATE lean_seq SET next = next + 1 WHERE conv = ?"
SET_SEQ = "UPDATE lean_seq SET next = ? WHERE conv = ?"
READY_SENDERS = """
SELECT s.conv_order, {msn}, p.group_key, p.conv_order, p.priority
FROM sb_endpoints s JOIN sb_endpoints p
    ON p.conversation_id = s.conversation_id AND p.is_initiator = 1 - s.is_initiator
WHERE s.conv_order IN (SELECT value FROM json_each(?)) AND s.state = 'CO' AND p.state = 'CO'
    AND NOT EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle)
"""
INSERT = ("INSERT INTO lean_m(grp, conv, pri, msn, status, is_timer, mtype, body, message_id,"
          " enqueued_at) VALUES (?, ?, ?, ?, 1, 0, 1, ?, ?, ?)")
PICK = """
SELECT r.grp, r.head FROM lean_ready r WHERE r.queue_id = ?1
    AND NOT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = ?1
                    AND s.session_id IS NOT NULL)
    AND NOT EXISTS (SELECT 1 FROM lean_locks l WHERE l.grp = r.grp AND l.owner != ?2)
ORDER BY r.pri DESC, r.head LIMIT 1"""
TAKE = f"""
WITH RECURSIVE pick(grp, head) AS ({PICK}),
    b(n) AS (SELECT 0 UNION ALL SELECT ((SELECT head FROM pick) >> ?4) + 1
             UNION ALL SELECT n + 1 FROM b
             WHERE n > 0 AND n <= ((SELECT max(id) FROM lean_m) >> ?4))
SELECT m.id, m.message_id, m.grp, m.conv, m.msn, m.status, m.pri, m.mtype, m.body,
    m.enqueued_at, e.handle, e.group_id, e.service, e.contract
FROM lean_m m CROSS JOIN sb_endpoints e ON e.conv_order = m.conv
WHERE {{bucketed}} m.grp = (SELECT grp FROM pick)
    AND m.status = 1 AND NOT EXISTS (SELECT 1 FROM lean_consumed c WHERE c.id = m.id)
ORDER BY {{order}}m.pri DESC, m.conv, m.is_timer DESC, m.msn LIMIT ?3
"""
# Without buckets the sender's send_seq catches up with the rows leaving the queue (their
# conversations' highest msn + 1) before they go: one endpoint write per receive or sweep.
SEQS_OF_MARKED = """
UPDATE sb_endpoints AS s SET send_seq = x.next
FROM (SELECT p.conversation_id AS cid, 1 - p.is_initiator AS ini, max(m.msn) + 1 AS next
      FROM lean_consumed c CROSS JOIN lean_m m ON m.id = c.id
      CROSS JOIN sb_endpoints p ON p.conv_order = m.conv GROUP BY m.conv) x
WHERE s.conversation_id = x.cid AND s.is_initiator = x.ini AND s.send_seq < x.next
"""
SEQ_OF_CONV = """
UPDATE sb_endpoints AS s SET send_seq = ?2
FROM sb_endpoints p WHERE p.conv_order = ?1 AND s.conversation_id = p.conversation_id
    AND s.is_initiator = 1 - p.is_initiator AND s.send_seq < ?2
"""
COUNT_MARKED = """
INSERT INTO sb_queue_counters(queue_id, received) SELECT e.queue_id, count(*)
FROM lean_consumed c CROSS JOIN lean_m m ON m.id = c.id
CROSS JOIN sb_endpoints e ON e.conv_order = m.conv WHERE true GROUP BY e.queue_id
ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received
"""
COUNT = ("INSERT INTO sb_queue_counters(queue_id, received) VALUES (?, ?)"
         " ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received")
MARK_ONE = ("INSERT OR IGNORE INTO lean_consumed(id) SELECT id FROM lean_m"
            " WHERE id = ? AND message_id = ?")
MARK = ("INSERT OR IGNORE INTO lean_consumed(id) SELECT m.id FROM json_each(?) j"
        " JOIN lean_m m ON m.id = CAST(j.key AS INTEGER) AND hex(m.message_id) = j.value")
DELETE = "DELETE FROM lean_m WHERE id = ? AND message_id = ?"
SWEEP_COMMITS, DENSE = 32, 8  # as sbroker.storage.sqlite.sweeper


class _Db:
    """A connection at durability normal whose commits hand checkpoints to sbroker's
    checkpointer thread (``checkpoints``: the engine's way, off the commit path) or leave
    them to SQLite inside COMMIT (the peers' way)."""

    def __init__(self, path: Path, checkpoints: bool) -> None:
        from sbroker.storage.sqlite.checkpoint import SAFETY_PAGES, Checkpointer

        self.conn = connect(path, "normal")
        self.received: list[tuple[object, int]] = []  # (conversation, msn) of the last RECEIVE
        self.checkpointer = None
        if checkpoints:
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {SAFETY_PAGES}")
            self.checkpointer = Checkpointer(lambda: connect(path, "normal"))

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        if self.checkpointer is not None:
            self.checkpointer.committed()

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.conn.close()


class Lean(_Db):
    """A broker database with the lean queue beside it: 100 dialogs, round-robin sends."""

    def __init__(self, path: Path, *, checkpoints: bool = True, keep_top: bool = False,
                 bucket: int = 0) -> None:
        self.queue_id, _ = _sbroker_schema(path)
        super().__init__(path, checkpoints)
        self.keep_top, self.bucket = keep_top, bucket
        conn = self.conn
        conn.executescript(SCHEMA.format(autoinc="" if keep_top else "AUTOINCREMENT",
                                         bits=bucket or 12, lead="bucket, " if bucket else ""))
        self.dialogs = conn.execute(
            "SELECT s.conv_order, s.handle, p.conv_order FROM sb_endpoints s JOIN sb_endpoints"
            " p ON p.conversation_id = s.conversation_id AND p.is_initiator = 0"
            " WHERE s.is_initiator = 1 ORDER BY s.conv_order").fetchall()
        self.version = conn.execute(
            "SELECT value FROM sb_meta WHERE key = 'catalog_version'").fetchone()[0]
        msn = COUNTED_MSN if bucket else PROBED_MSN
        self.send_sql = SEND_DIRECT.format(msn=msn)
        self.senders_sql = READY_SENDERS.format(msn=msn)
        self.take_sql = TAKE.format(bucketed="m.bucket IN b AND" if bucket else "",
                                    order="m.bucket, " if bucket else "")
        self.marked = self.commits = 0
        self.bodies = itertools.cycle([body(i, 200) for i in range(1000)])

    def send_one(self, i: int) -> None:
        """W1's SEND: one statement (the trigger keeps the ready group), one commit."""
        sender, handle, peer = self.dialogs[i % GROUPS]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        done = conn.execute(self.send_sql, (1, next(self.bodies), _uuid(), time.time(), sender,
                                            handle, peer, self.version)).rowcount
        if self.bucket:
            conn.execute(BUMP, (sender,))
        self.commit()
        if done != 1:
            raise AssertionError("the dialog was not conversing")

    def send_batch(self, start: int) -> None:
        """W2's SEND: the senders read once (their next numbers), 100 rows, one commit."""
        conn = self.conn
        senders = [self.dialogs[i % GROUPS][0] for i in range(start, start + BATCH)]
        conn.execute("BEGIN IMMEDIATE")
        state = {row[0]: row for row in conn.execute(self.senders_sql, (json.dumps(senders),))}
        seqs = {k: row[1] for k, row in state.items()}
        now, rows = time.time(), []
        for sender in senders:
            _, _, grp, conv, pri = state[sender]
            rows.append((grp, conv, pri, seqs[sender], next(self.bodies), _uuid(), now))
            seqs[sender] += 1
        conn.executemany(INSERT, rows)
        if self.bucket:
            conn.executemany(SET_SEQ, [(v, k) for k, v in seqs.items()])
        self.commit()

    def receive(self, top: int) -> int:
        """One RECEIVE of up to ``top`` from the next ready group, one commit."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(self.take_sql,
                            (self.queue_id, "me", top + 1, self.bucket or 12)).fetchall()
        taken, following = rows[:top], rows[top:]
        self.received = [(r[3], r[4]) for r in taken]
        if taken:
            self._consume([(r[0], r[1]) for r in taken], taken[-1][3], taken[-1][4])
            if following:
                conn.execute("UPDATE lean_ready SET head = ? WHERE grp = ?",
                             (following[0][0], taken[0][2]))
            else:
                conn.execute("DELETE FROM lean_ready WHERE grp = ?", (taken[0][2],))
        self.commit()
        return len(taken)

    def _consume(self, taken: list[tuple[int, bytes]], conv: int, msn: int) -> None:
        """Delete dense rows at once (without buckets the sender's send_seq catching up
        first), else mark them; sweep every SWEEP_COMMITS marking commits."""
        conn, ids = self.conn, [t[0] for t in taken]
        top = conn.execute("SELECT max(id) FROM lean_m").fetchone()[0] if self.keep_top else 0
        if len(ids) > 1 and max(ids) - min(ids) < DENSE * len(ids) and top not in ids:
            if not self.bucket:
                conn.execute(SEQ_OF_CONV, (conv, msn + 1))
            conn.execute(COUNT, (self.queue_id, conn.executemany(DELETE, taken).rowcount))
            return
        if len(taken) == 1:
            conn.execute(MARK_ONE, taken[0])
        else:
            conn.execute(MARK, (json.dumps({i: m.hex().upper() for i, m in taken}),))
        self.marked += len(taken)
        self.commits += 1
        if self.commits >= SWEEP_COMMITS:
            self.sweep()

    def sweep(self) -> None:
        conn = self.conn
        if not self.bucket:
            conn.execute(SEQS_OF_MARKED)
        conn.execute(COUNT_MARKED)
        keep = " AND id < (SELECT max(id) FROM lean_m)" if self.keep_top else ""
        conn.execute(f"DELETE FROM lean_m WHERE id IN (SELECT id FROM lean_consumed){keep}")
        conn.execute(f"DELETE FROM lean_consumed WHERE true{keep}")
        self.marked = self.commits = 0

class Today(_Db):
    """Today's schema with the engine's own statements on SQLite, the same interface: W1's
    SEND is send_direct + bump_send_seq; W2's is ready_senders, insert_message for 100 rows
    and set_send_seq for their senders; RECEIVE is receive_take_next and the sweeper."""

    def __init__(self, path: Path, *, checkpoints: bool = True) -> None:
        from sbroker.storage.sqlite.connection import SQL
        from sbroker.storage.sqlite.sweeper import Sweeper

        self.sql, self.sweeper = SQL, Sweeper()
        self.queue_id, self.templates = _sbroker_schema(path)
        super().__init__(path, checkpoints)
        conn = self.conn
        self.dialogs = conn.execute(
            "SELECT s.conv_order, s.handle, p.conv_order FROM sb_endpoints s JOIN sb_endpoints"
            " p ON p.conversation_id = s.conversation_id AND p.is_initiator = 0"
            " WHERE s.is_initiator = 1 ORDER BY s.conv_order").fetchall()
        self.version = conn.execute(SQL.catalog_version).fetchone()[0]
        self.bodies = itertools.cycle([body(i, 200) for i in range(1000)])

    def send_one(self, i: int) -> None:
        from sbroker.core.messages import new_id

        sender, handle, peer = self.dialogs[i % GROUPS]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        done = conn.execute(self.sql.send_direct, (
            0, "DEFAULT", "N", next(self.bodies), new_id(), time.time(), sender, handle, peer,
            self.version)).rowcount
        conn.execute(self.sql.bump_send_seq, (1, sender))
        self.commit()
        if done != 1:
            raise AssertionError("the dialog was not conversing")

    def send_batch(self, start: int) -> None:
        conn = self.conn
        picks = [i % GROUPS for i in range(start, start + BATCH)]
        conn.execute("BEGIN IMMEDIATE")
        ready = {r[1]: r[2] for r in conn.execute(  # conv_order: send_seq, as the engine reads
            self.sql.ready_senders, (json.dumps([self.dialogs[g][0] for g in picks]),))}
        seqs = {g: ready[self.dialogs[g][0]] for g in set(picks)}
        rows = []
        for g in picks:
            row = _message(self.templates[g], seqs[g])
            rows.append(row[:10] + (next(self.bodies),) + row[11:])
            seqs[g] += 1
        conn.executemany(self.sql.insert_message, rows)
        conn.executemany(self.sql.set_send_seq, [(seqs[g], self.dialogs[g][0]) for g in seqs])
        self.commit()

    def receive(self, top: int) -> int:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(self.sql.receive_take_next,
                            (self.queue_id, self.queue_id, "me", top)).fetchall()
        self.received = [(r[4], r[5]) for r in rows]
        if rows:
            taken = [(r[2], r[11]) for r in rows]
            self.sweeper.consume(conn, taken, self.queue_id)  # type: ignore[arg-type]
        self.commit()
        return len(rows)

Queue = Lean | Today
_ids = itertools.count()


def _uuid() -> bytes:
    """A message id, 16 bytes (os.urandom would add the same cost to every design)."""
    return next(_ids).to_bytes(16, "big")


def _receive_all(q: Queue, n: int, top: int) -> None:
    got = 0
    while got < n:
        k = q.receive(top)
        if not k:
            raise AssertionError(f"{n - got} messages missing")
        got += k


CPU = " per CPU s"
"""Suffix of a phase's second figure: messages per CPU second (this process's threads, and
the server's processes where there is one), which the machine's load sways less than
messages per second."""


def phase(name: str, n: int, run: Callable[[], object],
          server_cpu: Callable[[], float] | None = None) -> dict[str, float]:
    """Run one phase of ``n`` messages: its msgs/s and its msgs per CPU second."""
    server = server_cpu() if server_cpu else 0.0
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if server_cpu:
        cpu += server_cpu() - server
    return {name: n / wall, name + CPU: n / cpu}


def _each(fn: Callable[[int], None], numbers: range) -> None:
    for i in numbers:
        fn(i)


def w1(make: Callable[..., Queue], path: Path, n: int, *,
       checkpoints: bool = True) -> dict[str, float]:
    """W1: n SENDs one per commit round-robin over 100 dialogs, then n RECEIVEs."""
    q = make(path, checkpoints=checkpoints)
    try:
        return {**phase("send", n, lambda: _each(q.send_one, range(n))),
                **phase("receive", n, lambda: _receive_all(q, n, 1))}
    finally:
        q.close()


def w2(make: Callable[..., Queue], path: Path, n: int, *,
       checkpoints: bool = True) -> dict[str, float]:
    """W2: 100 SENDs per commit over 100 dialogs, then RECEIVE top 100 per commit."""
    q = make(path, checkpoints=checkpoints)
    try:
        return {**phase("send", n, lambda: _each(q.send_batch, range(0, n, BATCH))),
                **phase("receive", n, lambda: _receive_all(q, n, BATCH))}
    finally:
        q.close()


def pages(make: Callable[..., Queue], path: Path, queued: int = 10_000,
          commits: int = 50) -> dict[str, float]:
    """WAL pages written per commit (no checkpoint meanwhile), deterministic where rates are
    not: W1's SEND and RECEIVE and W2's, each after ``queued`` messages were sent."""
    q = make(path, checkpoints=False)
    out: dict[str, float] = {}
    try:
        for shape, top, send in (("W1", 1, q.send_one), ("W2", BATCH, q.send_batch)):
            _each(send, range(0, queued, top))
            more = range(queued, queued + commits * top, top)
            out[f"{shape} send"] = _frames(q.conn, functools.partial(_each, send, more), commits)
            out[f"{shape} receive"] = _frames(
                q.conn, functools.partial(_receive_all, q, commits * top, top), commits)
            while q.receive(BATCH):
                pass
        return out
    finally:
        q.close()


def _frames(conn: sqlite3.Connection, run: Callable[[], None], commits: int) -> float:
    """WAL frames ``run`` writes, per commit (it makes ``commits``)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    run()
    frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    conn.execute("PRAGMA wal_autocheckpoint = 1000")
    return float(frames) / commits


DESIGNS: dict[str, Callable[..., Queue]] = {  # (path, checkpoints=...)
    "today's SQL": Today,
    "lean SQL": Lean,
    "lean SQL, bucketed": functools.partial(Lean, bucket=12),
    "lean SQL, bucketed, keep-top": functools.partial(Lean, bucket=12, keep_top=True),
}
