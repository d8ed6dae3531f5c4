"""The example pipeline ("the main job") written in Python: the same tables and the same
report as ``orders_pipeline.toml``, with each table's path passed from the task that writes
it to the tasks that read it (a task's return value is its value; a parameter named after a
task it comes after receives that value).

    sbroker run examples/orders_pipeline.py:pipe
    sbroker run examples/orders_pipeline.py:pipe -p out=/tmp/orders -p order_count=3000000
    sbroker run examples/orders_pipeline.py:pipe --resume

Parameters are the tasks' keyword parameters with defaults: out, order_count,
customer_count, product_count, days, seed. The Spark code is in ``orders_tasks.py``.
"""

from __future__ import annotations

from typing import Any

import orders_tasks as spark_code  # the Spark code, beside this file

import sbroker

OUT = "out/orders"  # every table is a Parquet folder under it
SEED = 42
CUSTOMERS, PRODUCTS = 100_000, 10_000
Table = dict[str, Any]  # what a task that writes a table returns: {"rows": n, "path": ...}

pipe = sbroker.Pipeline(
    "orders_py",
    description="Synthetic orders -> parallel aggregates -> monthly report (Parquet)",
    concurrency=4,  # tasks in flight at once
    retries=2,  # a transient Spark failure is tried again...
    retry_delay="5s",  # ...after 5 s, then 10 s
    spark=sbroker.SparkConfig(master="local[2]", conf={
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",  # see the TOML file
    }),
)


# -- the data set: three tables generated side by side ---------------------------------------
@pipe.task()
def customers(spark: Any, out: str = OUT, customer_count: int = CUSTOMERS,
              seed: int = SEED) -> Table:
    return spark_code.generate_customers(spark, out, customer_count, seed)


@pipe.task()
def products(spark: Any, out: str = OUT, product_count: int = PRODUCTS,
             seed: int = SEED) -> Table:
    return spark_code.generate_products(spark, out, product_count, seed)


@pipe.task()
def orders(spark: Any, out: str = OUT, order_count: int = 1_000_000,
           customer_count: int = CUSTOMERS, product_count: int = PRODUCTS, days: int = 730,
           seed: int = SEED) -> Table:
    return spark_code.generate_orders(spark, out, order_count, customer_count,
                                      product_count, days, seed)


# -- aggregates, each as soon as the tables it reads are there -------------------------------
def write_sql(spark: Any, path: str, query: str) -> str:
    spark.sql(f"INSERT OVERWRITE DIRECTORY '{path}' USING parquet {query}")
    return path


@pipe.task(after=[orders])
def daily_revenue(spark: Any, orders: Table, out: str = OUT) -> str:
    return write_sql(spark, f"{out}/daily_revenue", f"""
        SELECT to_date(order_ts) AS day,
               count(*) AS orders,
               round(sum(amount), 2) AS revenue,
               round(avg(amount), 2) AS avg_order_value
        FROM parquet.`{orders["path"]}`
        WHERE status = 'completed'
        GROUP BY to_date(order_ts)""")


@pipe.task(after=[orders, products])
def category_revenue(spark: Any, orders: Table, products: Table, out: str = OUT) -> str:
    return write_sql(spark, f"{out}/category_revenue", f"""
        SELECT CAST(date_trunc('month', o.order_ts) AS DATE) AS month,
               p.category,
               sum(o.quantity) AS units,
               round(sum(CASE WHEN o.status = 'completed' THEN o.amount ELSE 0 END), 2)
                 AS revenue,
               round(avg(CASE WHEN o.status = 'returned' THEN 1.0 ELSE 0.0 END) * 100, 2)
                 AS return_pct
        FROM parquet.`{orders["path"]}` o
        JOIN parquet.`{products["path"]}` p ON o.product_id = p.product_id
        GROUP BY 1, 2""")


@pipe.task(after=[orders, customers])
def segment_revenue(spark: Any, orders: Table, customers: Table, out: str = OUT) -> str:
    return write_sql(spark, f"{out}/segment_revenue", f"""
        SELECT CAST(date_trunc('month', o.order_ts) AS DATE) AS month,
               c.segment,
               c.region,
               count(DISTINCT o.customer_id) AS customers,
               count(*) AS orders,
               round(sum(o.amount), 2) AS revenue
        FROM parquet.`{orders["path"]}` o
        JOIN parquet.`{customers["path"]}` c ON o.customer_id = c.customer_id
        WHERE o.status = 'completed'
        GROUP BY 1, 2, 3""")


@pipe.task(after=[orders, products])
def top_products(spark: Any, orders: Table, products: Table, out: str = OUT) -> str:
    return write_sql(spark, f"{out}/top_products", f"""
        SELECT * FROM (
          SELECT p.category, p.product_id, p.name,
                 sum(o.quantity) AS units,
                 round(sum(o.amount), 2) AS revenue,
                 rank() OVER (PARTITION BY p.category ORDER BY sum(o.amount) DESC) AS rank
          FROM parquet.`{orders["path"]}` o
          JOIN parquet.`{products["path"]}` p ON o.product_id = p.product_id
          WHERE o.status = 'completed'
          GROUP BY p.category, p.product_id, p.name
        ) WHERE rank <= 10""")


@pipe.task(after=[orders, products, customers])
def top_customers(spark: Any, out: str = OUT) -> dict[str, Any]:
    return spark_code.top_customers(spark, out, limit=100)


# -- the report, and a check that the aggregates agree ---------------------------------------
@pipe.task(after=[daily_revenue, category_revenue, segment_revenue])
def monthly_report(spark: Any, out: str = OUT) -> dict[str, Any]:
    return spark_code.build_report(spark, out)


@pipe.task(after=[daily_revenue, category_revenue, segment_revenue])
def reconcile(spark: Any, daily_revenue: str, category_revenue: str,
              segment_revenue: str) -> dict[str, Any]:
    row = spark.sql(f"""
        SELECT d.revenue AS daily_total, c.revenue AS category_total,
               s.revenue AS segment_total,
               abs(d.revenue - c.revenue) < 1 AND abs(d.revenue - s.revenue) < 1
                 AS consistent
        FROM (SELECT round(sum(revenue), 2) AS revenue FROM parquet.`{daily_revenue}`) d,
             (SELECT round(sum(revenue), 2) AS revenue FROM parquet.`{category_revenue}`) c,
             (SELECT round(sum(revenue), 2) AS revenue FROM parquet.`{segment_revenue}`) s
        """).first()
    return row.asDict()  # type: ignore[no-any-return]
