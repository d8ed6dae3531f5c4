"""Run in a child process by test_spark_connect (PySpark refuses a Connect session beside the
test run's classic one): the sbroker data source registered and used over Spark Connect, with
the default trigger and with Trigger.AvailableNow.
Reports what it saw as one JSON line on stdout."""

from __future__ import annotations

import json
import sys

from stream_helpers import make_database, out_count, pass_through

import sbroker
from sbroker.spark import SparkConfig, create_session, register


def _send(url: str, *bodies: str) -> None:
    with sbroker.Broker.open(url) as b, b.transaction() as tx:
        handle = tx.begin_dialog("Src", "In")
        for body in bodies:
            tx.send(handle, "DEFAULT", body)


def _last_batch(url: str) -> int:
    """The id of the last micro-batch the sink sent (a Connect server keeps no progress of a
    query that ended): batch 0 read a, b, c; AvailableNow's batches follow it."""
    with sbroker.Broker.open(url) as b, b.transaction() as tx:
        return int(tx.execute("SELECT max(batch_id) FROM sb_stream_sinks").fetchone()[0])


def main(remote: str, url: str, checkpoint: str) -> dict[str, object]:
    """Stream three messages In -> Out, then five more with Trigger.AvailableNow at two per
    batch, then look at Out with a batch read (each conversation's bodies, in order)."""
    make_database(url)
    _send(url, "a", "b", "c")
    spark = create_session(SparkConfig(remote=remote))
    try:
        register(spark)
        query = pass_through(spark, url, checkpoint)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        _send(url, *"defgh")
        query = pass_through(spark, url, checkpoint, per_batch=2,
                             trigger={"availableNow": True})
        try:
            query.awaitTermination()
        finally:
            query.stop()
        snapshot = spark.read.format("sbroker").option("url", url).option("queue", "Out").load()
        by_conversation: dict[str, str] = {}
        for r in snapshot.orderBy("message_sequence_number").collect():
            by_conversation[r.conversation_handle] = (
                by_conversation.get(r.conversation_handle, "") + r.message_body.decode())
    finally:
        spark.stop()
    return {"sent": out_count(url), "last_batch": _last_batch(url),
            "snapshot": sorted(by_conversation.values())}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
