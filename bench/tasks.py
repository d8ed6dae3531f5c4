"""Task functions the scheduler benchmark runs (import path ``bench.tasks:...``)."""

from __future__ import annotations

from typing import Any


def noop(spark: Any) -> None:
    """Does nothing and never touches Spark: measures the scheduler alone."""
    return None
