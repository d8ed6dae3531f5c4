"""Registering the ``sbroker`` data source with a Spark session.  Imports no pyspark: the data
source classes load only when :func:`register` runs."""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the data source ``sbroker`` with ``spark`` (a classic or a Spark Connect
    session): ``spark.readStream.format("sbroker")``, ``df.writeStream.format("sbroker")``,
    and their batch twins."""
    from sbroker.apps.spark.datasource import BrokerDataSource

    spark.dataSource.register(BrokerDataSource)
