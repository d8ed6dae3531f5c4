"""Task functions the scheduler benchmark runs (import path ``bench.tasks:...``)."""

from __future__ import annotations

from typing import Any


def noop(spark: Any) -> None:
    """Does nothing and never touches Spark: measures the scheduler alone."""
    return None


def fail(spark: Any) -> None:
    """Always fails: leaves a run for the resume benchmark to take up."""
    raise RuntimeError("failed on purpose")
