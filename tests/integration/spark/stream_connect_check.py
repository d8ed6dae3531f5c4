"""Run in a child process by test_spark_connect (PySpark refuses a Connect session beside the
test run's classic one): the sbroker data source registered and used over Spark Connect.
Reports what it saw as one JSON line on stdout."""

from __future__ import annotations

import json
import sys

from stream_helpers import make_database, out_count, pass_through

import sbroker
from sbroker.spark import SparkConfig, create_session, register


def main(remote: str, url: str, checkpoint: str) -> dict[str, object]:
    """Stream three messages In -> Out, then look at Out with a batch read."""
    make_database(url)
    with sbroker.Broker.open(url) as b, b.transaction() as tx:
        handle = tx.begin_dialog("Src", "In")
        for body in ("a", "b", "c"):
            tx.send(handle, "DEFAULT", body)
    spark = create_session(SparkConfig(remote=remote))
    try:
        register(spark)
        query = pass_through(spark, url, checkpoint)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        snapshot = spark.read.format("sbroker").option("url", url).option("queue", "Out").load()
        bodies = [r.message_body.decode() for r in snapshot.orderBy("message_sequence_number")
                  .collect()]
    finally:
        spark.stop()
    return {"sent": out_count(url), "snapshot": bodies}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
