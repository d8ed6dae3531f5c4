"""What every command module shares: opening the database, one-line errors, JSON output.

This is the command line's one import of the composition root (``sbroker.broker``): the other
command modules take ``Broker`` from here.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from sbroker.broker import SQL_VIEWS, Broker
from sbroker.core.errors import BrokerError

__all__ = ["SQL_VIEWS", "Broker", "fail_cleanly", "json_default", "open_broker"]

F = TypeVar("F", bound=Callable[..., Any])


def fail_cleanly(fn: F) -> F:
    """Turn a BrokerError into one line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokerError as exc:
            click.echo(f"sbroker: error {exc.number}: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def open_broker(ctx: click.Context, **options: Any) -> Broker:
    """Open the database named by ``--db`` (or SBROKER_DB)."""
    return Broker.open(ctx.obj["db"], **options)


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for view rows: bytes as text, anything else as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
