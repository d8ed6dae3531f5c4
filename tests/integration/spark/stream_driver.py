"""A Spark driver of its own, run by test_stream_spark as a child so that the test can kill it
with SIGKILL mid-stream: it runs the pass-through query until it is killed (or, with
Trigger.AvailableNow, ends), after printing its JVM's pid (the test waits for that JVM to be
gone before the query runs again)."""

from __future__ import annotations

import json
import sys

from stream_helpers import pass_through

from sbroker.spark import SparkConfig, create_session, register


def main(url: str, checkpoint: str, trigger: str = "default", per_batch: str = "1000") -> None:
    """``trigger``: "default" or "availableNow"."""
    spark = create_session(SparkConfig(master="local[2]", app_name="sbroker-stream-driver"))
    register(spark)
    query = pass_through(spark, url, checkpoint, claim_timeout=120, per_batch=int(per_batch),
                         trigger={"availableNow": True} if trigger == "availableNow" else None)
    print(json.dumps({"jvm": spark.sparkContext._gateway.proc.pid}), flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
