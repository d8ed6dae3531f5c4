"""The data pipeline as a stream (docs/stream.md): orders arrive as broker messages from a
producer process, Spark aggregates them per minute and per product, writes Parquet, and sends an
alert message for each product over a threshold to a service whose activated procedure prints
it. Beside it, a scheduled job bills the orders: a Trigger.AvailableNow query that takes the
invoices there are, in micro-batches, and stops.

    make stream                                   # or:
    python examples/stream_pipeline.py --orders 20000 --threshold 800
    python examples/stream_pipeline.py --job      # the billing job alone, as cron would run it

    producer process --Order messages--> OrdersQueue (service Orders)
    query "per_minute": readStream sbroker(OrdersQueue) -> parse the JSON -> per minute of
        order time and per product: orders, quantity, revenue -> Parquet out/stream/per_minute
        (append mode: a minute is written once the watermark says no late order can change it)
    query "alerts": readStream Parquet(per_minute) -> quantity over the threshold -> JSON
        -> writeStream sbroker: Analytics -> Alerts, message type Alert, one conversation
        per product
    AlertsQueue's activated procedure prints each alert.
    scheduled job "billing": readStream sbroker(BillingQueue), trigger availableNow, at most
        5,000 messages per micro-batch -> Parquet out/stream/invoices; run again, it writes
        only what came since (nothing, here)

The queries keep checkpoints under out/stream/checkpoints: stopped and started again, they
go on where they were and nothing is counted, written, alerted or billed twice.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import sbroker

STORES = 8  # the producer sends each store's orders on a conversation of its own
PRODUCTS = 20
MINUTES = 10  # order times span this many minutes
START = 1_767_258_000.0  # 2026-01-01 09:00 UTC, the first order's time
ORDER_SCHEMA = "order_id long, product string, quantity int, price double, ts double"
INVOICE_SCHEMA = "order_id long, amount double"
BILL_BATCH = 5_000  # the billing job's maxMessagesPerBatch


def setup(db: Path) -> sbroker.Broker:
    """The broker objects of the pipeline, and the activated procedure that prints alerts."""
    b = sbroker.Broker.open(db, monitor_interval=1.0)
    b.create_message_type("Order", "well_formed_json")
    b.create_message_type("Alert", "well_formed_json")
    b.create_message_type("Invoice", "well_formed_json")
    b.create_contract("OrderContract", {"Order": "initiator"})
    b.create_contract("InvoiceContract", {"Invoice": "initiator"})
    b.create_contract("AlertContract", {"Alert": "initiator"})
    for queue in ("ShopQueue", "OrdersQueue", "AnalyticsQueue", "BillingQueue"):
        b.create_queue(queue)
    b.create_queue("AlertsQueue", activation=sbroker.Activation(print_alerts))
    b.create_service("Shop", "ShopQueue")
    b.create_service("Orders", "OrdersQueue", ["OrderContract"])
    b.create_service("Billing", "BillingQueue", ["InvoiceContract"])
    b.create_service("Analytics", "AnalyticsQueue")
    b.create_service("Alerts", "AlertsQueue", ["AlertContract"])
    return b


printed: list[dict[str, Any]] = []
printed_changed = threading.Condition()


def print_alerts(ctx: sbroker.ActivationContext) -> None:
    """AlertsQueue's activated procedure: print each alert until the queue stays empty."""
    while not ctx.stopping.is_set():
        with ctx.broker.transaction() as tx:
            messages = tx.receive(ctx.queue, timeout=1)
            for m in messages:
                if m.message_type_name == "Alert":
                    alert = m.json()
                    print(f"  ALERT {alert['product']}: {alert['quantity']} sold in the minute "
                          f"from {alert['minute']} (revenue {alert['revenue']:,.2f})",
                          flush=True)
                    with printed_changed:
                        printed.append(alert)
                        printed_changed.notify_all()
        if not messages:
            return


def produce(db: str, orders: int) -> None:
    """The producer process: ``orders`` orders from STORES stores, 50 per transaction, each
    with its invoice to Billing, then one closing order past the last minute (it moves the
    watermark past it)."""
    with sbroker.Broker.open(db) as b:
        with b.transaction() as tx:
            stores = [tx.begin_dialog("Shop", "Orders", "OrderContract") for _ in range(STORES)]
            billing = tx.begin_dialog("Shop", "Billing", "InvoiceContract")
        step = MINUTES * 60 / orders
        weights = [1 / (k + 1) for k in range(PRODUCTS)]  # a few products sell far more
        for start in range(0, orders, 50):
            with b.transaction() as tx:
                for i in range(start, min(orders, start + 50)):
                    product, quantity = _pick(i, weights), 1 + _hash(i, 7) % 5
                    tx.send(stores[i % STORES], "Order", json.dumps({
                        "order_id": i, "product": f"P{product:02d}", "quantity": quantity,
                        "price": 5.0 + product, "ts": START + i * step}))
                    tx.send(billing, "Invoice", json.dumps({
                        "order_id": i, "amount": quantity * (5.0 + product)}))
        with b.transaction() as tx:
            tx.send(stores[0], "Order", json.dumps({
                "order_id": orders, "product": "closing", "quantity": 0, "price": 0.0,
                "ts": START + (MINUTES + 2) * 60}))


def _hash(i: int, salt: int) -> int:
    return (i * 2_654_435_761 + salt * 40_503) % 2**32


def _pick(i: int, weights: list[float]) -> int:
    point = _hash(i, 3) / 2**32 * sum(weights)
    for k, weight in enumerate(weights):
        point -= weight
        if point < 0:
            return k
    return len(weights) - 1


def start_queries(spark: Any, db: str, out: Path, threshold: int) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    orders = (spark.readStream.format("sbroker").option("url", db).option("queue", "OrdersQueue")
              .load()
              .where(F.col("message_type_name") == "Order")
              .select(F.from_json(F.col("message_body").cast("string"), ORDER_SCHEMA).alias("o"))
              .select("o.*", F.col("o.ts").cast("timestamp").alias("at")))
    per_minute = (orders.withWatermark("at", "1 minute")
                  .groupBy(F.window("at", "1 minute").alias("w"), "product")
                  .agg(F.count("*").alias("orders"), F.sum("quantity").alias("quantity"),
                       F.round(F.sum(F.col("quantity") * F.col("price")), 2).alias("revenue"))
                  .select(F.col("w.start").alias("minute"), "product", "orders", "quantity",
                          "revenue"))
    first = (per_minute.writeStream.queryName("per_minute").format("parquet")
             .option("path", str(out / "per_minute"))
             .option("checkpointLocation", str(out / "checkpoints" / "per_minute")).start())
    alerts = (spark.readStream.schema(per_minute.schema).parquet(str(out / "per_minute"))
              .where(F.col("quantity") > threshold)
              .select(F.col("product").alias("conversation_key"), F.to_json(F.struct(
                  "product", F.date_format("minute", "HH:mm").alias("minute"), "quantity",
                  "revenue")).alias("message_body")))
    second = (alerts.writeStream.queryName("alerts").format("sbroker").option("url", db)
              .option("from_service", "Analytics").option("to_service", "Alerts")
              .option("contract", "AlertContract").option("message_type", "Alert")
              .option("checkpointLocation", str(out / "checkpoints" / "alerts")).start())
    return first, second


def bill(spark: Any, db: str, out: Path, per_batch: int = BILL_BATCH) -> list[int]:
    """The scheduled billing job: every invoice committed when it starts, into Parquet, in
    micro-batches of at most ``per_batch``, then it stops; each micro-batch's size."""
    from pyspark.sql import functions as F

    job = (spark.readStream.format("sbroker").option("url", db).option("queue", "BillingQueue")
           .option("maxMessagesPerBatch", per_batch).load()
           .where(F.col("message_type_name") == "Invoice")
           .select(F.from_json(F.col("message_body").cast("string"), INVOICE_SCHEMA).alias("i"))
           .select("i.*")
           .writeStream.queryName("billing").format("parquet")
           .option("path", str(out / "invoices"))
           .option("checkpointLocation", str(out / "checkpoints" / "billing"))
           .trigger(availableNow=True).start())
    job.awaitTermination()
    return [int(p["numInputRows"]) for p in job.recentProgress if p["numInputRows"]]


def run(spark: Any, out: Path, orders: int, threshold: int,
        bill_batch: int = BILL_BATCH) -> dict[str, Any]:
    """The whole pipeline on ``spark``, from an empty ``out``: what it wrote and printed."""
    from pyspark.sql import functions as F

    from sbroker.spark import register

    shutil.rmtree(out, ignore_errors=True)  # a fresh run: the database and checkpoints
    out.mkdir(parents=True)
    db = str(out / "stream.db")
    printed.clear()
    broker = setup(Path(db)).start()  # started: AlertsQueue's procedure runs here
    register(spark)
    producer = subprocess.Popen([sys.executable, __file__, "--produce", db, str(orders)])
    first, second = start_queries(spark, db, out, threshold)
    try:
        if producer.wait() != 0:
            raise SystemExit("the producer failed")
        print(f"{orders:,} orders sent by the producer process")
        first.processAllAvailable()
        first.processAllAvailable()  # the batch without data that writes the final minutes
        second.processAllAvailable()
        billed = bill(spark, db, out, bill_batch)  # beside the two queries, still running
        print(f"billing job: {sum(billed):,} invoices in micro-batches of {billed}, stopped")
        again = bill(spark, db, out, bill_batch)
        print(f"billing job run again: {sum(again):,} new invoices")
        per_minute = spark.read.parquet(str(out / "per_minute"))
        expected = per_minute.where(F.col("quantity") > threshold).count()
        deadline = time.monotonic() + 60
        with printed_changed:  # the activated procedure prints in this process
            while len(printed) < expected and time.monotonic() < deadline:
                printed_changed.wait(deadline - time.monotonic())
        return {"rows": per_minute.count(), "expected": expected, "alerts": len(printed),
                "orders": int(per_minute.agg(F.sum("orders")).first()[0]),
                "billed": billed, "billed_again": again,
                "invoices": spark.read.parquet(str(out / "invoices")).count()}
    finally:
        for query in (first, second):
            query.stop()
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/stream"))
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--threshold", type=int, default=800,
                        help="alert when a product sells more than this in a minute")
    parser.add_argument("--job", action="store_true",
                        help="only run the billing job on the database of an earlier run")
    args = parser.parse_args()
    from sbroker.spark import SparkConfig, create_session, register

    spark = create_session(SparkConfig(master="local[2]", app_name="sbroker-stream"))
    started = time.perf_counter()
    try:
        if args.job:
            register(spark)
            billed = bill(spark, str(args.out / "stream.db"), args.out)
            print(f"billing job: {sum(billed):,} new invoices in micro-batches of {billed}; "
                  f"{time.perf_counter() - started:.1f} s")
            return
        seen = run(spark, args.out, args.orders, args.threshold)
    finally:
        spark.stop()
    print(f"{seen['rows']} (minute, product) rows in {args.out / 'per_minute'}; "
          f"{seen['alerts']} alerts printed; {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--produce"]:
        produce(sys.argv[2], int(sys.argv[3]))
    else:
        main()
