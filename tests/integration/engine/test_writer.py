"""The group-commit writer under many threads: every item runs exactly once and its own
thread gets its own result, whatever batches, changes of leader and exclusive holders happen."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from sbroker.storage.sqlite import writer as writer_mod
from sbroker.storage.sqlite.writer import Writer

THREADS = 12
ITEMS = 60
EXCLUSIVE = 40


def _writer(path: Path) -> Writer:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    setup = connect()
    setup.execute("CREATE TABLE t (thread INTEGER, i INTEGER, PRIMARY KEY (thread, i))")
    setup.close()
    return Writer(connect, "NORMAL")


def _hammer(w: Writer, extra: tuple[threading.Thread, ...] = ()) -> list[BaseException]:
    errors: list[BaseException] = []
    gate = threading.Barrier(THREADS)

    def work(k: int) -> None:
        try:
            gate.wait()
            for i in range(ITEMS):
                def fn(conn: sqlite3.Connection, i: int = i) -> tuple[int, int]:
                    conn.execute("INSERT INTO t VALUES (?, ?)", (k, i))
                    return k, i
                assert w.run(fn) == (k, i)  # our own result, not a neighbour's
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in [*threads, *extra]:
        t.start()
    deadline = time.monotonic() + 60
    for t in [*threads, *extra]:
        t.join(max(0.0, deadline - time.monotonic()))
        assert not t.is_alive(), "a writer thread is stuck (nobody leads)"
    return errors


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM t").fetchone()[0]


@pytest.mark.parametrize("max_batch", [writer_mod.MAX_BATCH, 2])
def test_every_item_runs_once_and_returns_to_its_thread(tmp_path: Path, max_batch: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_mod, "MAX_BATCH", max_batch)  # 2: queues longer than a batch
    w = _writer(tmp_path / "w.db")
    try:
        assert _hammer(w) == []
    finally:
        w.close()
    assert _rows(tmp_path / "w.db") == THREADS * ITEMS
    assert w.items == THREADS * ITEMS


@pytest.mark.parametrize("max_batch", [writer_mod.MAX_BATCH, 2])
def test_exclusive_holders_and_batches_take_turns(tmp_path: Path, max_batch: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """While a thread holds the writer exclusively, items pile up; with a 2-item batch limit
    whoever leads next may find its own item beyond one batch and must lead again."""
    monkeypatch.setattr(writer_mod, "MAX_BATCH", max_batch)
    w = _writer(tmp_path / "w.db")
    held = []

    def exclusive() -> None:
        for j in range(EXCLUSIVE):
            conn = w.acquire_exclusive()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t VALUES (?, ?)", (-1, j))
                conn.execute("COMMIT")
                held.append(j)
            finally:
                w.release_exclusive()

    try:
        assert _hammer(w, (threading.Thread(target=exclusive),)) == []
    finally:
        w.close()
    assert held == list(range(EXCLUSIVE))
    assert _rows(tmp_path / "w.db") == THREADS * ITEMS + EXCLUSIVE


def test_a_failing_item_fails_alone(tmp_path: Path) -> None:
    w = _writer(tmp_path / "w.db")
    outcomes: list[object] = []
    gate = threading.Barrier(8)

    def work(k: int) -> None:
        gate.wait()
        def fn(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t VALUES (?, 0)", (k,))
            if k % 2:
                raise ValueError(k)
            return k
        try:
            outcomes.append(w.run(fn))
        except ValueError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    w.close()
    assert sorted(o for o in outcomes if isinstance(o, int)) == [0, 2, 4, 6]
    assert sorted(o.args[0] for o in outcomes if isinstance(o, ValueError)) == [1, 3, 5, 7]
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert [r[0] for r in conn.execute("SELECT thread FROM t ORDER BY 1")] == [0, 2, 4, 6]


def test_a_waiter_interrupted_in_the_queue_hands_the_lead_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queued threads sleep on their own item's lock and the lead is handed to the oldest
    one: a thread interrupted there (KeyboardInterrupt, say) must leave the queue, or the
    lead would go to nobody and the threads behind it would sleep for ever."""

    class Interrupted(Exception):
        pass

    c_sleeps = threading.Event()

    class Sleeper:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.lock.acquire()
            self.who = threading.current_thread().name

        def acquire(self) -> bool:
            if self.who == "B":
                raise Interrupted
            c_sleeps.set()
            return self.lock.acquire()

        def release(self) -> None:
            self.lock.release()

    monkeypatch.setattr(writer_mod, "_sleeper", Sleeper)
    w = _writer(tmp_path / "w.db")
    got: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            got[name] = w.run(lambda conn: conn.execute(
                "INSERT INTO t VALUES (?, 0)", (ord(name),)).rowcount)
        except Interrupted as exc:
            got[name] = exc

    w.acquire_exclusive()  # this thread leads: B and C must queue
    try:
        b = threading.Thread(target=run, args=("B",), name="B", daemon=True)
        b.start()
        b.join(10)
        assert isinstance(got["B"], Interrupted)
        c = threading.Thread(target=run, args=("C",), name="C", daemon=True)
        c.start()
        assert c_sleeps.wait(10)  # C sleeps in the queue behind where B was
    finally:
        w.release_exclusive()  # hands the lead to the oldest queued thread
    c.join(10)
    assert not c.is_alive(), "the lead went to the interrupted thread"
    w.close()
    assert got["C"] == 1
    assert _rows(tmp_path / "w.db") == 1  # B's item never ran


class _TellingCondition(threading.Condition):
    """A Condition that says when a thread starts waiting on it."""

    def __init__(self, lock: threading.Lock, waiting: threading.Event) -> None:
        super().__init__(lock)
        self.waiting = waiting

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_exclusive_holders_take_turns_in_the_order_they_asked(tmp_path: Path) -> None:
    # An executor's readers each hold the writer for a transaction, back to back: one that
    # comes back at once must wait behind one that asked before (else the other starves,
    # holding its conversation group meanwhile).
    w = _writer(tmp_path / "turns.db")
    waiting = threading.Event()
    w._cond = _TellingCondition(w._mutex, waiting)  # type: ignore[assignment]
    order: list[str] = []
    w.acquire_exclusive()  # the first holder

    def second() -> None:
        w.acquire_exclusive()
        order.append("second")
        w.release_exclusive()

    thread = threading.Thread(target=second)
    thread.start()
    assert waiting.wait(10)  # the second one waits for its turn
    w.release_exclusive()
    w.acquire_exclusive()  # the first one again, at once: the second one went before
    order.append("first again")
    w.release_exclusive()
    thread.join(10)
    assert order == ["second", "first again"]
    w.close()
