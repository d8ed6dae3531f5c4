"""A stopped attempt's Spark jobs are cancelled by its job tag, on the shared session
(docs/scheduler.md, "Timeouts and cancels")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import spark_task_helpers as helpers
from support.helpers import poll_until

import sbroker
from sbroker.apps.spark import PythonTask, SparkRunner, SparkSQL

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture
def broker(spark: SparkSession, tmp_path: Path) -> Iterator[sbroker.Broker]:
    with sbroker.Broker.open(tmp_path / "spark.db") as b:
        b.install_executor(max_queue_readers=2, runner=SparkRunner(session=spark))
        b.start()
        yield b
    helpers.released.set()


def _jobs(spark: SparkSession, log_id: int) -> list[str]:
    """The statuses of the task's Spark jobs (its job group is its log id)."""
    tracker = spark.sparkContext.statusTracker()
    return [tracker.getJobInfo(j).status  # type: ignore[union-attr]
            for j in tracker.getJobIdsForGroup(str(log_id))]


def test_a_cancelled_python_task_has_its_running_job_cancelled(
        spark: SparkSession, broker: sbroker.Broker) -> None:
    with broker.scheduler() as s:
        log_id = s.exec_async(PythonTask("spark_task_helpers:long_job_then_block"))
        poll_until(lambda: "RUNNING" in _jobs(spark, log_id))
        s.cancel(log_id)
        result = s.synchronize(timeout=60)
    assert result.status == "cancelled"
    poll_until(lambda: _jobs(spark, log_id) and set(_jobs(spark, log_id)) == {"FAILED"})


def test_a_spark_sql_task_past_its_timeout_is_failed_and_its_job_cancelled(
        spark: SparkSession, broker: sbroker.Broker) -> None:
    with broker.scheduler() as s:
        log_id = s.exec_async(SparkSQL(helpers.LONG_QUERY), timeout=3)
        result = s.synchronize(timeout=60)
    assert result.status == "failed"
    assert (result.error or "").startswith("timed out after 3 s")
    poll_until(lambda: _jobs(spark, log_id) and set(_jobs(spark, log_id)) == {"FAILED"})
