"""Python task targets used by the pipeline tests (called as ``f(spark, **kwargs)``)."""

from __future__ import annotations

from typing import Any


def add(spark: Any, a: int, b: int) -> int:
    """A task that never touches spark."""
    return a + b


def boom(spark: Any, message: str = "boom") -> None:
    """A task that fails."""
    raise RuntimeError(message)


def not_json(spark: Any) -> object:
    """A task whose value cannot travel as JSON."""
    return object()


NOT_CALLABLE = 3
