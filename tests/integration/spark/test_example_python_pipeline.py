"""The shipped example written in Python (examples/orders_pipeline.py), end to end through
``pipe.run`` on a broker whose executor uses the shared session, with a small data set: the
same tables and report as the TOML file, each table's path passed as a value."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import sbroker
from sbroker.apps.pipeline.loading import find_pipeline
from sbroker.apps.spark import SparkRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "orders_pipeline.py"


def test_the_python_orders_pipeline_writes_the_same_report(spark: SparkSession,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "orders"
    pipe = find_pipeline(f"{EXAMPLE}:pipe")
    with sbroker.Broker.open(tmp_path / "run.db") as broker:
        broker.install_executor(max_queue_readers=4, runner=SparkRunner(session=spark))
        broker.start()
        run = pipe.run(broker, params={"out": str(out), "order_count": 20000,
                                       "customer_count": 500, "product_count": 200,
                                       "days": 90})
    assert run.status == "succeeded", {n: t.error for n, t in run.tasks.items()}
    tasks = run.tasks
    assert tasks["orders"].value == {"rows": 20000, "path": str(out / "orders")}
    assert tasks["daily_revenue"].value == f"{out}/daily_revenue"  # a path, passed on
    reconcile = tasks["reconcile"].value
    assert reconcile["consistent"] is True
    assert reconcile["daily_total"] == reconcile["category_total"] == reconcile[
        "segment_total"]
    report = spark.read.parquet(str(out / "report"))
    assert report.count() == tasks["monthly_report"].value["months"] >= 3
    assert spark.read.parquet(str(out / "top_customers")).count() == 100
    for name in ("customers", "products", "orders", "daily_revenue", "category_revenue",
                 "segment_revenue", "top_products", "top_customers", "report"):
        assert (out / name).is_dir(), name
