"""Spark code of the orders example: the functions that ``orders_pipeline.toml`` names and
that ``orders_pipeline.py`` (the same pipeline in Python) calls.

Every function is called as ``function(spark, **args)`` by the scheduler. The data set is
synthetic but shaped like a shop's: customers in segments and regions, products in
categories with log-uniform prices, orders skewed towards heavy buyers and popular products
and growing over two years. All "random" columns are hashes of the row id and a seed, so
the same parameters always give the same data, whatever the partitioning.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

START_DATE = "2023-01-01"
CATEGORIES = ["Electronics", "Computers", "Home & Kitchen", "Garden", "Toys", "Books",
              "Clothing", "Shoes", "Beauty", "Sports", "Grocery", "Automotive"]
SEGMENTS = [("Consumer", 0.55), ("Small Business", 0.85), ("Corporate", 1.0)]
REGIONS = [("North America", 0.35), ("Europe", 0.65), ("Asia Pacific", 0.85),
           ("Latin America", 0.95), ("Middle East & Africa", 1.0)]


def _uniform(col: Column, salt: int, seed: int) -> Column:
    """A deterministic pseudo-random number in [0, 1) from a column and a salt."""
    return F.pmod(F.xxhash64(col, F.lit(seed), F.lit(salt)), F.lit(1_000_003)) / 1_000_003.0


def _pick(u: Column, choices: list[tuple[str, float]]) -> Column:
    """The first choice whose cumulative weight exceeds ``u``."""
    expr = F.lit(choices[-1][0])
    for name, upper in reversed(choices[:-1]):
        expr = F.when(u < upper, F.lit(name)).otherwise(expr)
    return expr


def product_category(product_id: Column, seed: int) -> Column:
    """Category of a product: a pure function of its id, so orders need no join."""
    index = F.floor(_uniform(product_id, 11, seed) * len(CATEGORIES)).cast("int")
    return F.element_at(F.array(*[F.lit(c) for c in CATEGORIES]), index + 1)


def product_price(product_id: Column, seed: int) -> Column:
    """List price, log-uniform between 2 and 2,000."""
    return F.round(F.exp(F.log(F.lit(2.0)) + _uniform(product_id, 12, seed) * F.log(F.lit(1000.0))),
                   2)


def _write(frame: DataFrame, path: str) -> None:
    frame.write.mode("overwrite").parquet(path)


def generate_customers(spark: SparkSession, out: str, customers: int, seed: int) -> dict[str, Any]:
    """``customers`` rows: id, name, segment, region, signup date."""
    ids = spark.range(customers)  # first touch of `spark` starts the session
    cid = ids["id"]
    frame = ids.select(
        cid.alias("customer_id"),
        F.format_string("Customer %06d", cid).alias("name"),
        _pick(_uniform(cid, 1, seed), SEGMENTS).alias("segment"),
        _pick(_uniform(cid, 2, seed), REGIONS).alias("region"),
        F.date_add(F.lit(START_DATE).cast("date"),
                   F.floor(_uniform(cid, 3, seed) * 700).cast("int")).alias("signup_date"),
    )
    _write(frame, f"{out}/customers")
    return {"rows": customers, "path": os.path.abspath(f"{out}/customers")}


def generate_products(spark: SparkSession, out: str, products: int, seed: int) -> dict[str, Any]:
    """``products`` rows: id, name, category, list price."""
    ids = spark.range(products)
    pid = ids["id"]
    frame = ids.select(
        pid.alias("product_id"),
        product_category(pid, seed).alias("category"),
        product_price(pid, seed).alias("list_price"),
    ).withColumn("name", F.format_string("%s #%05d", F.col("category"), F.col("product_id")))
    _write(frame, f"{out}/products")
    return {"rows": products, "path": os.path.abspath(f"{out}/products")}


def generate_orders(spark: SparkSession, out: str, orders: int, customers: int, products: int,
                    days: int, seed: int) -> dict[str, Any]:
    """``orders`` rows over ``days`` days, skewed towards heavy buyers and best sellers."""
    ids = spark.range(orders)
    oid = ids["id"]
    day = F.floor(F.sqrt(_uniform(oid, 24, seed)) * days).cast("int")  # business grows
    discount = F.when(_uniform(oid, 26, seed) < 0.7, 0.0).when(
        _uniform(oid, 26, seed) < 0.9, 0.1).otherwise(0.2)
    frame = ids.select(
        oid.alias("order_id"),
        F.floor(F.pow(_uniform(oid, 21, seed), 2) * customers).cast("long").alias("customer_id"),
        F.floor(F.pow(_uniform(oid, 22, seed), 1.6) * products).cast("long").alias("product_id"),
        (1 + F.floor(F.pow(_uniform(oid, 23, seed), 3) * 5)).cast("int").alias("quantity"),
        (F.unix_timestamp(F.lit(START_DATE).cast("timestamp")) + day * 86400
         + F.floor(_uniform(oid, 25, seed) * 86400)).cast("timestamp").alias("order_ts"),
        discount.alias("discount"),
        _pick(_uniform(oid, 27, seed), [("completed", 0.92), ("returned", 0.97),
                                        ("cancelled", 1.0)]).alias("status"),
    )
    frame = frame.withColumn("unit_price", product_price(F.col("product_id"), seed)).withColumn(
        "amount", F.round(F.col("quantity") * F.col("unit_price") * (1 - F.col("discount")), 2))
    _write(frame, f"{out}/orders")
    return {"rows": orders, "path": os.path.abspath(f"{out}/orders")}


def top_customers(spark: SparkSession, out: str, limit: int = 100) -> dict[str, Any]:
    """The best ``limit`` customers by revenue, with their favourite category."""
    orders = (spark.read.parquet(f"{out}/orders").where("status = 'completed'")
              .select("customer_id", "product_id", "amount"))
    ranking = Window.orderBy(F.desc("revenue"), "customer_id")
    top = (orders.groupBy("customer_id")
           .agg(F.round(F.sum("amount"), 2).alias("revenue"), F.count("*").alias("orders"))
           .orderBy(F.desc("revenue"), "customer_id").limit(limit)
           .withColumn("rank", F.row_number().over(ranking)))
    products = spark.read.parquet(f"{out}/products").select("product_id", "category")
    # only the top customers' orders are needed for their favourite category
    favourite = (orders.join(F.broadcast(top.select("customer_id")), "customer_id")
                 .join(F.broadcast(products), "product_id")
                 .groupBy("customer_id", "category").agg(F.sum("amount").alias("spent"))
                 .withColumn("r", F.row_number().over(
                     Window.partitionBy("customer_id").orderBy(F.desc("spent"), "category")))
                 .where("r = 1").select("customer_id", F.col("category").alias("favourite")))
    customers = spark.read.parquet(f"{out}/customers")
    report = (top.join(favourite, "customer_id").join(customers, "customer_id")
              .select("rank", "customer_id", "name", "segment", "region", "orders", "revenue",
                      "favourite"))
    _write(report, f"{out}/top_customers")
    best = spark.read.parquet(f"{out}/top_customers").orderBy("rank").first()
    return {"rows": limit, "best": best["name"] if best else None,
            "best_revenue": best["revenue"] if best else None}


def build_report(spark: SparkSession, out: str) -> dict[str, Any]:
    """Join the aggregates into a monthly report and say where every output is."""
    daily = spark.read.parquet(f"{out}/daily_revenue")
    category = spark.read.parquet(f"{out}/category_revenue")
    segment = spark.read.parquet(f"{out}/segment_revenue")
    month = F.date_trunc("month", F.col("day")).cast("date").alias("month")
    monthly = daily.groupBy(month).agg(F.sum("orders").alias("orders"),
                                       F.round(F.sum("revenue"), 2).alias("revenue"))
    monthly = monthly.withColumn(
        "growth_pct", F.round(100 * (F.col("revenue") / F.lag("revenue").over(
            Window.orderBy("month")) - 1), 1))
    best_category = (category
                     .withColumn("r", F.row_number().over(
                         Window.partitionBy("month").orderBy(F.desc("revenue"))))
                     .where("r = 1")
                     .select("month", F.col("category").alias("top_category"),
                             F.col("revenue").alias("top_category_revenue")))
    shares = (segment.groupBy("month").pivot("segment", [s for s, _ in SEGMENTS])
              .agg(F.sum("revenue")))
    report = (monthly.join(best_category, "month", "left").join(shares, "month", "left")
              .select("month", "orders", "revenue", "growth_pct", "top_category",
                      F.round(100 * F.col("top_category_revenue") / F.col("revenue"), 1)
                      .alias("top_category_pct"),
                      *[F.round(100 * F.col(f"`{s}`") / F.col("revenue"), 1)
                        .alias(s.lower().replace(" ", "_") + "_pct") for s, _ in SEGMENTS])
              .orderBy("month"))
    _write(report, f"{out}/report")
    rows = report.collect()
    outputs = {name: os.path.abspath(f"{out}/{name}") for name in sorted(os.listdir(out))
               if os.path.isdir(os.path.join(out, name))}
    print(f"Report: {os.path.abspath(f'{out}/report')} ({len(rows)} months, Parquet)")
    if rows:
        last = rows[-1]
        print(f"  last month {last['month']}: {last['orders']} orders, revenue "
              f"{last['revenue']:,.2f}, top category {last['top_category']}")
    print("Outputs (Parquet): " + ", ".join(f"{k}={v}" for k, v in outputs.items()))
    return {"report": os.path.abspath(f"{out}/report"), "months": len(rows),
            "total_revenue": round(sum(r["revenue"] for r in rows), 2), "outputs": outputs}
