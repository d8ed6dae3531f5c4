"""Python task targets for the Spark runner tests (called as ``f(spark, **kwargs)``)."""

from __future__ import annotations

import threading
from typing import Any

touched = threading.Event()


def untouched(spark: Any, x: int) -> int:
    """Never uses spark: must not start a session."""
    return x * 2


def local_properties(spark: Any) -> dict[str, Any]:
    """What the runner set on this thread."""
    sc = spark.sparkContext
    return {"pool": sc.getLocalProperty("spark.scheduler.pool"),
            "group": sc.getLocalProperty("spark.jobGroup.id"),
            "tags": sorted(sc.getJobTags())}


def write_squares(spark: Any, path: str, n: int) -> dict[str, int]:
    """Writes a small Parquet table and returns its row count."""
    spark.range(n).selectExpr("id", "id * id AS square").write.mode("overwrite").parquet(path)
    return {"rows": n}


def fail_in_spark(spark: Any) -> None:
    """Fails inside Spark with an analysis error."""
    spark.sql("SELECT no_such_column FROM range(1)").collect()


def needs_context(spark: Any) -> None:
    """Builds a column before the session exists (a classic-mode mistake)."""
    from pyspark.sql import functions as F

    F.col("x")
