"""The engine side of Spark streams (sbroker.engine.streams): positions that never come back,
the claim that keeps a streamed queue to one reader, planning and replaying ranges, and
receiving them; the sink's batches sent once on conversations kept per key.  On SQLite and
on PostgreSQL (the run's throwaway server: a test fails, never skips, if it cannot start)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from support.helpers import DEADLINE, begin_and_send, bodies, database_at, send

import sbroker
from sbroker.engine import streams
from sbroker.engine.streams import QueueStreamedError, SinkTarget, StreamSource
from sbroker.storage.postgres import session as pg_session

BACKENDS = ["sqlite", "postgres"]
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
POSTGRES_ONLY = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_path(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The test's broker database: a file, or a fresh database of the run's server."""
    if backend == "sqlite":
        yield str(tmp_path / "broker.db")
        return
    server = request.getfixturevalue("postgres")
    url = server.new_database()
    try:
        yield url
    finally:
        server.drop(url)


def _source(b: sbroker.Broker, queue: str = "TargetQueue") -> StreamSource:
    source = StreamSource(b, queue)
    source.claim(wait=0)
    return source


def _range(b: sbroker.Broker, source: StreamSource, after: int, through: int) -> list[str]:
    rows = streams.read_range(b, source.queue.queue_id, after, through)
    return [row[5].decode() for row in rows]


def _stats(b: sbroker.Broker, queue: str) -> dict[str, object]:
    return next(row for row in b.view("queue_stats") if row["queue_name"] == queue)


@pytest.fixture
def other(db_path: str, pair: sbroker.Broker) -> Iterator[sbroker.Broker]:
    """A second broker session on the same file (another reader, as far as claims go)."""
    b = sbroker.Broker.open(db_path)
    try:
        yield b
    finally:
        b.close()


# -- positions ---------------------------------------------------------------------------------
def test_a_position_is_never_handed_out_twice(pair: sbroker.Broker) -> None:
    begin_and_send(pair, "a", "b")
    top = max(m.queuing_order for m in pair.peek("TargetQueue"))
    with pair.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["a", "b"]  # the top rows are deleted
    begin_and_send(pair, "c")
    assert [m.queuing_order for m in pair.peek("TargetQueue")] == [top + 1]


def test_an_older_database_keeps_its_messages_and_positions_grow_past_them(
        tmp_path: Path) -> None:  # SQLite's migrations
    path = tmp_path / "broker.db"
    database_at(path, 7)  # before positions were kept: one message waits in queue T
    initiator = "A" * 8 + "-0000-0000-0000-" + "0" * 12
    with sbroker.Broker.open(path) as b:
        (old,) = b.peek("T")
        send(b, initiator, "new")
        with b.transaction() as tx:  # the top row goes too: its position is not reused
            assert bodies(tx.receive("T")) == ["kept", "new"]
        send(b, initiator, "newer")
        assert b.peek("T")[0].queuing_order > old.queuing_order + 1


def test_positions_given_before_the_group_keys_migration_are_not_given_again(
        tmp_path: Path) -> None:  # SQLite's migration 10 rebuilds the queue table
    path = tmp_path / "broker.db"
    database_at(path, 9)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO sb_messages SELECT 5, queue_id, group_id, handle, conv_order, 1,"
                 " status, priority, is_timer, message_type, validation, body, message_id,"
                 " service, contract, enqueued_at FROM sb_messages")
    conn.execute("DELETE FROM sb_messages WHERE queuing_order = 5")  # received at the top
    conn.close()
    with sbroker.Broker.open(path) as b:
        send(b, "A" * 8 + "-0000-0000-0000-" + "0" * 12, "new")
        assert [m.queuing_order for m in b.peek("T")] == [1, 6]


# -- the claim ---------------------------------------------------------------------------------
def test_a_claimed_queue_refuses_receive_and_get_conversation_group(pair: sbroker.Broker,
                                                                  other: sbroker.Broker) -> None:
    begin_and_send(pair, "x")
    source = _source(pair)
    for b in (pair, other):  # this process's own transactions too
        with pytest.raises(QueueStreamedError, match="read by a Spark stream"), \
                b.transaction() as tx:
            tx.receive("TargetQueue")
        with pytest.raises(QueueStreamedError), b.transaction() as tx:
            tx.get_conversation_group("TargetQueue")
    assert [m.text() for m in other.peek("TargetQueue")] == ["x"]  # looking is fine
    source.release()
    with other.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["x"]


def test_a_second_stream_reader_is_refused(pair: sbroker.Broker, other: sbroker.Broker) -> None:
    _source(pair)
    with pytest.raises(QueueStreamedError, match="read by another stream .*pid"):
        _source(other)
    assert pair.view("dm_broker_streams")[0]["session_id"] == pair.session_id


def test_a_claim_waits_for_no_receive_in_progress(pair: sbroker.Broker) -> None:
    begin_and_send(pair, "x")
    tx = pair.transaction()
    try:
        assert bodies(tx.receive("TargetQueue")) == ["x"]
        with pytest.raises(QueueStreamedError, match="locked by transactions receiving"):
            _source(pair)
    finally:
        tx.rollback()
    _source(pair)


def test_a_queue_with_activation_cannot_be_streamed(pair: sbroker.Broker) -> None:
    pair.alter_queue("TargetQueue", activation=sbroker.Activation("support.helpers:send"))
    with pytest.raises(sbroker.InvalidArgumentError, match="activation on"):
        _source(pair)


def test_closing_the_broker_frees_the_claim(pair: sbroker.Broker, other: sbroker.Broker,
                                            db_path: str) -> None:
    third = sbroker.Broker.open(db_path)
    _source(third)
    third.close()
    _source(other)


CLAIMER = """
import sys, sbroker
from sbroker.engine.streams import StreamSource
b = sbroker.Broker.open(sys.argv[1])
StreamSource(b, "TargetQueue").claim(wait=0)
print("claimed", flush=True)
sys.stdin.readline()
"""


def test_the_claim_of_a_killed_process_is_taken_back(pair: sbroker.Broker, db_path: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # On PostgreSQL a session is dead once it holds no lock and has not beaten for a grace
    # period (3 s): none here, so that the killed child's session is dead at once.
    monkeypatch.setattr(pg_session, "GRACE_SECONDS", 0.0)
    child = subprocess.Popen([sys.executable, "-c", CLAIMER, db_path],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "claimed"
        with pytest.raises(QueueStreamedError, match=f"pid {child.pid}"):
            _source(pair)
        child.kill()  # kill -9: no close, no release
        child.wait(DEADLINE)
        begin_and_send(pair, "x")
        with pair.transaction() as tx:  # a RECEIVE reaps the dead holder
            assert bodies(tx.receive("TargetQueue")) == ["x"]
        _source(pair)
    finally:
        child.kill()
        child.wait(DEADLINE)
        for stream in (child.stdin, child.stdout):
            assert stream is not None
            stream.close()


def test_a_reader_that_lost_its_claim_cannot_commit(pair: sbroker.Broker, db_path: str) -> None:
    third = sbroker.Broker.open(db_path)
    begin_and_send(third, "x")
    source = _source(third)
    end = source.latest(10)
    with third.transaction() as tx:  # as if its session had been reaped
        tx.execute("UPDATE sb_stream_sources SET session_id = NULL")
    try:
        with pytest.raises(QueueStreamedError, match="lost its claim"):
            source.commit(end)
    finally:
        third.close()


# -- planning, reading, receiving ----------------------------------------------------------------
def test_batches_are_capped_and_offsets_never_go_back(pair: sbroker.Broker) -> None:
    handle = begin_and_send(pair, *map(str, range(5)))
    source = _source(pair)
    first = source.latest(2)
    assert _range(pair, source, 0, first) == ["0", "1"]
    second = source.latest(2)
    assert _range(pair, source, first, second) == ["2", "3"]
    source.release()
    again = _source(pair)  # a new reader plans after everything planned before
    third = again.latest(10)
    assert third > second and _range(pair, again, second, third) == ["4"]
    assert again.latest(10) == third  # nothing new: the same end
    send(pair, handle, "5")
    assert _range(pair, again, third, again.latest(10)) == ["5"]


def test_a_horizon_bounds_a_run_to_what_was_committed_when_it_started(
        pair: sbroker.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trigger.AvailableNow: the horizon covers every message committed before it was taken
    (on PostgreSQL numbered a chunk at a time) and none after; batches from a given start
    under a row limit, or without one."""
    monkeypatch.setattr(streams, "NUMBER_CHUNK", 2)
    handle = begin_and_send(pair, *map(str, range(5)))
    source = _source(pair)
    horizon = source.horizon()
    send(pair, handle, "late")
    first = source.latest(3, after=0, through=horizon)
    assert _range(pair, source, 0, first) == ["0", "1", "2"]
    rest = source.latest(None, after=first, through=horizon)
    assert _range(pair, source, first, rest) == ["3", "4"]
    assert source.latest(3, after=rest, through=horizon) == rest  # the run is done
    # a start behind the plan (a driver killed before Spark logged the end it was given)
    assert _range(pair, source, 0, source.latest(1, after=0)) == ["0"]
    assert _range(pair, source, rest, source.latest(None, after=rest)) == ["late"]


def test_a_range_reads_the_same_rows_again_and_new_messages_land_after_it(
        pair: sbroker.Broker) -> None:
    handle = begin_and_send(pair, "a", "b")
    source = _source(pair)
    end = source.latest(10)
    first = _range(pair, source, 0, end)
    send(pair, handle, "c")
    assert _range(pair, source, 0, end) == first == ["a", "b"]


def test_a_range_is_in_position_order_across_priorities(pair: sbroker.Broker) -> None:
    pair.create_broker_priority("high", local_service="TargetService", priority_level=9)
    pair.create_service("LowService", "TargetQueue", ["DEFAULT"])
    with pair.transaction() as tx:
        high = tx.begin_dialog("InitService", "TargetService")
        low = tx.begin_dialog("InitService", "LowService")
        for i in range(6):
            tx.send(high if i % 2 else low, "DEFAULT", str(i))
    source = _source(pair)
    assert {m.priority for m in pair.peek("TargetQueue")} == {5, 9}
    assert _range(pair, source, 0, source.latest(100)) == list("012345")
    found = streams.positions(pair, source.queue.queue_id, 0)
    assert found == sorted(found) and len(found) == 6
    assert streams.split(found, 0, found[-1], 4) == [(0, found[3]), (found[3], found[-1])]


def test_commit_receives_the_range_once_and_counts_it(pair: sbroker.Broker) -> None:
    begin_and_send(pair, *map(str, range(4)))
    source = _source(pair)
    end = source.latest(3)
    assert source.commit(end) == 3
    assert source.commit(end) == 0  # Spark may commit the same end again
    assert [m.text() for m in pair.peek("TargetQueue")] == ["3"]
    stats = _stats(pair, "TargetQueue")
    assert stats["messages_received_total"] == 3 and stats["messages_enqueued_total"] == 4
    assert pair.view("dm_broker_streams")[0]["committed_queuing_order"] == end


def test_commit_ends_the_conversations_whose_end_it_received(pair: sbroker.Broker) -> None:
    with pair.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        tx.send(handle, "DEFAULT", "last words")
        tx.end_conversation(handle)
    source = _source(pair)
    end = source.latest(10)
    rows = streams.read_range(pair, source.queue.queue_id, 0, end)
    assert [row[3] for row in rows] == ["DEFAULT", sbroker.END_DIALOG]
    source.commit(end)
    assert pair.view("conversation_endpoints") == []  # both sides ended: gone


def test_a_retention_queue_keeps_what_the_stream_received(pair: sbroker.Broker) -> None:
    pair.alter_queue("TargetQueue", retention=True)
    begin_and_send(pair, "kept")
    source = _source(pair)
    source.commit(source.latest(10))
    assert [(m.status, m.text()) for m in pair.peek("TargetQueue")] == [(0, "kept")]
    assert source.latest(10) == source.committed  # nothing ready any more


def test_messages_received_before_the_claim_are_not_streamed(pair: sbroker.Broker,
                                                            backend: str) -> None:
    if backend == "sqlite":  # received rows are marked, not deleted, until a sweep
        pair.db.sweeper.dense = 0
    begin_and_send(pair, "gone")
    with pair.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["gone"]
    begin_and_send(pair, "here")
    source = _source(pair)
    assert _range(pair, source, 0, source.latest(10)) == ["here"]


def test_a_snapshot_reads_every_ready_message_without_a_stream(pair: sbroker.Broker) -> None:
    begin_and_send(pair, "a", "b")  # no stream reads the queue: nothing numbered them
    queue_id = streams.queue_info(pair, "TargetQueue").queue_id
    found = streams.positions(pair, queue_id, 0, snapshot=True)
    rows = streams.read_range(pair, queue_id, 0, found[-1], snapshot=True)
    assert len(found) == 2 and [row[5].decode() for row in rows] == ["a", "b"]
    assert len(pair.peek("TargetQueue")) == 2  # only looked


def test_a_disabled_queue_stops_the_stream(pair: sbroker.Broker) -> None:
    source = _source(pair)
    pair.alter_queue("TargetQueue", status=False)
    with pytest.raises(sbroker.QueueDisabledError):
        source.latest(10)


def test_a_receive_of_one_conversation_is_refused_on_a_claimed_queue(
        pair: sbroker.Broker, other: sbroker.Broker) -> None:
    handle = begin_and_send(pair, "x")
    (target,) = [e["conversation_handle"] for e in pair.view("conversation_endpoints")
                 if e["conversation_handle"] != handle]
    _source(pair)
    with pytest.raises(QueueStreamedError, match="read by a Spark stream"), \
            other.transaction() as tx:
        tx.receive("TargetQueue", conversation_handle=target)
    assert [m.text() for m in other.peek("TargetQueue")] == ["x"]


def _wait_for_blocked_backend(url: str) -> None:
    """Until a backend of the database waits for a lock (a COMMIT held up)."""
    deadline = time.monotonic() + DEADLINE
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted"
                               " AND locktype = 'transactionid'").fetchone()[0]:
            assert time.monotonic() < deadline, "the commit never waited"
            threading.Event().wait(0.01)


@POSTGRES_ONLY
def test_a_row_that_commits_after_a_later_position_is_still_streamed_once(
        pair: sbroker.Broker, db_path: str) -> None:
    """PostgreSQL takes queuing_order at INSERT: here "early" gets the lower one but commits
    after "late" and after a stream planned a batch with "late" in it.  The stream numbers
    rows as they become visible, so "early" comes in the next batch, once."""
    with psycopg.connect(db_path, autocommit=True) as conn:
        conn.execute("CREATE TABLE hold (k integer UNIQUE DEFERRABLE INITIALLY DEFERRED)")
    source = _source(pair)
    blocker = psycopg.connect(db_path)  # holds k = 1: a COMMIT inserting it must wait
    blocker.execute("INSERT INTO hold VALUES (1)")
    failed: list[BaseException] = []

    def early() -> None:
        try:
            with pair.transaction() as tx:
                tx.execute("INSERT INTO hold VALUES (1)")  # checked at COMMIT: waits
                tx.send(tx.begin_dialog("InitService", "TargetService"), body="early")
        except BaseException as exc:  # reported by the test below
            failed.append(exc)

    thread = threading.Thread(target=early)
    thread.start()
    try:
        _wait_for_blocked_backend(db_path)  # "early" is inserted, its COMMIT waits
        begin_and_send(pair, "late")
        first = source.latest(10)
        assert _range(pair, source, 0, first) == ["late"]
        blocker.rollback()  # "early" commits now
        thread.join(DEADLINE)
    finally:
        blocker.close()
        thread.join(DEADLINE)
    assert not thread.is_alive() and failed == []
    early_row, late_row = sorted(pair.peek("TargetQueue"), key=lambda m: m.text())
    assert early_row.queuing_order < late_row.queuing_order  # the hazard happened
    assert source.commit(first) == 1
    second = source.latest(10)
    assert second > first and _range(pair, source, first, second) == ["early"]
    assert source.commit(second) == 1
    assert pair.peek("TargetQueue") == [] and source.latest(10) == second


class _Interleaved:
    """The stream statements, running ``meanwhile`` once when ``name`` is looked up."""

    def __init__(self, statements: object, name: str, meanwhile: Callable[[], None]) -> None:
        self._statements, self._name, self._meanwhile = statements, name, meanwhile

    def __getitem__(self, name: str) -> str:
        if name == self._name and self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return self._statements[name]  # type: ignore[index, no-any-return]


@POSTGRES_ONLY
def test_a_receive_between_a_claims_look_and_its_commit_makes_the_claim_give_up(
        pair: sbroker.Broker, other: sbroker.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL has no single writer to order them: a RECEIVE locks its group after the
    claim looked for locked groups and looks for a claim before the claim commits, so both
    go ahead; the claim's second look, after its commit, finds the lock and gives up."""
    begin_and_send(pair, "x")
    receiving = other.transaction()
    got: list[str] = []
    real = streams.sql
    hooked = _Interleaved(real(pair), "stream_positions",
                          lambda: got.extend(bodies(receiving.receive("TargetQueue"))))
    monkeypatch.setattr(streams, "sql", lambda broker: hooked)
    try:
        with pytest.raises(QueueStreamedError, match="locked by transactions receiving"):
            _source(pair)
        assert got == ["x"]
    except BaseException:
        receiving.rollback()
        raise
    receiving.commit()
    monkeypatch.setattr(streams, "sql", real)
    assert pair.view("dm_broker_streams")[0]["session_id"] is None  # given back
    assert pair.peek("TargetQueue") == []  # received once, by the RECEIVE
    _source(pair)  # and the queue can be claimed now


@POSTGRES_ONLY
def test_a_backlog_is_numbered_one_batch_at_a_time(pair: sbroker.Broker) -> None:
    begin_and_send(pair, *map(str, range(5)))
    source = _source(pair)

    def numbered() -> int:
        with pair.transaction() as tx:
            return int(tx.execute("SELECT count(stream_pos) FROM sb_messages").fetchone()[0])

    first = source.latest(2)
    assert numbered() == 2 and _range(pair, source, 0, first) == ["0", "1"]
    second = source.latest(2)
    assert numbered() == 4 and _range(pair, source, first, second) == ["2", "3"]


# -- the sink ------------------------------------------------------------------------------------
TARGET = SinkTarget("InitService", "TargetService")


def _conversations(b: sbroker.Broker) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in b.peek("TargetQueue"):
        out.setdefault(m.conversation_handle, []).append(m.text())
    return out


def test_a_replayed_batch_sends_nothing(pair: sbroker.Broker) -> None:
    keys, sent = ["a", "b", "a"], ["1", "2", "3"]
    assert streams.send_rows(pair, TARGET, keys, sent, query_id="q", batch_id=0) == 3
    assert streams.send_rows(pair, TARGET, keys, sent, query_id="q", batch_id=0) == 0
    assert streams.send_rows(pair, TARGET, ["a"], ["4"], query_id="q", batch_id=1) == 1
    assert streams.send_rows(pair, TARGET, ["a"], ["5"], query_id="other", batch_id=0) == 1
    assert sorted(_conversations(pair).values()) == [["1", "3", "4", "5"], ["2"]]


def test_a_key_whose_conversation_the_target_ended_gets_a_new_one(pair: sbroker.Broker) -> None:
    streams.send_rows(pair, TARGET, ["a"], ["1"])
    with pair.transaction() as tx:
        (msg,) = tx.receive("TargetQueue")
        tx.end_conversation(msg.conversation_handle)
    streams.send_rows(pair, TARGET, ["a"], ["2"])
    (handle, got), = _conversations(pair).items()
    assert got == ["2"] and handle != msg.conversation_handle
    endpoints = pair.view("conversation_endpoints")  # the old dialog closed on both sides
    assert len(endpoints) == 2
    assert msg.conversation_handle not in {e["conversation_handle"] for e in endpoints}


@pytest.mark.parametrize(("target", "error"), [
    (SinkTarget("Nobody", "TargetService"), "service 'Nobody' does not exist"),
    (SinkTarget("InitService", "Nowhere"), "'Nowhere' does not exist here and no route"),
    (SinkTarget("InitService", "TargetService", "NoContract"), "contract 'NoContract'"),
    (SinkTarget("InitService", "TargetService", message_type="Nope"), "'Nope' does not exist"),
    (SinkTarget("InitService", "TargetService", "C", "Reply"), "sent by the target"),
    (SinkTarget("InitService", "TargetService", "C", "Order"), "does not accept contract 'C'"),
])
def test_a_sink_target_is_checked_with_a_clear_error(pair: sbroker.Broker, target: SinkTarget,
                                                     error: str) -> None:
    pair.create_message_type("Order")
    pair.create_message_type("Reply")
    pair.create_contract("C", {"Order": "initiator", "Reply": "target"})
    with pytest.raises(sbroker.BrokerError, match=error):
        streams.check_target(pair, target)
