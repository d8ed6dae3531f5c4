"""The shipped example pipeline, end to end as a durable run on a broker whose executor uses
the shared session, with a small data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.otel import named, traced

import sbroker
from sbroker.apps.pipeline import load_pipeline, start_run
from sbroker.apps.pipeline.command import pipeline_import_path
from sbroker.apps.spark import SparkRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "orders_pipeline.toml"


def test_the_orders_pipeline_writes_its_report(spark: SparkSession, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orders"
    pipeline = load_pipeline(EXAMPLE, {"out": str(out), "orders": "20000", "customers": "500",
                                       "products": "200", "days": "90"})
    with traced() as t, sbroker.Broker.open(tmp_path / "run.db",
                                            instrumentation=t.instrumentation) as broker:
        broker.install_executor(max_queue_readers=4, runner=SparkRunner(session=spark))
        broker.start()
        with pipeline_import_path(pipeline):
            run = start_run(broker, pipeline)
        logged = {r["LogID"]: json.loads(r["SparkJobIds"] or "[]")
                  for r in broker.view("ExecutionLog")}
    assert run.ok, {n: t.error for n, t in run.tasks.items()}
    # traced: each task's span has an event per Spark job it started, with the job's id
    events = {(s.attributes or {})["sbroker.task.log_id"]: [
        (e.attributes or {})["spark.job.id"] for e in s.events if e.name == "spark.job"]
        for s in named(t.spans(), "task")}
    assert events == logged and any(logged.values())
    tasks = run.tasks
    assert tasks["orders"].value["rows"] == 20000
    daily, category, segment, consistent = tasks["reconcile"].value["data"][0]
    assert consistent is True and daily == category == segment
    report = spark.read.parquet(str(out / "report"))
    assert report.count() == tasks["monthly_report"].value["months"] >= 3
    assert spark.read.parquet(str(out / "top_customers")).count() == 100
    assert f"Report: {out / 'report'}" in capsys.readouterr().out  # printed by the task
    for name in ("customers", "products", "orders", "daily_revenue", "category_revenue",
                 "segment_revenue", "top_products", "top_customers", "report"):
        assert (out / name).is_dir(), name
