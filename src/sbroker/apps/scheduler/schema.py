"""What ``install_executor`` creates, as the seed 002 creates it by hand (SPEC §8)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sbroker.engine.catalog import Activation

if TYPE_CHECKING:
    from sbroker.apps.spark import SparkConfig
    from sbroker.broker import Broker

ASYNC_SENT = "AsyncSent"
ASYNC_DONE = "AsyncDone"
CONTRACT = "AsyncContract"
INITIATOR_QUEUE = "QueueAsyncInitiator"
TARGET_QUEUE = "QueueAsyncTarget"
INITIATOR_SERVICE = "ServiceAsyncInitiator"
TARGET_SERVICE = "ServiceAsyncTarget"
PROCEDURE = "sbroker.apps.scheduler.executor:executor_procedure"

TABLES = (
    """CREATE TABLE IF NOT EXISTS ExecutionLog (
        LogID INTEGER PRIMARY KEY AUTOINCREMENT,
        CallerID TEXT NOT NULL,
        SchedulerHandle TEXT NOT NULL,
        Worker TEXT,
        WorkerSession INTEGER,
        Task TEXT NOT NULL,
        QueuedTime TEXT NOT NULL,
        StartTime TEXT,
        EndTime TEXT,
        Status TEXT NOT NULL DEFAULT 'queued',
        Error TEXT,
        ErrorDetails TEXT,
        SparkJobIds TEXT,
        Value TEXT,
        Pool TEXT,
        CancelRequested INTEGER NOT NULL DEFAULT 0,
        TargetHandle TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS Schedulers (
        SchedulerHandle TEXT PRIMARY KEY,
        ConversationId TEXT NOT NULL,
        Name TEXT NOT NULL,
        Priority INTEGER NOT NULL DEFAULT 5,
        CreatedTime TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS ExecutionLog_open ON ExecutionLog(Status)"
    " WHERE Status IN ('queued', 'running')",
    """CREATE VIEW IF NOT EXISTS ExecutionStatus AS
        SELECT Worker, LogID, CallerID, SchedulerHandle, Pool, StartTime, Task
        FROM ExecutionLog WHERE Status = 'running'""",
    "CREATE TABLE IF NOT EXISTS ExecutorSettings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


def install(broker: Broker, *, max_queue_readers: int, spark: SparkConfig | None) -> None:
    """Create (idempotently) message types, contract, queues, services, tables and view."""
    from sbroker.apps.scheduler.executor import executor_procedure

    cat = broker.catalog
    for mtype in (ASYNC_SENT, ASYNC_DONE):
        if mtype not in cat.message_types:
            broker.create_message_type(mtype, "well_formed_json")
    if CONTRACT not in cat.contracts:
        broker.create_contract(CONTRACT, {ASYNC_SENT: "initiator", ASYNC_DONE: "target"})
    activation = Activation(executor_procedure, max_queue_readers=max_queue_readers)
    if INITIATOR_QUEUE not in cat.queues:
        broker.create_queue(INITIATOR_QUEUE)
    if TARGET_QUEUE not in cat.queues:
        # Poison handling off: a failing task is recorded and reported, never disables the
        # executor's queue (the executor commits every receive it makes anyway).
        broker.create_queue(TARGET_QUEUE, activation=activation, poison_message_handling=False)
    else:
        broker.alter_queue(TARGET_QUEUE, activation=activation, poison_message_handling=False)
    if INITIATOR_SERVICE not in cat.services:
        broker.create_service(INITIATOR_SERVICE, INITIATOR_QUEUE)
    if TARGET_SERVICE not in cat.services:
        broker.create_service(TARGET_SERVICE, TARGET_QUEUE, [CONTRACT])
    with broker.transaction() as tx:
        for statement in TABLES:
            tx.execute(statement)
        upgrade(tx)
        tx.execute(
            "INSERT OR REPLACE INTO ExecutorSettings(key, value) VALUES ('spark', ?)",
            (json.dumps(_spark_dict(spark)),),
        )


#: Columns added to ExecutionLog after it was first created: (name, type).
ADDED_COLUMNS = (("ErrorDetails", "TEXT"),)


def upgrade(tx: Any) -> None:
    """Add the columns an ExecutionLog made by an earlier version lacks (in ``tx``)."""
    have = {row[1] for row in tx.execute("PRAGMA table_info(ExecutionLog)")}
    for name, kind in ADDED_COLUMNS:
        if have and name not in have:
            tx.execute(f"ALTER TABLE ExecutionLog ADD COLUMN {name} {kind}")


def _spark_dict(spark: SparkConfig | None) -> dict[str, object] | None:
    if spark is None:
        return None
    return spark.to_dict()


def load_spark_config(broker: Broker) -> SparkConfig:
    """The SparkConfig stored by ``install_executor`` (local mode when none was given)."""
    from sbroker.apps.spark import DEFAULT_CONNECT_TIMEOUT, SparkConfig

    rows = broker.view("ExecutorSettings")
    stored = next((json.loads(r["value"]) for r in rows if r["key"] == "spark"), None)
    if not stored:
        return SparkConfig()
    return SparkConfig(master=stored["master"], remote=stored["remote"], conf=stored["conf"],
                       app_name=stored["app_name"],
                       connect_timeout=stored.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
                       log_file=stored.get("log_file"))
