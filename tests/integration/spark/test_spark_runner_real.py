"""SparkRunner on a real local[2] session (one per test run, see conftest)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.helpers import poll_until

from sbroker.apps.spark import (
    PythonTask,
    SparkProgress,
    SparkRunner,
    SparkSQL,
    TaskCancelled,
    TaskError,
    execute,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

LONG_QUERY = "SELECT count(*) FROM range(0, 50000000000, 1, 2)"


@pytest.fixture
def runner(spark: SparkSession) -> SparkRunner:
    return SparkRunner(session=spark)  # close() leaves the shared session running


def test_sql_commands_and_queries_run_and_report_their_results(
        spark: SparkSession, runner: SparkRunner) -> None:
    from pyspark.testing import assertDataFrameEqual

    made = runner.run(SparkSQL(
        "CREATE OR REPLACE TEMP VIEW sbroker_t AS "
        "SELECT id, id % 3 AS k FROM range(30)"), log_id=101)
    assert made.value is None  # a command
    assertDataFrameEqual(spark.table("sbroker_t").groupBy("k").count(),
                         spark.createDataFrame([(0, 10), (1, 10), (2, 10)], "k long, count long"))
    small = runner.run(SparkSQL("SELECT k, count(*) AS n FROM sbroker_t WHERE id < :top "
                                "GROUP BY k ORDER BY k", {"top": 6}), log_id=102)
    assert small.value == {"rows": 3, "data": [[0, 2], [1, 2], [2, 2]]}
    assert small.spark_job_ids
    big = runner.run("SELECT * FROM sbroker_t", log_id=103)
    assert big.value == {"rows": 30}
    bigger = runner.run("SELECT id FROM range(2500)", log_id=150)  # over COUNTED_ROWS
    assert bigger.value == {"rows": 2500}
    empty = runner.run("SELECT id FROM range(5) WHERE id > 10", log_id=151)
    assert empty.value == {"rows": 0, "data": []}  # a query, not a command


def test_row_bounds_are_read_from_the_optimized_plan(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    from sbroker.apps.spark.session import _row_bound

    assert _row_bound(spark.sql("SELECT sum(id) FROM range(100000)")) == 1
    assert _row_bound(spark.sql("SELECT id FROM range(2500)")) == 2500
    assert _row_bound(spark.sql("SELECT id FROM range(100000) LIMIT 7")) == 7
    spark.range(10).write.parquet(str(tmp_path / "p"))
    assert _row_bound(spark.read.parquet(str(tmp_path / "p"))) is None  # a scan: unknown


def test_job_ids_are_those_of_the_task_and_the_thread_is_left_clean(
        spark: SparkSession, runner: SparkRunner) -> None:
    sc = spark.sparkContext
    with ThreadPoolExecutor(1) as pool:  # executor threads are reused between tasks
        outcome = pool.submit(runner.run, "SELECT sum(id) FROM range(1000)", log_id=104,
                              pool="sched-x").result()
        leftovers = pool.submit(lambda: (sc.getLocalProperty("spark.scheduler.pool"),
                                         sc.getLocalProperty("spark.jobGroup.id"),
                                         sorted(sc.getJobTags()))).result()
    assert leftovers == (None, None, [])
    assert outcome.spark_job_ids
    tracker = sc.statusTracker()
    assert sorted(tracker.getJobIdsForGroup("104")) == outcome.spark_job_ids
    for job_id in outcome.spark_job_ids:
        assert tracker.getJobInfo(job_id).status == "SUCCEEDED"  # type: ignore[union-attr]


def test_a_python_task_runs_in_the_scheduler_pool_with_its_tag(runner: SparkRunner) -> None:
    outcome = runner.run(PythonTask("spark_task_helpers:local_properties"), log_id=105,
                         pool="sched-y")
    assert outcome.value == {"pool": "sched-y", "group": "105",
                             "tags": ["sbroker-task-105"]}


def test_a_python_task_writes_parquet(spark: SparkSession, runner: SparkRunner,
                                      tmp_path: Path) -> None:
    from pyspark.testing import assertDataFrameEqual

    path = str(tmp_path / "squares")
    outcome = runner.run(PythonTask("spark_task_helpers:write_squares", path=path, n=4),
                         log_id=106)
    assert outcome.value == {"rows": 4}
    assert outcome.spark_job_ids
    assertDataFrameEqual(spark.read.parquet(path),
                         [(0, 0), (1, 1), (2, 4), (3, 9)], checkRowOrder=False)


def test_invalid_sql_and_failing_python_are_failed_with_one_line(runner: SparkRunner) -> None:
    bad_sql = execute(runner, SparkSQL("SELECT * FROM sbroker_no_such_table"), log_id=107)
    assert bad_sql.status == "failed"
    assert bad_sql.error.startswith("AnalysisException: [TABLE_OR_VIEW_NOT_FOUND]")  # type: ignore[union-attr]
    assert "\n" not in bad_sql.error  # type: ignore[operator]
    with pytest.raises(TaskError, match="UNRESOLVED_COLUMN"):
        runner.run(PythonTask("spark_task_helpers:fail_in_spark"), log_id=108)
    assert runner.run("SELECT 1", log_id=109).value == {"rows": 1, "data": [[1]]}


def test_a_long_job_cancelled_from_another_thread_is_recorded_cancelled(
        spark: SparkSession, runner: SparkRunner) -> None:
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(execute, runner, SparkSQL(LONG_QUERY), log_id=110, pool="p")

        def job_running() -> bool:
            progress = runner.progress(110)
            return progress is not None and progress.active_jobs > 0 and progress.tasks > 0

        poll_until(job_running)
        progress = runner.progress(110)
        assert isinstance(progress, SparkProgress) and progress.tasks == 2
        assert runner.cancel(110) is True
        execution = future.result(timeout=60)
    assert execution.status == "cancelled"
    assert execution.spark_job_ids
    tracker = spark.sparkContext.statusTracker()
    poll_until(lambda: all(tracker.getJobInfo(j).status == "FAILED"  # type: ignore[union-attr]
                          for j in execution.spark_job_ids))
    assert runner.progress(110) is None


def test_a_task_cancelled_before_it_starts_runs_no_job(runner: SparkRunner) -> None:
    runner.cancel(111)
    with pytest.raises(TaskCancelled) as caught:
        runner.run(LONG_QUERY, log_id=111)
    assert caught.value.spark_job_ids == []
