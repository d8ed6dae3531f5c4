"""What every command module shares: opening the database, one-line errors, JSON output.

This is the command line's one import of the composition root (``sbroker.broker``): the other
command modules take ``Broker`` from here.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sbroker.broker import Broker
from sbroker.core.errors import BrokerError, DatabaseError
from sbroker.engine.views import STORED_VIEWS as SQL_VIEWS

__all__ = ["SQL_VIEWS", "Broker", "fail_cleanly", "json_default", "open_broker", "require_database"]

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


def open_broker(ctx: click.Context, *, create: bool = False, **options: Any) -> Broker:
    """Open the database named by ``--db`` (or SBROKER_DB). Only commands that set a database
    up (``init``, ``demo``, ``run``) pass ``create=True``: a typo must not make a new file."""
    if not create:
        require_database(ctx)
    return Broker.open(ctx.obj["db"], create=create, **options)


def require_database(ctx: click.Context) -> None:
    """Raise a one-line error when ``--db`` names a file that does not exist."""
    db: str = ctx.obj["db"]
    if db == ":memory:" or ("://" in db and not db.startswith("sqlite:///")):
        return  # Broker.open says what is wrong with it, if anything
    if Path(db.removeprefix("sqlite:///")).exists():
        return
    default = ctx.find_root().get_parameter_source("db") is click.core.ParameterSource.DEFAULT
    where = (f"no broker database {db} in this folder (the default --db)" if default
             else f"no broker database at {db}")
    raise DatabaseError(f"{where}: create it with `sbroker --db {db} init`, or give --db"
                        " (or SBROKER_DB) the path of an existing one")


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for view rows: bytes as text, anything else as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
