"""The scheduler page: running tasks, the ExecutionLog searched by status / scheduler / time,
the Gantt timeline of each pipeline run's stages (a failed task shows its error), and the
Spark UI link."""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

import sbroker
from sbroker.apps.dashboard import DashboardOptions, create_app, timeline
from sbroker.apps.dashboard.demo import run_demo_pipeline
from sbroker.apps.dashboard.timeline import stages_of
from sbroker.apps.scheduler.executor import executor_state, serve
from sbroker.apps.spark import StubRunner


@pytest.fixture
def runner(pair: sbroker.Broker) -> Iterator[StubRunner]:
    runner = StubRunner()
    pair.install_executor(max_queue_readers=4, runner=runner)
    pair.start()
    yield runner
    pair.stop()


def labels(html: str) -> list[str]:
    return re.findall(r'class="label">([^<]*)<', html)


def test_the_gantt_chart_names_each_stage_and_task_and_shows_a_failure(
        pair: sbroker.Broker, runner: StubRunner, client: TestClient) -> None:
    ok = run_demo_pipeline(pair, runner)
    failed = run_demo_pipeline(pair, runner, fail=True)
    assert ok.ok and not failed.ok  # durable runs: their attempts name their tasks
    html = client.get("/scheduler").text
    assert labels(html) == 2 * ["extract", "orders", "customers", "aggregate", "by_month",
                                "by_product", "by_customer", "report", "monthly_report"]
    runs = re.findall(r'<figure class="gantt" id="run-\d+" data-handle="([^"]+)">', html)
    assert len(runs) == 2 and runs[0] != runs[1]
    assert "stages: extract, aggregate, report" in html
    assert re.search(r'class="task-error"[^>]*><b>monthly_report</b> \(log \d+\) failed: '
                     r"RuntimeError: \[TABLE_OR_VIEW_NOT_FOUND\] missing_table", html)
    bars = re.findall(r'<g class="bar (stage|task) (\w+)"', html)
    assert ("stage", "failed") in bars and bars.count(("task", "succeeded")) == 11


def test_a_dag_runs_tasks_are_named_on_the_chart(pair: sbroker.Broker, runner: StubRunner,
                                                 client: TestClient) -> None:
    from sbroker.apps.pipeline import parse_pipeline, start_run

    state = start_run(pair, parse_pipeline('[pipeline]\nname = "dag"\n[[task]]\nname = "load"\n'
                                           'sql = "SELECT 1"\n[[task]]\nname = "report"\n'
                                           'sql = "SELECT 2"\nafter = ["load"]\n'))
    assert state.ok
    assert labels(client.get("/scheduler").text) == ["tasks", "load", "report"]


def test_the_execution_log_is_searched_by_status_scheduler_and_time(
        pair: sbroker.Broker, runner: StubRunner, client: TestClient) -> None:
    before = dt.datetime.now(dt.UTC)
    run_demo_pipeline(pair, runner, fail=True)
    with pair.scheduler("other") as s:
        s.exec_async("SELECT 2")
        s.wait_all()
    failed = client.get("/scheduler?status=failed").text
    log = failed.split('id="log"')[1]
    assert log.count("<tr>") == 2 and "missing_table" in log  # header row + the failure
    other = client.get("/scheduler?scheduler=other").text.split('id="log"')[1]
    assert "SELECT 2" in other and "orders" not in other.split("</table>")[0]
    since = (before - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert "7 row(s)" in client.get(f"/scheduler?since={since}").text
    assert "No task matches." in client.get(f"/scheduler?until={since}").text
    assert "No task matches." in client.get(
        "/scheduler?since=2099-01-01T00:00%2B00:00").text


def test_running_tasks_are_listed_with_a_cancel_button(pair: sbroker.Broker,
                                                       client: TestClient) -> None:
    runner = StubRunner()
    gate = threading.Event()
    runner.on("SELECT slow", gate=gate)
    pair.install_executor(runner=runner)
    stop = threading.Event()
    reader = threading.Thread(target=serve, args=(pair, executor_state(pair), "reader-1"),
                              kwargs={"wait": 0.05, "stopping": stop})
    with pair.scheduler("nightly") as s:
        log_id = s.exec_async("SELECT slow")
        reader.start()
        try:
            runner.wait_started(log_id)
            running = client.get("/scheduler").text.split('id="running"')[1].split("</table>")[0]
            assert f'<td class="num">{log_id}</td>' in running and "nightly" in running
            assert f"/scheduler/tasks/{log_id}/cancel" in running
        finally:
            gate.set()
            s.wait_all()
            stop.set()
            reader.join()


def test_the_spark_ui_link(pair: sbroker.Broker) -> None:
    pair.install_executor(spark=sbroker.SparkConfig(conf={"spark.ui.enabled": "true",
                                                          "spark.ui.port": "4050"}))
    html = TestClient(create_app(pair)).get("/scheduler").text
    assert 'id="spark-ui" href="http://localhost:4050"' in html
    given = TestClient(create_app(pair, DashboardOptions(spark_ui="http://spark:4040")))
    assert 'href="http://spark:4040"' in given.get("/scheduler").text
    pair.install_executor()  # the UI off (the default): no link
    assert 'id="spark-ui"' not in TestClient(create_app(pair)).get("/scheduler").text


def test_the_page_says_when_the_executor_is_not_installed(client: TestClient) -> None:
    assert "The executor is not installed" in client.get("/scheduler").text


def row(log_id: int, queued: float, start: float, end: float) -> dict[str, object]:
    base = dt.datetime(2026, 11, 24, 9, 0, tzinfo=dt.UTC)
    iso = [(base + dt.timedelta(seconds=t)).isoformat() for t in (queued, start, end)]
    return {"LogID": log_id, "QueuedTime": iso[0], "StartTime": iso[1], "EndTime": iso[2],
            "Status": "succeeded", "TaskName": None, "Error": None, "Task": "{}"}


def test_stages_are_inferred_when_none_were_recorded() -> None:
    tasks = [row(1, 0, 0, 2), row(2, 0, 1, 3), row(3, 3.5, 4, 5), row(4, 5.5, 6, 7),
             row(5, 5.5, 6, 6.5)]
    assert [(name, [t["LogID"] for t in ts]) for name, ts in stages_of(tasks)] == [
        ("stage 1", [1, 2]), ("stage 2", [3]), ("stage 3", [4, 5])]


def test_a_long_run_is_drawn_by_its_stages_and_failed_tasks() -> None:
    tasks = [row(i, 0, 0, 1) for i in range(1, 201)]
    tasks[7] = {**tasks[7], "Status": "failed", "Error": "boom"}
    run = {"SchedulerHandle": "h", "pool": "big", "open_tasks": 0, "failed_tasks": 1}
    chart = timeline.chart(run, tasks, dt.datetime(2026, 11, 24, 10, 0, tzinfo=dt.UTC))
    assert chart.tasks == 200 and not chart.tasks_drawn
    assert [(b.kind, b.label) for b in chart.bars] == [("stage", "stage 1"), ("task", "task 8")]
    assert chart.bars[1].error == "boom"
