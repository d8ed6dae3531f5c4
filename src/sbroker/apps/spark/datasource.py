"""The PySpark data source ``sbroker``: broker queues as a Spark Structured Streaming source
and sink, and their batch twins. The engine side (positions, claims, ranges, batched sends) is
:mod:`sbroker.engine.streams`; docs/stream.md tells the design.

What runs where (the Python data source API of PySpark 4.2 and later):

- ``schema()`` and the writers' constructors run in short-lived Python workers on the driver
  when Spark plans: they check the options, so a bad one fails the query with one line.
- The source's ``initialOffset`` / ``prepareForTriggerAvailableNow`` / ``latestOffset`` /
  ``partitions`` / ``commit`` run in one long-lived Python process per query run on the
  driver; that process claims the queue (:class:`~sbroker.engine.streams.StreamSource`) and
  Spark kills it when the query stops, which frees the claim (its broker session is then
  dead, and reaped).
- Batches are Spark's to size: ``getDefaultReadLimit`` is ``ReadMaxRows(maxMessagesPerBatch)``
  and ``latestOffset(start, limit)`` honours the limit Spark passes (``ReadAllAvailable`` for
  Trigger.Once). Trigger.AvailableNow fixes the run's last position first.
- ``read(partition)`` runs in executor workers on an unpickled copy of the reader: it only
  looks (a range of positions), so Spark may run it again after a failure. Messages are
  received once Spark has committed the batch that read them: in ``latestOffset(start, ...)``,
  which Spark calls only after writing the commit log of the batch that ended at ``start``
  (a batch that fails ends the query and its process), or in ``commit(end)``, which Spark
  calls one batch later.
- The sink's ``write()`` runs on executors and only collects rows (as Arrow); ``commit`` runs
  on the driver once every task succeeded and sends the whole micro-batch in one broker
  transaction that also records (query id, batch id): a replayed batch sends nothing.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark import __version__ as pyspark_version
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from sbroker.apps.spark.stream_options import (
    NAME,
    SinkOptions,
    SourceOptions,
    broker_for,
    one_line,
)
from sbroker.core.errors import InvalidArgumentError
from sbroker.engine import streams

NEEDS = (f"the sbroker data source needs PySpark 4.2 or later where Spark runs it (read limits "
         f"and Trigger.AvailableNow); this Python has PySpark {pyspark_version}")


@one_line
def _too_old(error: ImportError) -> NoReturn:
    raise InvalidArgumentError(NEEDS) from error


try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError as missing:  # PySpark 4.0 or 4.1 (a cluster's, a Connect server's)
    _too_old(missing)

SCHEMA = (
    "conversation_handle string, conversation_group_id string, message_sequence_number long,"
    " message_type_name string, service_name string, message_body binary,"
    " enqueue_time timestamp, priority int"
)
ARROW_SCHEMA = pa.schema([
    ("conversation_handle", pa.string()), ("conversation_group_id", pa.string()),
    ("message_sequence_number", pa.int64()), ("message_type_name", pa.string()),
    ("service_name", pa.string()), ("message_body", pa.binary()),
    ("enqueue_time", pa.timestamp("us", tz="UTC")), ("priority", pa.int32()),
])
ARROW_ROWS = 10_000  # rows per Arrow batch handed to Spark
BODY = "message_body"
KEY = "conversation_key"
QUERY_ID = "sql.streaming.queryId"  # a local property of every task of a streaming query


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Python's cyclic garbage collector off while a batch's rows are built: a batch makes
    hundreds of thousands of tuples, each allocation counts toward a collection, and the
    collections (which find nothing: rows hold no cycles) took most of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def to_arrow(rows: Sequence[tuple[Any, ...]]) -> list[pa.RecordBatch]:
    """Stream rows (see streams.read_range) as Arrow batches of the source's schema."""
    out = []
    for start in range(0, len(rows), ARROW_ROWS):
        handle, group, msn, mtype, service, body, at, priority, _ = zip(
            *rows[start:start + ARROW_ROWS], strict=True)
        micros = pc.round(pc.multiply(pa.array(at, pa.float64()), 1_000_000))
        out.append(pa.RecordBatch.from_arrays([
            pa.array(handle, pa.string()), pa.array(group, pa.string()),
            pa.array(msn, pa.int64()), pa.array(mtype, pa.string()),
            pa.array(service, pa.string()), pa.array(body, pa.binary()),
            micros.cast(pa.int64()).cast(ARROW_SCHEMA.field("enqueue_time").type),
            pa.array(priority, pa.int32()),
        ], schema=ARROW_SCHEMA))
    return out


def rows_of(limit: ReadLimit) -> int | None:
    """The most messages a batch may hold under Spark's read limit (None: all there are)."""
    if isinstance(limit, ReadMaxRows):
        return int(limit.max_rows)
    if isinstance(limit, ReadAllAvailable):
        return None
    raise InvalidArgumentError(
        f"the sbroker source takes the read limits ReadMaxRows and ReadAllAvailable, not "
        f"{type(limit).__name__}")


class PositionRange(InputPartition):
    """The ready messages of one queue with a position in (after, through] (``snapshot``:
    a batch read's, by queuing order rather than by stream position)."""

    def __init__(self, queue_id: int, after: int, through: int, snapshot: bool = False
                 ) -> None:
        super().__init__((queue_id, after, through, snapshot))
        self.queue_id, self.after, self.through = queue_id, after, through
        self.snapshot = snapshot


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The partition's rows, read now (errors surface here, not while Spark iterates)."""
    assert isinstance(partition, PositionRange), partition
    with bulk():
        rows = streams.read_range(broker_for(options.url), partition.queue_id,
                                  partition.after, partition.through,
                                  snapshot=partition.snapshot)
        return iter(to_arrow(rows))


def _ranges(options: SourceOptions, queue_id: int, found: list[int], after: int,
            through: int, *, snapshot: bool = False) -> list[PositionRange]:
    """(after, through] in partitions of at most ``options.per_partition`` messages."""
    if not found:
        return []
    return [PositionRange(queue_id, lo, hi, snapshot)
            for lo, hi in streams.split(found, after, through, options.per_partition)]


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A queue as a stream: micro-batches are ranges of positions, sized by Spark's read
    limit (``maxMessagesPerBatch`` by default)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._source: streams.StreamSource | None = None
        self._until = streams.LAST_POSITION  # Trigger.AvailableNow: the end of this run

    def __getstate__(self) -> dict[str, Any]:  # executors open their own broker
        return {"options": self.options, "_source": None, "_until": streams.LAST_POSITION}

    def _held(self) -> streams.StreamSource:
        """The claimed queue (driver side: claimed on first use)."""
        if self._source is None:
            source = streams.StreamSource(broker_for(self.options.url), self.options.queue)
            source.claim(wait=self.options.claim_wait)
            self._source = source
        return self._source

    @one_line
    def initialOffset(self) -> dict[str, Any]:
        return self.options.offset(self._held().committed)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_messages)

    @one_line
    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._held().horizon()

    @one_line
    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, Any]:
        if start is None or limit is None:
            raise InvalidArgumentError(NEEDS)
        source = self._held()
        after = self.options.position(start)
        if after > source.planned:
            raise InvalidArgumentError(
                f"the checkpoint is at position {after} of queue {self.options.queue!r}, past "
                f"any this database handed out ({source.planned}): give this query a "
                "checkpoint of its own")
        # Spark asks for the next batch only once the batch that ended at ``start`` is in its
        # commit log: receive it now (Spark's own commit() comes one batch later, or never).
        source.commit(after)
        return self.options.offset(
            source.latest(rows_of(limit), after=after, through=self._until))

    @one_line
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[PositionRange]:
        source = self._held()
        after, through = self.options.position(start), self.options.position(end)
        return _ranges(self.options, source.queue.queue_id, source.positions(after, through),
                       after, through)

    @one_line
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    @one_line
    def commit(self, end: dict[str, Any]) -> None:
        self._held().commit(self.options.position(end))

    def stop(self) -> None:
        if self._source is not None:
            source, self._source = self._source, None
            source.release()


class QueueSnapshotReader(DataSourceReader):
    """A batch read: the ready messages of a queue as they are now, received by nobody."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    @one_line
    def partitions(self) -> list[PositionRange]:
        broker = broker_for(self.options.url)
        queue = streams.queue_info(broker, self.options.queue)
        found = streams.positions(broker, queue.queue_id, 0, snapshot=True)
        return _ranges(self.options, queue.queue_id, found, 0, found[-1] if found else 0,
                       snapshot=True)

    @one_line
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


# -- the sink ---------------------------------------------------------------------------------
class Collected(WriterCommitMessage):
    """What one task collected: its rows' keys and bodies (an Arrow table), and the query."""

    def __init__(self, table: pa.Table, query_id: str | None) -> None:
        self.table = table
        self.query_id = query_id


def _key_text(value: Any) -> str:
    """A conversation_key as stored: None, a string and any other value never collide."""
    if value is None:
        return ""
    if isinstance(value, str):
        return "s:" + value
    return "j:" + json.dumps(value, default=str, sort_keys=True)


def check_sink_schema(schema: StructType) -> None:
    """The rows a sink takes: ``message_body`` (string or binary), ``conversation_key``
    optional, any other column ignored."""
    fields = {f.name: f.dataType for f in schema.fields}
    body = fields.get(BODY)
    if body is None:
        raise InvalidArgumentError(
            "the sbroker sink needs a column 'message_body' (string or binary): each row "
            f"becomes one message; the columns are {', '.join(fields) or 'none'}")
    if not isinstance(body, (StringType, BinaryType)):
        raise InvalidArgumentError(
            f"column 'message_body' must be string or binary, not {body.simpleString()}:"
            " cast it")


class _SinkWriter:
    """Collects rows on executors; sends them from the driver (see send)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.has_key = KEY in schema.fieldNames()

    @one_line
    def write(self, iterator: Iterator[Any]) -> Collected:
        with bulk():
            return self._collect(iterator)

    def _collect(self, iterator: Iterator[Any]) -> Collected:
        columns = [BODY, KEY] if self.has_key else [BODY]
        tables = []
        rows: list[tuple[Any, ...]] = []
        for item in iterator:
            if isinstance(item, pa.RecordBatch):
                tables.append(pa.Table.from_batches([item]).select(columns))
            else:  # a Row (a writer not given Arrow)
                rows.append(tuple(item[c] for c in columns))
        if rows:
            tables.append(pa.Table.from_pylist([dict(zip(columns, r, strict=True))
                                                for r in rows]))
        table = pa.concat_tables(tables) if tables else pa.table({BODY: pa.array([], pa.binary())})
        if table.num_rows and table.column(BODY).null_count:
            raise InvalidArgumentError(
                "a row has a null message_body: a message needs a body (use '' for an empty "
                "one)")
        context = TaskContext.get()
        return Collected(table, context.getLocalProperty(QUERY_ID) if context else None)

    def send(self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None) -> int:
        """Every task's rows, in partition order, in one broker transaction."""
        with bulk():
            return self._send(messages, batch_id)

    def _send(self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None) -> int:
        keys: list[str] = []
        bodies: list[Any] = []
        query_ids = set()
        for message in messages:
            if not isinstance(message, Collected) or not message.table.num_rows:
                continue
            query_ids.add(message.query_id)
            found = message.table.column(BODY).to_pylist()
            bodies += found
            if KEY in message.table.column_names:
                keys += [_key_text(k) for k in message.table.column(KEY).to_pylist()]
            else:
                keys += [""] * len(found)
        query_id = None
        if batch_id is not None:
            query_id = next(iter(query_ids), None) if len(query_ids) == 1 else None
            if bodies and query_id is None:
                raise InvalidArgumentError(
                    "the sbroker sink could not tell which streaming query wrote this batch "
                    f"(tasks said {sorted(map(str, query_ids))})")
        broker = broker_for(self.options.url)
        return streams.send_rows(broker, self.options.target, keys, bodies,
                                 query_id=query_id, batch_id=batch_id)


class QueueStreamWriter(_SinkWriter, DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[misc]
    """The streaming sink. (Also an Arrow writer: PySpark 4.0 then hands ``write`` Arrow
    batches instead of one Row object per row; its batch ``commit`` is never called.)"""

    @one_line
    def commit(  # type: ignore[override]
            self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.send(messages, batchId)


class QueueBatchWriter(_SinkWriter, DataSourceArrowWriter):
    """``df.write.format("sbroker")``: the whole DataFrame in one broker transaction."""

    @one_line
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.send(messages, None)


class BrokerDataSource(DataSource):
    """``format("sbroker")``: see the module docstring and docs/stream.md."""

    @classmethod
    def name(cls) -> str:
        return NAME

    @one_line
    def schema(self) -> str:
        options = SourceOptions.parse(self.options)
        streams.queue_info(broker_for(options.url), options.queue)
        return SCHEMA

    def _source(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    @one_line
    def streamReader(self, schema: StructType) -> QueueStreamReader:
        return QueueStreamReader(self._source())

    @one_line
    def reader(self, schema: StructType) -> QueueSnapshotReader:
        return QueueSnapshotReader(self._source())

    def _sink(self, schema: StructType) -> SinkOptions:
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema)
        streams.check_target(broker_for(options.url), options.target)
        return options

    @one_line
    def streamWriter(self, schema: StructType, overwrite: bool) -> QueueStreamWriter:
        return QueueStreamWriter(self._sink(schema), schema)

    @one_line
    def writer(self, schema: StructType, overwrite: bool) -> QueueBatchWriter:
        if overwrite:
            raise InvalidArgumentError(
                "a queue cannot be overwritten: write to sbroker with mode('append')")
        return QueueBatchWriter(self._sink(schema), schema)
