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


LONG_QUERY = "SELECT count(*) FROM range(0, 50000000000, 1, 2)"
released = threading.Event()  # set by the test that used long_job_then_block, at its end


def long_job_then_block(spark: Any) -> None:
    """Runs a Spark job that takes minutes, ignores its failure, then blocks until the test
    ends: it does nothing to be stopped."""
    try:
        spark.sql(LONG_QUERY).collect()
    except Exception:  # a cancelled job: carry on regardless
        released.wait()
