"""The ``sbroker`` data source on real Spark (docs/stream.md): exactly once through stops,
restarts and a killed driver; bad options failing with one line; a second reader refused; the
batch read and write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from stream_helpers import CONVERSATIONS, batch_sizes, make_database, out_count, pass_through
from support.postgres import RunServer

import sbroker
from sbroker.spark import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MESSAGES = 10_000
DEADLINE = 300.0  # seconds: Spark on a loaded 2-core machine
HERE = Path(__file__).parent


def _until(what: str, done: Callable[[], bool]) -> None:
    """Wait for something another process does (Spark's workers, a dying JVM)."""
    deadline = time.monotonic() + DEADLINE
    pause = threading.Event()
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        pause.wait(0.2)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has exited
    except FileNotFoundError:
        return True


def _produce(url: str, messages: int = MESSAGES) -> None:
    """``messages`` messages on CONVERSATIONS conversations, 100 per transaction: "c:i"."""
    with sbroker.Broker.open(url) as b:
        with b.transaction() as tx:
            handles = [tx.begin_dialog("Src", "In") for _ in range(CONVERSATIONS)]
        for start in range(0, messages, 100):
            with b.transaction() as tx:
                for i in range(start, start + 100):
                    c = i % CONVERSATIONS
                    tx.send(handles[c], "DEFAULT", f"{c}:{i // CONVERSATIONS}")


def _assert_exactly_once_in_order(url: str, *produced: int) -> None:
    """Out holds every message of each _produce call (``produced``: their counts, MESSAGES
    by default) once, each source conversation's on one conversation, in order."""
    produced = produced or (MESSAGES,)
    with sbroker.Broker.open(url) as b:
        rows = b.peek("Out")
    by_conversation: dict[str, list[tuple[int, str]]] = {}
    for m in rows:
        by_conversation.setdefault(m.conversation_handle, []).append(
            (m.message_sequence_number, m.text()))
    assert len(rows) == sum(produced)
    assert sorted(len(sent) for sent in by_conversation.values()) == sorted(
        n // CONVERSATIONS for n in produced for _ in range(CONVERSATIONS))
    for sent in by_conversation.values():
        assert [n for n, _ in sent] == list(range(len(sent)))  # sent in order
        (source,) = {body.split(":")[0] for _, body in sent}  # one source conversation
        assert [int(body.split(":")[1]) for _, body in sent] == list(range(len(sent))), source


def _assert_all_received(url: str, messages: int) -> None:
    with sbroker.Broker.open(url) as b:
        (stats,) = [s for s in b.view("queue_stats") if s["queue_name"] == "In"]
    assert stats["messages_received_total"] == messages
    assert stats["ready_messages"] == 0


def _kill_driver_when(url: str, checkpoint: str, count: int, *args: str) -> None:
    """Run stream_driver.py (``args``: its trigger and batch size), SIGKILL it once Out holds
    ``count`` messages, and wait for its JVM to exit."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    driver = subprocess.Popen([sys.executable, str(HERE / "stream_driver.py"), url,
                               checkpoint, *args], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert driver.stdout is not None
        jvm = json.loads(driver.stdout.readline())["jvm"]
        _until(f"{count:,} messages", lambda: out_count(url) >= count)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(DEADLINE)
        if driver.stdout is not None:
            driver.stdout.close()
    _until("the killed driver's JVM to exit", lambda: _gone(jvm))


def test_every_message_arrives_once_in_order_through_stops_restarts_and_a_kill(
        spark: SparkSession, tmp_path: Path) -> None:
    register(spark)
    url, checkpoint = str(tmp_path / "broker.db"), str(tmp_path / "checkpoint")
    make_database(url)
    producer = threading.Thread(target=_produce, args=(url,))
    producer.start()
    try:
        for stop_after in (1_500, 3_000, 4_500):  # stopped mid-stream, mid-batch too
            query = pass_through(spark, url, checkpoint)
            try:
                _until(f"{stop_after} messages", lambda n=stop_after: out_count(url) >= n)
            finally:
                query.stop()
        _kill_driver_when(url, checkpoint, 6_500)
    finally:
        producer.join()
    query = pass_through(spark, url, checkpoint, claim_timeout=120)  # takes the queue back
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    _assert_exactly_once_in_order(url)
    # every message received once (the last batch too: processAllAvailable returns after
    # Spark asked for more, which is when it is received)
    _assert_all_received(url, MESSAGES)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database with the pass-through's queues. A PostgreSQL one is not dropped
    after: Spark's reused Python workers keep their brokers on it (the server goes at the
    end of the run)."""
    if request.param == "sqlite":
        found = str(tmp_path / "broker.db")
    else:
        found = request.getfixturevalue("postgres").new_database()
    make_database(found)
    return found


AVAILABLE_NOW = {"availableNow": True}


def _run(spark: SparkSession, url: str, checkpoint: str, trigger: dict[str, bool],
         per_batch: int = 300) -> list[int]:
    """One run of the pass-through with a trigger that ends: its micro-batches' sizes."""
    query = pass_through(spark, url, checkpoint, per_batch=per_batch, trigger=trigger,
                         claim_timeout=120)
    try:
        assert query.awaitTermination(DEADLINE), "the run did not end"
    finally:
        query.stop()
    return batch_sizes(query)


def test_available_now_reads_what_is_there_in_batches_of_the_limit_then_stops(
        spark: SparkSession, tmp_path: Path, url: str) -> None:
    """The scheduled job of docs/stream.md ("Triggers"): each run takes every message
    committed when it starts, in micro-batches of at most maxMessagesPerBatch, and ends; the
    next run the rest."""
    register(spark)
    checkpoint = str(tmp_path / "checkpoint")
    _produce(url, 1_000)
    assert _run(spark, url, checkpoint, AVAILABLE_NOW) == [300, 300, 300, 100]
    assert out_count(url) == 1_000
    _assert_all_received(url, 1_000)  # the last batch too, in the same run
    assert _run(spark, url, checkpoint, AVAILABLE_NOW) == []  # nothing new: nothing written
    assert out_count(url) == 1_000
    _produce(url, 500)
    assert _run(spark, url, checkpoint, AVAILABLE_NOW) == [300, 200]
    _assert_exactly_once_in_order(url, 1_000, 500)
    _assert_all_received(url, 1_500)


def test_available_now_and_once_keep_exactly_once_through_a_kill_and_a_stop(
        spark: SparkSession, tmp_path: Path) -> None:
    """An AvailableNow driver killed with SIGKILL mid-run, a run stopped mid-run, messages
    sent between runs, runs to the end, and a Trigger.Once run (everything in one batch, as
    Spark documents): every message once, in order."""
    register(spark)
    url, checkpoint = str(tmp_path / "broker.db"), str(tmp_path / "checkpoint")
    make_database(url)
    _produce(url, 3_000)
    _kill_driver_when(url, checkpoint, 900, "availableNow", "300")
    assert out_count(url) < 3_000  # killed mid-run
    query = pass_through(spark, url, checkpoint, per_batch=300, trigger=AVAILABLE_NOW,
                         claim_timeout=120)
    try:
        _until("1,800 messages", lambda: out_count(url) >= 1_800)
    finally:
        query.stop()
    _produce(url, 1_000)
    _run(spark, url, checkpoint, AVAILABLE_NOW)
    _assert_exactly_once_in_order(url, 3_000, 1_000)
    _assert_all_received(url, 4_000)
    _produce(url, 500)
    assert _run(spark, url, checkpoint, {"once": True}) == [500]  # no read limit
    assert out_count(url) == 4_500
    # Spark tells a source that a batch is committed when it plans the next: the batch of a
    # Trigger.Once run is received when the next run starts
    assert _run(spark, url, checkpoint, AVAILABLE_NOW) == []
    _assert_exactly_once_in_order(url, 3_000, 1_000, 500)
    _assert_all_received(url, 4_500)


def _error_of(start: Callable[[], object]) -> str:
    with pytest.raises(Exception) as caught:  # Spark raises its own types
        query = start()
        try:
            query.processAllAvailable()  # type: ignore[attr-defined]
        finally:
            query.stop()  # type: ignore[attr-defined]
    return str(caught.value)


def test_bad_options_fail_the_query_at_start_with_one_clear_line(
        spark: SparkSession, tmp_path: Path) -> None:
    register(spark)
    url = str(tmp_path / "broker.db")
    make_database(url)
    reader = spark.readStream.format("sbroker").option("url", url)
    with pytest.raises(Exception, match="queue 'Nope' does not exist") as caught:
        reader.option("queue", "Nope").load()
    assert "Traceback" not in str(caught.value)
    source = reader.option("queue", "In").load()

    def sink(columns: str, to_service: str, name: str) -> Callable[[], object]:
        return lambda: (
            source.select(columns).writeStream.format("sbroker").option("url", url)
            .option("from_service", "Src").option("to_service", to_service)
            .option("checkpointLocation", str(tmp_path / name)).start())

    for start, expected in (
            (sink("conversation_handle", "Out", "a"), "needs a column 'message_body'"),
            (sink("message_body", "Nowhere", "b"), "service 'Nowhere' does not exist here")):
        message = _error_of(start)  # at the first micro-batch, before anything is read
        assert expected in message and "Traceback" not in message, message


def test_a_second_reader_of_a_streamed_queue_is_refused(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    register(spark)
    url = str(tmp_path / "broker.db")
    make_database(url)
    first = pass_through(spark, url, str(tmp_path / "first"))
    try:
        first.processAllAvailable()  # it holds the queue now
        message = _error_of(lambda: (
            spark.readStream.format("sbroker").option("url", url).option("queue", "In")
            .option("claimTimeout", 0).load().writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "second")).start()))
        assert "queue 'In' is read by another stream" in message, message
        with pytest.raises(sbroker.BrokerError, match="read by a Spark stream"), \
                sbroker.Broker.open(url) as b, b.transaction() as tx:
            tx.receive("In")
    finally:
        first.stop()


def test_batch_write_sends_and_batch_read_only_looks(spark: SparkSession,
                                                    tmp_path: Path) -> None:
    register(spark)
    url = str(tmp_path / "broker.db")
    make_database(url)
    rows = spark.createDataFrame([("a", "1"), ("b", "2"), ("a", "3")],
                                 "conversation_key string, message_body string")
    (rows.write.format("sbroker").mode("append").option("url", url)
     .option("from_service", "Src").option("to_service", "Out").save())
    snapshot = spark.read.format("sbroker").option("url", url).option("queue", "Out").load()
    assert snapshot.columns == ["conversation_handle", "conversation_group_id",
                                "message_sequence_number", "message_type_name", "service_name",
                                "message_body", "enqueue_time", "priority"]
    got = {(r.message_body.decode(), r.message_sequence_number) for r in snapshot.collect()}
    assert got == {("1", 0), ("2", 0), ("3", 1)}
    assert snapshot.count() == 3  # read again: still there


def test_a_stream_on_a_postgresql_broker_sends_every_message_once(
        spark: SparkSession, tmp_path: Path, postgres: RunServer) -> None:
    """Source and sink on a PostgreSQL database, the producer sending while the query runs,
    the query stopped and run again from its checkpoint. The database is not dropped after:
    Spark's reused Python workers keep their brokers on it (the server goes at the end of
    the run)."""
    register(spark)
    url, checkpoint = postgres.new_database(), str(tmp_path / "checkpoint")
    make_database(url)
    messages = 1_000
    producer = threading.Thread(target=_produce, args=(url, messages))
    producer.start()
    try:
        query = pass_through(spark, url, checkpoint, per_batch=300)
        try:
            _until("300 messages", lambda: out_count(url) >= 300)
        finally:
            query.stop()
    finally:
        producer.join()
    query = pass_through(spark, url, checkpoint, per_batch=300)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    _assert_exactly_once_in_order(url, messages)
    _assert_all_received(url, messages)
    snapshot = spark.read.format("sbroker").option("url", url).option("queue", "Out").load()
    assert snapshot.count() == messages  # a batch read sees what no stream numbered
