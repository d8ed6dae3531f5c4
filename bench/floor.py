"""`python -m bench.floor`: what SQLite alone allows for issue 2's workloads on sbroker's schema.

The engine's figures are held against targets (W1 receive >= 0.8 x raw one-INSERT commits;
W2 >= 100,000 msgs/s each way).  This measures the SQL the engine must run, with no Python
engine around it, so that the distance between the engine and each target splits into the
engine's own overhead and the bound the storage puts on any engine:

- raw: one INSERT per committed transaction into a bare table (the W1 reference);
- W1 send on sbroker's schema: per message BEGIN IMMEDIATE, the engine's statements for a SEND
  on a dialog whose local peer converses (send_direct, bump_send_seq), COMMIT;
- the same without the two writes that keep numbers (sb_messages' AUTOINCREMENT, which
  streams need, and bump_send_seq, the conversation's sequence numbers): a bound for any
  change of the send short of dropping those guarantees;
- huey's W1 (its SqliteStorage, as the suite runs it): the peer issue 22 holds W1 to, beside
  the SQL sbroker needs for the same work;
- W1 receive on sbroker's schema: per message BEGIN IMMEDIATE, the engine's own statement that
  picks the next group and fetches from it, the engine's removal of the row (sbroker.consumed:
  one row is marked, and swept with 31 others), COMMIT (no lock rows: the engine keeps W1's
  locks in memory);
- W2 on sbroker's schema: 100 messages per transaction round-robin over 100 conversation
  groups, inserted with one executemany; received 100 of one group per transaction;
- W2 on a minimal grouped table: integer keys, the 200-byte body and one (group, order) index,
  the least any design needs to hand out one group's messages from SQLite; received either by
  deleting the rows at once, or by marking them (an integer key per row in a second table that
  readers skip) and deleting the marked rows of 32 receives together, as the engine does;
- W2 on a group-clustered table (WITHOUT ROWID, primary key (group, order)): the other layout,
  which keeps each group's messages together and so moves the scattered writes to the send side;
- W3 on the barest group-committed queue: 8 producer and 8 consumer threads, one message per
  transaction each, every transaction handed to one committer thread that runs its one statement
  (an INSERT, or a DELETE ... RETURNING of the oldest message) and commits once per batch of
  whatever queued meanwhile; a consumer asks only for a message already committed (no polling).
  No groups, no ordering per conversation, no locks: the least a group-committing Python engine
  does per message, so its rate is a ceiling for issue 6's W3 target on this machine;
- the same W3 hand-off storing nothing (a deque in the committer): what 16 Python threads
  handing one-message transactions to a committer and back cost alone, a ceiling for W3 of
  any engine that group-commits in one process;
- W1 receive on the barest queues: one DELETE ... RETURNING of the oldest message per committed
  transaction, on a table with one (group, order) index, and on a table with no index at all
  (which cannot serve conversation groups; it shows what the index costs); and on the grouped
  table by marking, as above.

Same durability as the engine's default (WAL, synchronous=NORMAL); median of --runs.
Issue 40's lean queue designs, measured the same way beside the peers: ``python -m
bench.leanfloor`` (bench/lean.py, bench/leanpg.py).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.systems.sqlite import connect

BODY = b"x" * 200
GROUPS = 100
BATCH = 100


def _rate(n: int, fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def _send_round_robin(conn: sqlite3.Connection, n: int, sql: str,
                      row: Callable[[int, int], tuple[object, ...]]) -> None:
    """Send n messages, BATCH per committed transaction, round-robin over the groups;
    ``row(g, k)`` is the row of group g's k-th message (k from 1)."""
    seqs = [0] * GROUPS
    for j in range(0, n, BATCH):
        rows = []
        for i in range(j, j + BATCH):
            g = i % GROUPS
            seqs[g] += 1
            rows.append(row(g, seqs[g]))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows)
        conn.execute("COMMIT")


def _by_group(conn: sqlite3.Connection, n: int, take: Callable[[int], int]) -> None:
    """Receive n messages, up to 100 of one group per transaction, the groups in turn;
    ``take(g)`` reads and deletes group g's next messages and says how many."""
    got = 0
    for g in itertools.cycle(range(GROUPS)):
        if got >= n:
            return
        conn.execute("BEGIN IMMEDIATE")
        got += take(g)
        conn.execute("COMMIT")


def raw_insert(path: Path, n: int) -> dict[str, float]:
    """One committed INSERT per transaction into a bare table."""
    conn = connect(path, "normal")
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")

    def run() -> None:
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO q (body) VALUES (?)", (BODY,))
            conn.execute("COMMIT")

    try:
        return {"send": _rate(n, run)}
    finally:
        conn.close()


def conversing_broker(target: str) -> None:
    """Make, at ``target`` (a path or URL), queues q and qi and 100 dialogs svc_i -> svc_t
    with both ends conversing (one message sent on each and received)."""
    from sbroker import Broker

    broker = Broker.open(target)
    try:
        broker.create_queue("qi")
        broker.create_queue("q")
        broker.create_service("svc_i", "qi")
        broker.create_service("svc_t", "q", contracts=["DEFAULT"])
        with broker.transaction() as tx:
            handles = [tx.begin_dialog("svc_i", "svc_t") for _ in range(GROUPS)]
            tx.send(handles, "DEFAULT", b"first")
        with broker.transaction() as tx:
            while tx.receive("q"):
                pass
    finally:
        broker.close()


def _sbroker_schema(path: Path) -> tuple[int, list[tuple[object, ...]]]:
    """A broker database with a queue and 100 dialogs; returns the target queue id and one
    template row per dialog for sb_messages (the engine's own insert layout)."""
    conversing_broker(str(path))
    conn = sqlite3.connect(path)
    try:
        queue_id = conn.execute("SELECT queue_id FROM sb_queues WHERE name = 'q'").fetchone()[0]
        rows = conn.execute(
            "SELECT queue_id, group_id, handle, conv_order, priority, service, contract"
            " FROM sb_endpoints WHERE is_initiator = 0 ORDER BY conv_order").fetchall()
    finally:
        conn.close()
    return queue_id, rows


def _message(template: tuple[object, ...], msn: int) -> tuple[object, ...]:
    queue_id, group, handle, conv_order, priority, service, contract = template
    return (queue_id, group, handle, conv_order, msn, 1, priority, 0, "DEFAULT", "N", BODY,
            os.urandom(16).hex().upper(), service, contract, time.time(), None)


def sbroker_w1_receive(path: Path, n: int) -> dict[str, float]:
    """Receive n messages one per transaction with the engine's statements, no engine."""
    from sbroker.storage.sqlite.connection import SQL
    from sbroker.storage.sqlite.sweeper import Sweeper

    queue_id, templates = _sbroker_schema(path)
    conn = connect(path, "normal")
    sweeper = Sweeper()
    try:
        msn = itertools.count(1)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(SQL.insert_message,
                         [_message(templates[i % GROUPS], next(msn)) for i in range(n)])
        conn.execute("COMMIT")

        def run() -> None:
            for _ in range(n):
                conn.execute("BEGIN IMMEDIATE")
                rows = conn.execute(SQL.receive_take_next, (queue_id, queue_id, "me", 1)).fetchall()
                sweeper.consume(conn, [(rows[0][2], rows[0][11])], queue_id)
                conn.execute("COMMIT")

        return {"receive": _rate(n, run)}
    finally:
        conn.close()


def _without_positions_kept(conn: sqlite3.Connection) -> None:
    """sb_messages rebuilt without AUTOINCREMENT (its indexes again): what a send would write
    if positions could be handed out twice (streams need them not to be)."""
    table, *indexes = [row[0] for row in conn.execute(
        "SELECT sql FROM sqlite_schema WHERE tbl_name = 'sb_messages' AND sql IS NOT NULL"
        " ORDER BY type = 'index'")]
    conn.execute("PRAGMA legacy_alter_table = ON")
    conn.execute("DROP TABLE sb_messages")
    conn.execute(table.replace("AUTOINCREMENT", ""))
    for index in indexes:
        conn.execute(index)


def sbroker_w1_send(path: Path, n: int, *, bare: bool = False) -> dict[str, float]:
    """Send n messages one per transaction with the engine's statements for a dialog whose
    local peer converses (send_direct, then bump_send_seq), round-robin, no engine.

    ``bare``: without the two writes that keep numbers, sb_messages' AUTOINCREMENT (stream
    positions never given twice) and bump_send_seq (the conversation's next sequence number):
    the bound even a broker that dropped both guarantees would have."""
    from sbroker.core.messages import new_id
    from sbroker.storage.sqlite.connection import SQL

    _sbroker_schema(path)
    conn = connect(path, "normal")
    if bare:
        _without_positions_kept(conn)
    try:
        dialogs = conn.execute(
            "SELECT s.conv_order, s.handle, p.conv_order FROM sb_endpoints s JOIN sb_endpoints p"
            " ON p.conversation_id = s.conversation_id AND p.is_initiator = 0"
            " WHERE s.is_initiator = 1").fetchall()
        version = conn.execute(SQL.catalog_version).fetchone()[0]

        def run() -> None:
            for i in range(n):
                sender, handle, peer = dialogs[i % len(dialogs)]
                conn.execute("BEGIN IMMEDIATE")
                inserted = conn.execute(SQL.send_direct, (
                    0, "DEFAULT", "N", BODY, new_id(), time.time(), sender, handle, peer,
                    version)).rowcount
                if not bare:
                    conn.execute(SQL.bump_send_seq, (1, sender))
                conn.execute("COMMIT")
                if inserted != 1:
                    raise AssertionError("the dialog was not conversing")

        return {"send": _rate(n, run)}
    finally:
        conn.close()


def huey_w1(path: Path, n: int) -> dict[str, float]:
    """huey's SqliteStorage as the suite runs it (bench/systems/huey.py, the same
    durability): n enqueues, then n dequeues, each committed alone. Not SQLite alone: the
    peer issue 22 holds sbroker's W1 to, beside the SQL sbroker needs."""
    from bench.servers import ServerPool
    from bench.systems.huey import Huey

    system = Huey(ServerPool(lambda _line: None))
    system.setup(path.parent, "normal")
    client = system.client()
    try:
        send = _rate(n, lambda: [client.send_one(BODY) for _ in range(n)])
        receive = _rate(n, lambda: [client.receive_one(1.0) for _ in range(n)])
        return {"send": send, "receive": receive}
    finally:
        client.close()
        system.teardown()


def sbroker_w2(path: Path, n: int) -> dict[str, float]:
    """W2 with the engine's statements: executemany of 100 rows round-robin over the groups
    per transaction; then 100 of one group per transaction."""
    from sbroker.storage.sqlite.connection import SQL
    from sbroker.storage.sqlite.sweeper import Sweeper

    _, templates = _sbroker_schema(path)
    conn = connect(path, "normal")
    sweeper = Sweeper()
    fetch = SQL.receive_fetch

    def send() -> None:
        _send_round_robin(conn, n, SQL.insert_message, lambda g, k: _message(templates[g], k))

    def take(g: int) -> int:
        rows = conn.execute(fetch, (templates[g][1], BATCH)).fetchall()
        sweeper.consume(conn, [(r[2], r[11]) for r in rows], templates[g][0])
        return len(rows)

    try:
        return {"send": _rate(n, send), "receive": _rate(n, lambda: _by_group(conn, n, take))}
    finally:
        conn.close()


_MARKED = "NOT EXISTS (SELECT 1 FROM c WHERE c.id = {t}.id)"
SWEEP_EVERY = 32  # receiving commits between sweeps, as sbroker.consumed.SWEEP_COMMITS


class _Marks:
    """Receive by marking: the taken ids go into table c; every SWEEP_EVERY commits one
    DELETE removes the marked rows and the marks."""

    def __init__(self, conn: sqlite3.Connection, table: str) -> None:
        self.conn, self.table, self.commits = conn, table, 0
        conn.execute("CREATE TABLE c (id INTEGER PRIMARY KEY)")

    def take(self, ids: list[tuple[int]]) -> None:
        self.conn.executemany("INSERT INTO c (id) VALUES (?)", ids)
        self.commits += 1
        if self.commits % SWEEP_EVERY == 0:
            self.conn.execute(f"DELETE FROM {self.table} WHERE id IN (SELECT id FROM c)")
            self.conn.execute("DELETE FROM c")


def minimal_w2(path: Path, n: int, *, marked: bool = False) -> dict[str, float]:
    """W2 on the least a grouped queue needs in SQLite: integer keys, the body, one index."""
    conn = connect(path, "normal")
    conn.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, body BLOB)")
    conn.execute("CREATE INDEX m_grp ON m(grp, id)")
    marks = _Marks(conn, "m") if marked else None
    live = f" AND {_MARKED.format(t='m')}" if marked else ""

    def send() -> None:
        for j in range(0, n, BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO m (grp, body) VALUES (?, ?)",
                             [(i % GROUPS, BODY) for i in range(j, j + BATCH)])
            conn.execute("COMMIT")

    def take(g: int) -> int:
        rows = conn.execute(f"SELECT id, body FROM m WHERE grp = ?{live} ORDER BY id LIMIT ?",
                            (g, BATCH)).fetchall()
        if marks is None:
            conn.executemany("DELETE FROM m WHERE id = ?", [(r[0],) for r in rows])
        else:
            marks.take([(r[0],) for r in rows])
        return len(rows)

    try:
        return {"send": _rate(n, send), "receive": _rate(n, lambda: _by_group(conn, n, take))}
    finally:
        conn.close()


def clustered_w2(path: Path, n: int) -> dict[str, float]:
    """W2 on a table clustered by group: each group's rows are contiguous, so a receive reads
    and deletes a few pages, and a send of 100 rows over 100 groups writes into 100 places."""
    conn = connect(path, "normal")
    conn.execute("CREATE TABLE m (grp INTEGER NOT NULL, id INTEGER NOT NULL, body BLOB,"
                 " PRIMARY KEY (grp, id)) WITHOUT ROWID")

    def send() -> None:
        _send_round_robin(conn, n, "INSERT INTO m (grp, id, body) VALUES (?, ?, ?)",
                          lambda g, k: (g, k, BODY))

    def take(g: int) -> int:
        rows = conn.execute("SELECT id, body FROM m WHERE grp = ? ORDER BY id LIMIT ?",
                            (g, BATCH)).fetchall()
        if rows:
            conn.execute("DELETE FROM m WHERE grp = ? AND id <= ?", (g, rows[-1][0]))
        return len(rows)

    try:
        return {"send": _rate(n, send), "receive": _rate(n, lambda: _by_group(conn, n, take))}
    finally:
        conn.close()


def _barest_receive(path: Path, n: int, *, grouped: bool,
                    marked: bool = False) -> dict[str, float]:
    conn = connect(path, "normal")
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, body BLOB)")
    if grouped:
        conn.execute("CREATE INDEX q_grp ON q(grp, id)")
    marks = _Marks(conn, "q") if marked else None
    oldest = f"SELECT id, grp, body FROM q WHERE {_MARKED.format(t='q')} ORDER BY id LIMIT 1"
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO q (grp, body) VALUES (?, ?)",
                     [(i % GROUPS, BODY) for i in range(n)])
    conn.execute("COMMIT")

    def run() -> None:
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            if marks is None:
                conn.execute("DELETE FROM q WHERE id = (SELECT min(id) FROM q)"
                             " RETURNING grp, body").fetchall()
            else:
                row = conn.execute(oldest).fetchone()
                marks.take([(row[0],)])
            conn.execute("COMMIT")

    try:
        return {"receive": _rate(n, run)}
    finally:
        conn.close()


def barest_grouped_receive(path: Path, n: int) -> dict[str, float]:
    """One committed DELETE ... RETURNING of the oldest message per transaction, on a table
    with the one (group, order) index any grouped queue needs."""
    return _barest_receive(path, n, grouped=True)


def barest_marked_receive(path: Path, n: int) -> dict[str, float]:
    """The grouped table again, each receive marking its row, the marks swept every 32."""
    return _barest_receive(path, n, grouped=True, marked=True)


def minimal_marked_w2(path: Path, n: int) -> dict[str, float]:
    """W2 on the minimal grouped table, received by marking, swept every 32 receives."""
    return minimal_w2(path, n, marked=True)


def barest_ungrouped_receive(path: Path, n: int) -> dict[str, float]:
    """The same on a table with no index besides its rowid (no conversation groups)."""
    return _barest_receive(path, n, grouped=False)


def barest_w3(path: Path, n: int, threads: int = 8, *, stored: bool = True) -> dict[str, float]:
    """W3 on the barest group-committed queue: msgs/s received (all sent and received) and
    the process's CPU microseconds per message.  With ``stored=False`` the committer keeps the
    messages in a deque and never touches SQLite: what handing one-message transactions
    between 16 threads and a committer costs by itself."""
    conn = connect(path, "normal")
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, body BLOB)")
    conn.execute("CREATE INDEX q_grp ON q(grp, id)")
    memory: deque[bytes] = deque()
    queued: deque[tuple[int | None, list[object], threading.Lock]] = deque()
    wake = threading.Condition()
    committed = threading.Semaphore(0)  # messages sent and committed, not yet asked for
    closing = False

    def committer() -> None:
        while True:
            with wake:
                while not queued and not closing:
                    wake.wait()
                if not queued:
                    return
                batch = list(queued)
                queued.clear()
            if stored:
                conn.execute("BEGIN IMMEDIATE")
            for group, out, _ in batch:
                if not stored:
                    if group is None:
                        out.append((memory.popleft(),) if memory else None)
                    else:
                        memory.append(BODY)
                elif group is None:
                    out.append(conn.execute("DELETE FROM q WHERE id = (SELECT min(id) FROM q)"
                                            " RETURNING body").fetchone())
                else:
                    conn.execute("INSERT INTO q (grp, body) VALUES (?, ?)", (group, BODY))
            if stored:
                conn.execute("COMMIT")
            sent = sum(1 for group, _, _ in batch if group is not None)
            if sent:
                committed.release(sent)
            for _, _, done in batch:
                done.release()

    def transaction(group: int | None) -> list[object]:
        out: list[object] = []
        done = threading.Lock()
        done.acquire()
        with wake:
            queued.append((group, out, done))
            wake.notify()
        done.acquire()  # released by the committer once the batch has committed
        return out

    def producer(slot: int) -> None:
        for _ in range(slot, n, threads):
            transaction(slot)

    def consumer(slot: int) -> None:
        for _ in range(slot, n, threads):
            committed.acquire()
            if transaction(None) == [None]:
                raise AssertionError("a committed message was not there to receive")

    worker = threading.Thread(target=committer)
    worker.start()
    clients = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
    clients += [threading.Thread(target=consumer, args=(i,)) for i in range(threads)]
    cpu = time.process_time()
    switches = _switches()
    start = time.perf_counter()
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    switches = _switches() - switches
    with wake:
        closing = True
        wake.notify()
    worker.join()
    conn.close()
    return {"receive": n / elapsed, "cpu_us": cpu / n * 1e6, "switches": switches / n}


def handoff_w3(path: Path, n: int) -> dict[str, float]:
    """W3's threads and committer hand-off with no storage: a ceiling for W3 of any engine
    that group-commits one-message transactions of 16 Python threads in one process."""
    return barest_w3(path, n, stored=False)


def _switches() -> int:
    """Context switches of this process so far (voluntary and not)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _runs(fn: Callable[[Path, int], dict[str, float]], n: int, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for _ in range(runs):
        workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-floor-"))
        try:
            for key, value in fn(workdir / "f.db", n).items():
                out.setdefault(key, []).append(value)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="W1 2,000 and W2 20,000 messages")
    args = p.parse_args(argv)
    w1, w2 = (2_000, 20_000) if args.quick else (10_000, 100_000)
    console = Console(width=None if sys.stdout.isatty() else 120)
    huey = _runs(huey_w1, w1, args.runs)
    measured = [
        ("raw SQLite, 1 INSERT/tx", "send", _runs(raw_insert, w1, args.runs)),
        ("W1 send, sbroker's SQL only", "send", _runs(sbroker_w1_send, w1, args.runs)),
        ("W1 send, sbroker's SQL without its two numbering writes", "send",
         _runs(functools.partial(sbroker_w1_send, bare=True), w1, args.runs)),
        ("W1 send, huey (its whole enqueue)", "send", huey),
        ("W1 receive, sbroker's SQL only", "receive", _runs(sbroker_w1_receive, w1, args.runs)),
        ("W1 receive, huey (its whole dequeue)", "receive", huey),
        ("W1 receive, barest grouped queue", "receive",
         _runs(barest_grouped_receive, w1, args.runs)),
        ("W1 receive, barest queue, no group index", "receive",
         _runs(barest_ungrouped_receive, w1, args.runs)),
        ("W1 receive, barest grouped queue, marked", "receive",
         _runs(barest_marked_receive, w1, args.runs)),
    ]
    w3 = _runs(barest_w3, w1, args.runs)
    measured.append(("W3, barest group-committed queue, 8+8 threads", "receive", w3))
    handoff = _runs(handoff_w3, w1, args.runs)
    measured.append(("W3, the same hand-off storing nothing", "receive", handoff))
    w2_sb = _runs(sbroker_w2, w2, args.runs)
    w2_min = _runs(minimal_w2, w2, args.runs)
    w2_mark = _runs(minimal_marked_w2, w2, args.runs)
    w2_clu = _runs(clustered_w2, w2, args.runs)
    measured += [
        ("W2 send, sbroker's SQL only", "send", w2_sb),
        ("W2 receive, sbroker's SQL only", "receive", w2_sb),
        ("W2 send, minimal grouped table", "send", w2_min),
        ("W2 receive, minimal grouped table", "receive", w2_min),
        ("W2 receive, minimal grouped table, marked", "receive", w2_mark),
        ("W2 send, group-clustered table", "send", w2_clu),
        ("W2 receive, group-clustered table", "receive", w2_clu),
    ]
    t = Table(title=f"SQLite floor for issue 2's workloads (WAL, synchronous=NORMAL; "
                    f"W1 {w1:,}, W2 {w2:,} msgs of {len(BODY)} B, median of {args.runs})",
              title_justify="left", pad_edge=False)
    for name in ("Figure (msgs/s)", "Median", "Min - max"):
        t.add_column(name, justify="left" if name.startswith("Figure") else "right")
    medians = {}
    for name, key, values in measured:
        v = values[key]
        medians[name] = statistics.median(v)
        t.add_row(name, f"{medians[name]:,.0f}", f"{min(v):,.0f} - {max(v):,.0f}")
    console.print(t)
    raw = medians["raw SQLite, 1 INSERT/tx"]
    for name in ("W1 receive, sbroker's SQL only", "W1 receive, barest grouped queue",
                 "W1 receive, barest queue, no group index",
                 "W1 receive, barest grouped queue, marked"):
        console.print(f"  {name} / raw INSERT per tx: {medians[name] / raw:.2f} "
                      "(issue 2's target for the whole engine: >= 0.80)")
    for kind, verb in (("send", "enqueue"), ("receive", "dequeue")):
        ours = medians[f"W1 {kind}, sbroker's SQL only"]
        peer = medians[f"W1 {kind}, huey (its whole {verb})"]
        console.print(f"  W1 {kind}, sbroker's SQL only / huey: {ours / peer:.2f} (issue 22's"
                      " target for the whole engine: >= 0.90; the SQL alone sets its bound)")
    bare = medians["W1 send, sbroker's SQL without its two numbering writes"]
    console.print(f"  W1 send, sbroker's SQL without its two numbering writes / huey:"
                  f" {bare / medians['W1 send, huey (its whole enqueue)']:.2f} (no Python"
                  " engine around it)")
    w2_send = medians["W2 send, sbroker's SQL only"]
    console.print(f"  W2 send, sbroker's SQL only: {w2_send:,.0f} msgs/s (issue 22's target for"
                  " the whole engine: >= 100,000)")
    cpu_us = statistics.median(w3["cpu_us"])
    switches = statistics.median(w3["switches"])
    console.print(f"  W3, barest group-committed queue: {cpu_us:.0f} us CPU and {switches:.1f}"
                  " context switches per message sent and received (this process, all threads;"
                  " python -m bench.cpu shows sbroker's)")
    console.print(f"  W3, hand-off alone: {statistics.median(handoff['cpu_us']):.0f} us CPU and"
                  f" {statistics.median(handoff['switches']):.1f} context switches per message:"
                  " no in-process engine that hands each one-message transaction to a group"
                  " committer and back can beat this row's rate on this machine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
