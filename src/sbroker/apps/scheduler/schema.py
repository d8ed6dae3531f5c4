"""What ``install_executor`` creates, as seed 002 creates it by hand (docs/scheduler.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sbroker.apps.scheduler.queries import read, sql
from sbroker.core.catalog import Activation
from sbroker.engine.api import BrokerAPI

if TYPE_CHECKING:
    from sbroker.apps.spark import Runner, SparkConfig

ASYNC_SENT = "AsyncSent"
ASYNC_DONE = "AsyncDone"
CONTRACT = "AsyncContract"
INITIATOR_QUEUE = "QueueAsyncInitiator"
TARGET_QUEUE = "QueueAsyncTarget"
INITIATOR_SERVICE = "ServiceAsyncInitiator"
TARGET_SERVICE = "ServiceAsyncTarget"
PROCEDURE = "sbroker.apps.scheduler.executor:executor_procedure"


def install(broker: BrokerAPI, *, max_queue_readers: int, spark: SparkConfig | None,
            runner: Runner | None = None) -> None:
    """Create (idempotently) message types, contract, queues and services (the tables and
    the view come with the database: migration 0005), and store the Spark settings."""
    cat = broker.catalog
    for mtype in (ASYNC_SENT, ASYNC_DONE):
        if mtype not in cat.message_types:
            broker.create_message_type(mtype, "well_formed_json")
    if CONTRACT not in cat.contracts:
        broker.create_contract(CONTRACT, {ASYNC_SENT: "initiator", ASYNC_DONE: "target"})
    activation = Activation(PROCEDURE, max_queue_readers=max_queue_readers)
    # Poison handling off here too: a pipeline run's driver that lost its lease rolls back
    # the receive of its AsyncDone messages (another driver records them), which is no poison.
    if INITIATOR_QUEUE not in cat.queues:
        broker.create_queue(INITIATOR_QUEUE, poison_message_handling=False)
    elif cat.queues[INITIATOR_QUEUE].poison_message_handling:
        broker.alter_queue(INITIATOR_QUEUE, poison_message_handling=False)
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
        tx.execute(sql(broker).save_setting, ("spark", json.dumps(_spark_dict(spark))))
    if runner is not None:
        broker.use_executor_runner(runner)


def _spark_dict(spark: SparkConfig | None) -> dict[str, object] | None:
    if spark is None:
        return None
    return spark.to_dict()


def load_spark_config(broker: BrokerAPI) -> SparkConfig:
    """The SparkConfig stored by ``install_executor`` (local mode when none was given)."""
    from sbroker.apps.spark import DEFAULT_CONNECT_TIMEOUT, SparkConfig

    rows = read(broker, sql(broker).setting, ("spark",))
    stored = json.loads(rows[0][0]) if rows else None
    if not stored:
        return SparkConfig()
    return SparkConfig(master=stored["master"], remote=stored["remote"], conf=stored["conf"],
                       app_name=stored["app_name"],
                       connect_timeout=stored.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
                       log_file=stored.get("log_file"))
