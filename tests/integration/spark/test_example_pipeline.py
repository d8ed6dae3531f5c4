"""The shipped example pipeline, end to end on the shared session with a small data set."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from sbroker.apps.pipeline import local_scheduler, run_command
from sbroker.apps.spark import SparkRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "orders_pipeline.toml"


def test_the_orders_pipeline_writes_its_report(spark: SparkSession, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orders"
    console = Console(file=io.StringIO(), width=120)
    code, run = run_command(
        EXAMPLE, [f"out={out}", "orders=20000", "customers=500", "products=200", "days=90"],
        console=console, open_scheduler=local_scheduler(lambda p: SparkRunner(session=spark)))
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert code == 0, printed
    assert run is not None and run.ok
    tasks = {t.spec.name: t for stage in run.stages for t in stage.tasks}
    assert tasks["orders"].result.value["rows"] == 20000  # type: ignore[union-attr]
    daily, category, segment, consistent = tasks["reconcile"].result.value["data"][0]  # type: ignore[union-attr]
    assert consistent is True and daily == category == segment
    report = spark.read.parquet(str(out / "report"))
    assert report.count() == tasks["monthly_report"].result.value["months"] >= 3  # type: ignore[union-attr]
    assert spark.read.parquet(str(out / "top_customers")).count() == 100
    assert f"Report: {out / 'report'}" in capsys.readouterr().out  # printed by the task
    for name in ("customers", "products", "orders", "daily_revenue", "category_revenue",
                 "segment_revenue", "top_products", "top_customers", "report"):
        assert (out / name).is_dir(), name
