"""Runner behaviour that needs no JVM: StubRunner, execute(), and SparkRunner's laziness and
per-task tagging checked against a fake session."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sbroker.apps.spark import (
    PythonTask,
    SparkConfig,
    SparkProgress,
    SparkRunner,
    SparkSQL,
    StubRunner,
    TaskCancelled,
    TaskError,
    execute,
)
from sbroker.apps.spark.session import COUNTED_ROWS


def _no_session(config: SparkConfig) -> Any:
    raise AssertionError("the runner started a Spark session")


def test_a_python_task_that_never_touches_spark_starts_no_session() -> None:
    runner = SparkRunner(session_factory=_no_session)
    outcome = runner.run(PythonTask("spark_task_helpers:untouched", x=21), log_id=1)
    assert outcome.value == 42
    assert outcome.spark_job_ids == []
    assert not runner.started
    runner.close()  # nothing to stop


def _fake_session() -> mock.MagicMock:
    session = mock.MagicMock(name="SparkSession")
    sc = session.sparkContext
    ids = sc._jsc.statusTracker.return_value.getJobIdsForGroup.return_value  # a Java int[]
    sc._jvm.java.util.Arrays.toString.side_effect = (
        lambda array: "[7, 3]" if array is ids else "[]")
    return session


def test_a_task_that_uses_spark_starts_the_session_and_tags_its_thread() -> None:
    session = _fake_session()
    factory = mock.Mock(return_value=session)
    runner = SparkRunner(session_factory=factory)
    session.sql.return_value.columns = []  # a command: no columns, no rows
    session.sql.return_value.take.return_value = []
    outcome = runner.run(SparkSQL("CREATE TABLE t (a INT)"), log_id=5, pool="sched-a")
    factory.assert_called_once()
    sc = session.sparkContext
    assert sc.mock_calls[:3] == [
        mock.call.setLocalProperty("spark.scheduler.pool", "sched-a"),
        mock.call.setJobGroup("5", "sbroker task 5", interruptOnCancel=True),
        mock.call.addJobTag("sbroker-task-5"),
    ]
    sc.clearJobTags.assert_called_once()
    sc._jsc.clearJobGroup.assert_called_once()
    sc.setLocalProperty.assert_called_with("spark.scheduler.pool", None)
    assert outcome.value is None
    assert outcome.spark_job_ids == [3, 7]


def test_tags_are_cleared_when_the_task_fails() -> None:
    session = _fake_session()
    session.sql.side_effect = RuntimeError("[PARSE_SYNTAX_ERROR] near 'SELEC'\nmore")
    runner = SparkRunner(session=session)
    with pytest.raises(TaskError) as caught:
        runner.run("SELEC 1", log_id=9)
    assert caught.value.error == "RuntimeError: [PARSE_SYNTAX_ERROR] near 'SELEC'"
    assert caught.value.spark_job_ids == [3, 7]
    session.sparkContext.clearJobTags.assert_called_once()


def test_sql_value_is_row_count_with_data_for_small_results() -> None:
    session = _fake_session()
    frame = session.sql.return_value
    frame.columns = ["a"]
    frame.take.return_value = [(1,), (2,)]
    runner = SparkRunner(session=session)
    assert runner.run(SparkSQL("SELECT a FROM t WHERE a > :x", {"x": 0}), log_id=1).value == {
        "rows": 2, "data": [[1], [2]]}
    session.sql.assert_called_with("SELECT a FROM t WHERE a > :x", {"x": 0})
    frame.take.assert_called_with(COUNTED_ROWS + 1)
    frame.count.return_value = 5000
    frame.take.return_value = [(i,) for i in range(11)]  # counted from the one job
    assert runner.run("SELECT a FROM t", log_id=2).value == {"rows": 11}
    frame.count.assert_not_called()
    frame.take.return_value = [(i,) for i in range(COUNTED_ROWS + 1)]  # too many: count()
    assert runner.run("SELECT a FROM t", log_id=3).value == {"rows": 5000}
    frame.count.assert_called_once()


def test_the_schema_is_read_only_when_no_row_came_back() -> None:
    session = _fake_session()
    frame = session.sql.return_value
    columns = mock.PropertyMock(return_value=["a"])
    type(frame).columns = columns  # a MagicMock's type is its own subclass
    runner = SparkRunner(session=session)
    frame.take.return_value = [(1,)]
    assert runner.run("SELECT a FROM t", log_id=1).value == {"rows": 1, "data": [[1]]}
    columns.assert_not_called()
    frame.take.return_value = []  # a query with no rows is not a command
    assert runner.run("SELECT a FROM t WHERE false", log_id=2).value == {"rows": 0, "data": []}
    columns.assert_called_once()


def test_a_query_proven_small_is_collected_and_others_are_taken() -> None:
    session = _fake_session()
    frame = session.sql.return_value
    bound = frame._jdf.queryExecution.return_value.optimizedPlan.return_value.maxRows
    frame.collect.return_value = [(3,)]
    frame.take.return_value = [(4,)]
    runner = SparkRunner(session=session)
    bound.return_value.toString.return_value = f"Some({COUNTED_ROWS})"
    assert runner.run("SELECT max(a) FROM t", log_id=1).value == {"rows": 1, "data": [[3]]}
    frame.take.assert_not_called()
    for unproven in (f"Some({COUNTED_ROWS + 1})", "None"):
        frame.collect.reset_mock()
        bound.return_value.toString.return_value = unproven
        assert runner.run("SELECT a FROM t", log_id=2).value == {"rows": 1, "data": [[4]]}
        frame.collect.assert_not_called()
        frame.take.assert_called_with(COUNTED_ROWS + 1)
    bound.side_effect = RuntimeError("no plan")  # the bound is an optimisation only
    assert runner.run("SELECT a FROM t", log_id=3).value == {"rows": 1, "data": [[4]]}


def test_cancel_before_start_cancels_the_run_and_jobs_of_a_running_task() -> None:
    session = _fake_session()
    runner = SparkRunner(session=session)
    assert runner.cancel(11) is False
    with pytest.raises(TaskCancelled):
        runner.run("SELECT 1", log_id=11)
    session.sql.assert_not_called()

    started, release = threading.Event(), threading.Event()

    def slow_sql(*args: Any) -> Any:
        started.set()
        release.wait(10)
        raise RuntimeError("Job 3 cancelled")

    session.sql.side_effect = slow_sql
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run_capturing(runner, 12, errors))
    thread.start()
    assert started.wait(10)
    assert runner.cancel(12) is True
    session.sparkContext.cancelJobsWithTag.assert_called_with("sbroker-task-12")
    session.sparkContext.cancelJobGroup.assert_called_with("12")
    release.set()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], TaskCancelled)


def _run_capturing(runner: SparkRunner, log_id: int, errors: list[BaseException]) -> None:
    try:
        runner.run("SELECT slow", log_id=log_id)
    except BaseException as exc:
        errors.append(exc)


def test_an_assertion_from_pyspark_functions_gets_a_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    # as in a fresh process, whether or not this test run started a session already
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    runner = SparkRunner(session_factory=_no_session)
    with pytest.raises(TaskError, match="use `spark` first"):
        runner.run(PythonTask("spark_task_helpers:needs_context"), log_id=3)


def test_execute_classifies_outcomes() -> None:
    stub = StubRunner()
    stub.on("SELECT ok", value={"rows": 1}, spark_job_ids=[4])
    stub.on("SELECT bad", error=ValueError("no such table"), spark_job_ids=[5])
    ok = execute(stub, SparkSQL("SELECT ok"), log_id=1, pool="p")
    assert (ok.status, ok.value, ok.spark_job_ids, ok.error) == ("succeeded", {"rows": 1}, [4],
                                                                None)
    assert ok.result().ok and ok.start_time <= ok.end_time
    bad = execute(stub, SparkSQL("SELECT bad"), log_id=2)
    assert (bad.status, bad.error, bad.spark_job_ids) == ("failed",
                                                          "ValueError: no such table", [5])
    stub.cancel(3)
    assert execute(stub, SparkSQL("SELECT ok"), log_id=3).status == "cancelled"
    assert stub.calls[0] == (1, SparkSQL("SELECT ok"), "p")


def test_execute_survives_a_broken_runner_and_drops_non_json_values() -> None:
    broken = mock.Mock()
    broken.run.side_effect = KeyError("bug")
    assert execute(broken, SparkSQL("x"), log_id=1).error == "KeyError: 'bug'"
    stub = StubRunner()
    result = execute(stub, PythonTask("spark_task_helpers:untouched", x=1), log_id=2)
    assert result.value == 2


def test_stub_gates_decide_when_tasks_finish_and_report_progress() -> None:
    stub = StubRunner()
    gate = threading.Event()
    stub.on("SELECT slow", gate=gate, progress=SparkProgress(tasks=4, completed_tasks=1))
    done = threading.Event()
    thread = threading.Thread(target=lambda: (stub.run("SELECT slow", log_id=8), done.set()))
    thread.start()
    stub.wait_started(8)
    assert stub.progress(8) == SparkProgress(tasks=4, completed_tasks=1)
    assert not done.is_set()
    gate.set()
    thread.join(10)
    assert done.is_set() and stub.progress(8) is None


def test_stub_python_tasks_get_a_spark_that_refuses_use() -> None:
    with pytest.raises(TaskError, match="StubRunner has no Spark"):
        StubRunner().run(PythonTask("spark_task_helpers:local_properties"), log_id=1)


def test_the_log_configuration_goes_beside_the_users_own_jvm_options(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JVM option of the user's (a JIT setting) keeps Spark's log going to the run's file."""
    from sbroker.apps.spark.logs import quiet_spark_logs

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
    quiet_spark_logs(conf, "local[2]", set(conf), str(tmp_path / "spark.log"))
    first, second = conf["spark.driver.extraJavaOptions"].split(" ")
    assert first.startswith("-Dlog4j2.configurationFile=file:")
    assert second == "-XX:TieredStopAtLevel=1"
    assert str(tmp_path / "spark.log") in Path(first.split("file:", 1)[1]).read_text()
    own = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine.properties"}
    quiet_spark_logs(own, "local[2]", set(own), str(tmp_path / "spark.log"))
    assert own == {"spark.driver.extraJavaOptions":
                   "-Dlog4j2.configurationFile=file:/mine.properties"}  # the user's own wins
