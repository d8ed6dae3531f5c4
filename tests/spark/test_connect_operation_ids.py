"""Under Spark Connect a task's ExecutionLog.SparkJobIds names the Connect operations it ran
(Connect exposes no job ids to its clients): checked on a fake Connect session, no server."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import sbroker
from sbroker.apps.scheduler import serve
from sbroker.apps.scheduler.executor import executor_state
from sbroker.apps.spark import SparkConfig, SparkRunner, SparkSQL, StubRunner, execute


class FakeConnectSession:
    """Reports each operation to the progress handler, as PySpark's client does when an
    ExecutePlan request ends (``Progress.finish``)."""

    __module__ = "pyspark.sql.connect.session"  # what SparkRunner recognises as Connect

    def __init__(self) -> None:
        self.handlers: list[Any] = []
        self.operations = 0

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def addTag(self, tag: str) -> None:
        pass

    def removeTag(self, tag: str) -> None:
        pass

    def sql(self, text: str, *args: Any) -> Any:
        self.operations += 1
        for handler in self.handlers:
            handler(stages=[], inflight_tasks=0, operation_id=f"op-{self.operations}",
                    done=True)
        return self

    columns: ClassVar[list[str]] = ["x"]

    def take(self, n: int) -> list[tuple[int]]:
        return [(1,)]


def test_a_connect_task_records_its_operation_ids() -> None:
    session = FakeConnectSession()
    runner = SparkRunner(SparkConfig(remote="sc://fake:1"), session_factory=lambda c: session)
    execution = execute(runner, SparkSQL("SELECT 1"), log_id=3)
    assert execution.status == "succeeded"
    assert execution.spark_job_ids == [] and execution.operation_ids == ["op-1"]


def test_execution_log_names_connect_operation_ids_as_such(tmp_path: Any) -> None:
    runner = StubRunner()
    runner.on("SELECT 1", operation_ids=["0d6f-op"])
    runner.on("SELECT 2", spark_job_ids=[4, 5])
    with sbroker.Broker.open(tmp_path / "ops.db") as b:
        b.install_executor(runner=runner)
        with b.scheduler() as s:
            s.exec_async("SELECT 1")
            s.exec_async("SELECT 2")
            serve(b, executor_state(b), "w", wait=0)
            s.wait_all(timeout=30)
        ids = [json.loads(r["SparkJobIds"]) for r in b.view("ExecutionLog")]
    assert ids == [{"connect_operation_ids": ["0d6f-op"]}, [4, 5]]
