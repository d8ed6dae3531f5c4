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


def _running(spark: SparkSession, log_id: int) -> set[int]:
    """The task's Spark jobs running now (its job group is its log id). Log ids start
    again at 1 in every test's database, so a group also holds earlier tests' jobs: the
    tests follow the jobs they saw running."""
    tracker = spark.sparkContext.statusTracker()
    return {j for j in tracker.getJobIdsForGroup(str(log_id))
            if (info := tracker.getJobInfo(j)) is not None and info.status == "RUNNING"}


def _failed(spark: SparkSession, jobs: set[int]) -> bool:
    tracker = spark.sparkContext.statusTracker()
    return all((info := tracker.getJobInfo(j)) is not None and info.status == "FAILED"
               for j in jobs)


def test_a_cancelled_python_task_has_its_running_job_cancelled(
        spark: SparkSession, broker: sbroker.Broker) -> None:
    with broker.scheduler() as s:
        log_id = s.exec_async(PythonTask("spark_task_helpers:long_job_then_block"))
        jobs: set[int] = set()
        poll_until(lambda: jobs.update(_running(spark, log_id)) or jobs)
        s.cancel(log_id)
        result = s.synchronize(timeout=60)
    assert result.status == "cancelled"
    poll_until(lambda: _failed(spark, jobs))


def test_a_spark_sql_task_past_its_timeout_is_failed_and_its_job_cancelled(
        spark: SparkSession, broker: sbroker.Broker) -> None:
    with broker.scheduler() as s:
        log_id = s.exec_async(SparkSQL(helpers.LONG_QUERY), timeout=3)
        jobs: set[int] = set()
        poll_until(lambda: jobs.update(_running(spark, log_id)) or jobs)
        result = s.synchronize(timeout=60)
    assert result.status == "failed"
    assert (result.error or "").startswith("timed out after 3 s")
    poll_until(lambda: _failed(spark, jobs))
