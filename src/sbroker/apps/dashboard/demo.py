"""A broker database with something on every page of the dashboard: queues with messages, a
queue disabled by poison, parked messages, and pipeline runs (one failed) on a StubRunner.
The screenshots, the browser tests and the page-time bench start from it."""

from __future__ import annotations

import time
from typing import Any, Protocol

from sbroker.apps import poison
from sbroker.apps.pipeline.model import Pipeline, Stage, TaskSpec
from sbroker.apps.pipeline.runner import start_run
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.spark.stub import StubRunner
from sbroker.apps.spark.tasks import PythonTask, SparkSQL
from sbroker.core.messages import Message
from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Transaction

__all__ = [
    "FAILING_SQL",
    "DemoBroker",
    "fill",
    "park_messages",
    "poison_queue",
    "remote",
    "run_demo_pipeline",
    "talk",
    "work",
]
FAILING_SQL = "SELECT * FROM missing_table"


class DemoBroker(BrokerAPI, Protocol):
    """What the demo uses beyond the applications' facade: a route, the executor, starting
    and stopping (``sbroker.Broker`` has them all)."""

    def create_route(self, name: str, service_name: str | None = None,
                     address: str = "LOCAL", broker_instance: str | None = None,
                     lifetime: float | None = None, *, exist_ok: bool = False) -> None: ...

    def install_executor(self, *, max_queue_readers: int = 4, spark: Any = None,
                         runner: Any = None) -> None: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...



def work(spark: Any, seconds: float = 0.0) -> dict[str, float]:
    """A demo task: takes ``seconds`` (no Spark)."""
    time.sleep(seconds)
    return {"seconds": seconds}


def talk(broker: BrokerAPI, *, conversations: int = 5, messages: int = 3,
         queue: str = "Orders") -> None:
    """Shop -> Warehouse dialogs whose messages wait in ``queue``."""
    if queue not in broker.catalog.queues:
        broker.create_queue(queue)
        broker.create_queue(f"{queue}Replies")
        broker.create_service(f"{queue}Shop", f"{queue}Replies")
        broker.create_service(f"{queue}Warehouse", queue, ["DEFAULT"])
    for i in range(conversations):
        with broker.transaction() as tx:
            handle = tx.begin_dialog(f"{queue}Shop", f"{queue}Warehouse")
            for j in range(messages):
                tx.send(handle, body=f'{{"order": {i}, "line": {j}}}')


def remote(broker: DemoBroker, messages: int = 4) -> None:
    """Messages waiting in the transmission queue for a service of another broker."""
    talk(broker, conversations=0)
    broker.create_route("ToRemoteWarehouse", service_name="RemoteWarehouse",
                        address="tcp://127.0.0.1:9")
    with broker.transaction() as tx:
        handle = tx.begin_dialog("OrdersShop", "RemoteWarehouse")
        for i in range(messages):
            tx.send(handle, body=f'{{"order": {i}}}')


def poison_queue(broker: BrokerAPI, queue: str = "Payments") -> None:
    """A queue disabled by poison-message detection: five rolled-back receives."""
    talk(broker, conversations=1, messages=1, queue=queue)
    for _ in range(5):
        tx = broker.transaction()
        tx.receive(queue)
        tx.rollback()


def park_messages(broker: BrokerAPI, count: int = 3, queue: str = "Invoices") -> None:
    """Messages a failing procedure parked (sbroker.poison, policy park with a long delay)."""
    talk(broker, conversations=count, messages=1, queue=queue)
    guard = poison.PoisonGuard(broker, queue, threshold=0, policy=poison.Policy.park(3600))

    def fail(tx: Transaction, msg: Message) -> None:
        raise ValueError(f"cannot bill {msg.text()}")

    while guard.process_one(fail):
        pass


def demo_pipeline(seconds: float = 0.0, *, fail: bool = False) -> Pipeline:
    """Three stages: extract (two tasks), aggregate (three), report (one; SQL that fails)."""
    target = "sbroker.apps.dashboard.demo:work"

    def task(name: str, scale: float) -> TaskSpec:
        return TaskSpec(name, PythonTask(target, seconds=seconds * scale))

    return Pipeline("orders", (
        Stage("extract", (task("orders", 1.0), task("customers", 0.6))),
        Stage("aggregate", (task("by_month", 0.8), task("by_product", 1.2),
                            task("by_customer", 0.5))),
        Stage("report", (TaskSpec("monthly_report", SparkSQL(FAILING_SQL if fail
                                                              else "SELECT 1")),)),
    ))


def run_demo_pipeline(broker: DemoBroker, runner: StubRunner, *, seconds: float = 0.0,
                      fail: bool = False) -> RunState:
    """Run the demo pipeline as a durable run; the broker must be started with the executor
    installed on ``runner``."""
    runner.on(FAILING_SQL, error=RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] missing_table"))
    return start_run(broker, demo_pipeline(seconds, fail=fail))


def fill(broker: DemoBroker, *, seconds: float = 0.0) -> StubRunner:
    """Everything at once (the broker is started and stopped here); returns the runner."""
    runner = StubRunner()
    broker.install_executor(max_queue_readers=4, runner=runner)
    talk(broker, conversations=12, messages=3)
    remote(broker)
    poison_queue(broker)
    park_messages(broker)
    broker.start()
    try:
        run_demo_pipeline(broker, runner, seconds=seconds)
        run_demo_pipeline(broker, runner, seconds=seconds, fail=True)
    finally:
        broker.stop()
    return runner
