"""The ``sbroker`` data source's classes called directly, the way Spark's Python workers call
them, without a JVM: options, offsets, partitions, reads, commits, and the sink's dedupe."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)
from stream_helpers import make_database

import sbroker
from sbroker.apps.spark import datasource as ds
from sbroker.apps.spark.stream_options import SinkOptions, SourceOptions, close_brokers, one_line
from sbroker.engine.streams import QueueStreamedError


def _schema(**columns: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


SINK_SCHEMA = _schema(conversation_key=StringType(), message_body=BinaryType(),
                      extra=IntegerType())


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    """A database with a stream queue In (fed by Src) and a sink queue Out."""
    url = str(tmp_path / "broker.db")
    make_database(url)
    yield url
    close_brokers()  # the brokers the classes opened in this process


def _fill(url: str, n: int, conversations: int = 2) -> None:
    with sbroker.Broker.open(url) as b, b.transaction() as tx:
        handles = [tx.begin_dialog("Src", "In") for _ in range(conversations)]
        for i in range(n):
            tx.send(handles[i % conversations], "DEFAULT", f"m{i}")


def _source(url: str, **extra: str) -> ds.BrokerDataSource:
    return ds.BrokerDataSource({"url": url, "queue": "In", **extra})


def _bodies(batches: Iterator[pa.RecordBatch]) -> list[bytes]:
    return [b for batch in batches for b in batch.column("message_body").to_pylist()]


def _peek(url: str, queue: str) -> list[sbroker.Message]:
    with sbroker.Broker.open(url) as b:
        return b.peek(queue)


# -- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "error"), [
    ({"queue": "In"}, "needs option 'url'"),
    ({"url": "x.db"}, "needs option 'queue'"),
    ({"url": "x.db", "queue": "In", "maxMessagesPerBatch": "0"}, "'maxMessagesPerBatch' must"),
    ({"url": "x.db", "queue": "In", "maxMessagesPerBach": "5"}, "unknown option 'maxmessag"),
    ({"url": "x.db", "queue": "In", "claimTimeout": "soon"}, "'claimTimeout' is seconds"),
])
def test_bad_source_options_say_what_to_fix(options: dict[str, str], error: str) -> None:
    with pytest.raises(sbroker.InvalidArgumentError, match=error):
        SourceOptions.parse(options)


def test_options_are_case_insensitive_and_the_sink_has_defaults() -> None:
    parsed = SourceOptions.parse({"URL": "x.db", "Queue": "In", "MAXMESSAGESPERBATCH": "7"})
    assert (parsed.url, parsed.queue, parsed.max_messages) == ("x.db", "In", 7)
    sink = SinkOptions.parse({"url": "x.db", "from_service": "A", "to_service": "B",
                              "checkpointLocation": "/tmp/ck"})
    assert (sink.target.contract, sink.target.message_type) == ("DEFAULT", "DEFAULT")


def test_an_unknown_queue_fails_when_the_stream_is_defined(db: str) -> None:
    assert "message_body binary" in _source(db).schema()
    with pytest.raises(sbroker.NotFoundError, match="queue 'Nope' does not exist"):
        ds.BrokerDataSource({"url": db, "queue": "Nope"}).schema()


def test_one_line_hides_the_worker_traceback_of_sbroker_errors_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "x")  # as in a Spark Python worker
    monkeypatch.delenv("SPARK_HIDE_TRACEBACK", raising=False)
    with pytest.raises(ZeroDivisionError):
        one_line(lambda: 1 / 0)()
    assert "SPARK_HIDE_TRACEBACK" not in os.environ  # a bug keeps its traceback
    with pytest.raises(sbroker.NotFoundError):
        one_line(lambda: sbroker.Broker.open(":memory:").catalog.queue("Q"))()
    assert os.environ["SPARK_HIDE_TRACEBACK"] == "1"


# -- the source -------------------------------------------------------------------------------
def _end(driver: ds.QueueStreamReader, start: dict[str, object],
         limit: ReadLimit | None = None) -> dict[str, object]:
    """latestOffset as Spark calls it: from ``start``, under the default read limit."""
    return driver.latestOffset(start, limit or driver.getDefaultReadLimit())


def test_a_stream_reads_plans_replays_and_receives(db: str) -> None:
    _fill(db, 5)
    source = _source(db, maxMessagesPerBatch="3", messagesPerPartition="2")
    driver = source.streamReader(StructType())
    assert driver.getDefaultReadLimit() == ReadMaxRows(3)
    start = driver.initialOffset()
    assert start == {"queue": "In", "queuing_order": 0}
    end = _end(driver, start)
    parts = driver.partitions(start, end)
    assert len(parts) == 2  # 3 messages, at most 2 per partition
    executor = pickle.loads(pickle.dumps(source.streamReader(StructType())))  # as Spark ships it
    first = [_bodies(executor.read(p)) for p in parts]
    assert first == [[b"m0", b"m1"], [b"m2"]]
    assert [_bodies(executor.read(p)) for p in parts] == first  # a replay reads the same
    batch = next(executor.read(parts[0]))
    assert batch.schema == ds.ARROW_SCHEMA and batch.column("priority").to_pylist() == [5, 5]
    assert len(_peek(db, "In")) == 5  # read twice, received by nobody yet
    following = _end(driver, end)  # Spark committed the batch that ended there: received now
    assert [m.text() for m in _peek(db, "In")] == ["m3", "m4"]
    driver.commit(end)  # what Spark calls when it plans the next batch: nothing left to do
    assert _bodies(executor.read(driver.partitions(end, following)[0])) == [b"m3", b"m4"]
    assert _end(driver, following) == following  # caught up
    assert _peek(db, "In") == []
    driver.stop()


def _positions(offsets: list[dict[str, object]]) -> list[object]:
    return [o["queuing_order"] for o in offsets]


def test_the_read_limit_is_sparks_to_give(db: str) -> None:
    """ReadMaxRows caps a batch whatever the option says; ReadAllAvailable (Trigger.Once)
    takes everything; a limit the source cannot honour is refused with one line."""
    _fill(db, 7)
    driver = _source(db, maxMessagesPerBatch="3").streamReader(StructType())
    start = driver.initialOffset()
    two = _end(driver, start, ReadMaxRows(2))
    assert [len(_bodies(_read_all(driver, start, two)))] == [2]
    everything = _end(driver, two, ReadAllAvailable())
    assert _bodies(_read_all(driver, two, everything)) == [f"m{i}".encode() for i in range(2, 7)]
    with pytest.raises(sbroker.InvalidArgumentError, match="not ReadMinRows"):
        driver.latestOffset(everything, ReadMinRows(5))
    driver.stop()


def _read_all(driver: ds.QueueStreamReader, start: dict[str, object],
              end: dict[str, object]) -> Iterator[pa.RecordBatch]:
    for part in driver.partitions(start, end):
        yield from driver.read(part)


def _run_available_now(driver: ds.QueueStreamReader, start: dict[str, object]
                       ) -> tuple[list[int], dict[str, object]]:
    """What Spark does with Trigger.AvailableNow once it prepared the source: batches until
    the source has nothing more; each batch's size, and the last offset."""
    sizes = []
    while (end := _end(driver, start)) != start:
        sizes.append(len(_bodies(_read_all(driver, start, end))))
        start = end
    return sizes, start


def test_available_now_stops_at_what_was_there_when_the_run_started(db: str) -> None:
    _fill(db, 7)
    driver = _source(db, maxMessagesPerBatch="3").streamReader(StructType())
    start = driver.initialOffset()
    driver.prepareForTriggerAvailableNow()
    _fill(db, 4)  # sent after the run started: the next run's
    sizes, last = _run_available_now(driver, start)
    assert sizes == [3, 3, 1]
    # the run's seven received (the last by the ask that found nothing more); four wait
    assert len(_peek(db, "In")) == 4
    driver.stop()
    again = _source(db, maxMessagesPerBatch="3").streamReader(StructType())
    again.prepareForTriggerAvailableNow()
    assert _run_available_now(again, last)[0] == [3, 1]
    again.stop()
    assert _peek(db, "In") == []


def test_a_checkpoint_ahead_of_the_database_is_refused(db: str) -> None:
    driver = _source(db).streamReader(StructType())
    with pytest.raises(sbroker.InvalidArgumentError, match="checkpoint of its own"):
        _end(driver, {"queue": "In", "queuing_order": 99})
    driver.stop()


def test_a_spark_without_read_limits_is_refused_with_one_line(db: str) -> None:
    driver = _source(db).streamReader(StructType())
    with pytest.raises(sbroker.InvalidArgumentError,
                       match="needs PySpark 4.2 or later where Spark runs it"):
        driver.latestOffset()  # what PySpark 4.0 and 4.1 call
    driver.stop()


def test_a_second_stream_reader_is_refused_and_the_first_keeps_the_queue(db: str) -> None:
    first = _source(db).streamReader(StructType())
    first.initialOffset()
    second = _source(db, claimTimeout="0").streamReader(StructType())
    with pytest.raises(QueueStreamedError, match="read by another stream"):
        second.initialOffset()
    second.stop()
    with sbroker.Broker.open(db) as b:
        assert b.view("dm_broker_streams")[0]["pid"] == os.getpid()
    first.stop()
    with sbroker.Broker.open(db) as b:
        assert b.view("dm_broker_streams")[0]["pid"] is None


def test_an_offset_of_another_queue_is_refused(db: str) -> None:
    reader = _source(db).streamReader(StructType())
    with pytest.raises(sbroker.InvalidArgumentError, match="give this query a checkpoint"):
        reader.partitions({"queue": "Other", "queuing_order": 0},
                          {"queue": "Other", "queuing_order": 5})
    reader.stop()


def test_a_batch_read_is_a_snapshot_that_receives_nothing(db: str) -> None:
    _fill(db, 3)
    reader = _source(db).reader(StructType())
    assert [_bodies(reader.read(p)) for p in reader.partitions()] == [[b"m0", b"m1", b"m2"]]
    assert len(_peek(db, "In")) == 3


# -- the sink ---------------------------------------------------------------------------------
def _sink(url: str, schema: StructType = SINK_SCHEMA, **extra: str) -> ds.BrokerDataSource:
    return ds.BrokerDataSource({"url": url, "from_service": "Src", "to_service": "Out",
                                **extra})


def _arrow(keys: list[str | None], bodies: list[bytes]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"conversation_key": keys, "message_body": bodies,
                                      "extra": list(range(len(bodies)))})


@pytest.mark.parametrize(("schema", "error"), [
    (_schema(conversation_key=StringType(), body=BinaryType()),
     "needs a column 'message_body'"),
    (_schema(message_body=IntegerType()), "must be string or binary, not int"),
])
def test_a_sink_without_a_usable_message_body_is_refused(db: str, schema: StructType,
                                                         error: str) -> None:
    with pytest.raises(sbroker.InvalidArgumentError, match=error):
        _sink(db).streamWriter(schema, False)


def test_a_sink_to_an_unknown_service_is_refused(db: str) -> None:
    with pytest.raises(sbroker.NotFoundError, match="'Nowhere' does not exist"):
        ds.BrokerDataSource({"url": db, "from_service": "Src", "to_service": "Nowhere"}
                            ).streamWriter(SINK_SCHEMA, False)


def test_a_micro_batch_is_sent_once_in_order_per_key(db: str) -> None:
    writer = _sink(db).streamWriter(SINK_SCHEMA, False)
    parts = [writer.write(_arrow(["a", "b"], [b"1", b"2"])),
             writer.write(_arrow(["a", None], [b"3", b"4"]))]
    for part in parts:
        part.query_id = "query-1"  # what a task of a streaming query finds in its context
    committer = _sink(db).streamWriter(SINK_SCHEMA, False)  # Spark commits on a fresh writer
    committer.commit(pickle.loads(pickle.dumps(parts)), 0)
    committer.commit(parts, 0)  # the batch replayed after a failure: nothing more
    by_conversation: dict[str, list[bytes]] = {}
    for m in _peek(db, "Out"):
        by_conversation.setdefault(m.conversation_handle, []).append(m.message_body)
    assert sorted(by_conversation.values()) == [[b"1", b"3"], [b"2"], [b"4"]]


def test_a_batch_write_takes_rows_too_and_refuses_overwrite(db: str) -> None:
    schema = _schema(message_body=StringType())
    writer = _sink(db).writer(schema, False)
    message = writer.write(iter([Row(message_body="hello"), Row(message_body="world")]))
    writer.commit([message, None])
    assert [m.text() for m in _peek(db, "Out")] == ["hello", "world"]
    with pytest.raises(sbroker.InvalidArgumentError, match="mode\\('append'\\)"):
        _sink(db).writer(schema, True)


def test_a_null_message_body_fails_its_task(db: str) -> None:
    writer = _sink(db).streamWriter(SINK_SCHEMA, False)
    with pytest.raises(sbroker.InvalidArgumentError, match="null message_body"):
        writer.write(_arrow(["a"], [None]))  # type: ignore[list-item]
