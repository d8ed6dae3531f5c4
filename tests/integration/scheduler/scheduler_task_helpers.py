"""Python task targets of the scheduler tests (called as ``f(spark, **kwargs)``)."""

from __future__ import annotations

from typing import Any


def kaboom(spark: Any, what: str = "kaboom") -> None:
    """A task that fails a call deeper than its own frame."""
    _check(what)


def _check(what: str) -> None:
    raise ValueError(what)
