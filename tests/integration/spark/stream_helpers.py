"""What the stream tests share with their child driver (stream_driver.py): the database they
stream through and the pass-through query from queue In to service Out."""

from __future__ import annotations

from typing import Any

import sbroker

CONVERSATIONS = 50


def make_database(url: str) -> None:
    """Queues Src (the producer's side), In (streamed) and Out (the sink's target)."""
    with sbroker.Broker.open(url) as b:
        for queue in ("Src", "In", "Out"):
            b.create_queue(queue)
        b.create_service("Src", "Src")
        b.create_service("In", "In", ["DEFAULT"])
        b.create_service("Out", "Out", ["DEFAULT"])


def pass_through(spark: Any, url: str, checkpoint: str, *, per_batch: int = 1_000,
                 claim_timeout: float = 5.0, trigger: dict[str, Any] | None = None) -> Any:
    """Start In -> Out: each message sent on, on one conversation per source conversation
    (``trigger``: the keywords of ``DataStreamWriter.trigger``; none: Spark's default)."""
    source = (spark.readStream.format("sbroker").option("url", url).option("queue", "In")
              .option("maxMessagesPerBatch", per_batch)
              .option("claimTimeout", claim_timeout).load())
    writer = (source.selectExpr("conversation_handle AS conversation_key", "message_body")
              .writeStream.format("sbroker").option("url", url).option("from_service", "Src")
              .option("to_service", "Out").option("checkpointLocation", checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def batch_sizes(query: Any) -> list[int]:
    """The rows of each micro-batch of the query's run that read any, from its progress."""
    return [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]


def out_count(url: str) -> int:
    with sbroker.Broker.open(url) as b, b.transaction() as tx:
        return int(tx.execute(
            "SELECT count(*) FROM sb_messages m JOIN sb_queues q USING (queue_id)"
            " WHERE q.name = 'Out'").fetchone()[0])
