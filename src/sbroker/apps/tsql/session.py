"""A T-SQL session (one connection, as SQL Server sees it): its SPID, its explicit
transaction, ``@@ROWCOUNT`` / ``SCOPE_IDENTITY()``, where PRINT goes, the result sets; and a
frame per batch or procedure call with its variables."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from types import TracebackType
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import values
from sbroker.apps.tsql.errors import (
    NO_BEGIN_FOR_COMMIT,
    NO_BEGIN_FOR_ROLLBACK,
    UNDECLARED,
    TSqlError,
    unsupported,
)
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.engine.transaction import Transaction

#: Seconds a session trusts its list of queues without looking at the catalog again (as the
#: engine's statements trust theirs).
CATALOG_AGE = 0.05


@dataclass
class ResultSet:
    """One result set: column names and rows (lists, in column order)."""

    columns: list[str]
    rows: list[list[Any]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class _Work:
    """``with session.work() as tx``: a plain context manager (every statement of a loop
    enters one, so it is kept cheaper than a generator's)."""

    __slots__ = ("own", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.own: Transaction | None = None

    def __enter__(self) -> Transaction:
        tx = self.session.tx
        if tx is not None:
            return tx
        self.own = self.session.broker.transaction()
        return self.own

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.own is not None:
            self.own.__exit__(exc_type, exc, tb)


class Session:
    """What lives as long as the connection: the broker, the SPID, the explicit transaction,
    the output of PRINT and the result sets."""

    def __init__(self, broker: TSqlBroker, *, spid: int,
                 out: Callable[[str], None] | None = None,
                 stopping: threading.Event | None = None,
                 received: Callable[[], None] | None = None) -> None:
        self.broker = broker
        self.spid = spid
        self.out = out or (lambda text: None)
        self.stopping = stopping or threading.Event()
        self.received = received or (lambda: None)  # a RECEIVE returned messages
        self.tx: Transaction | None = None
        self.trancount = 0
        self.rowcount = 0
        self.identity: Any = None
        self.error_number = 0
        self.xact_abort = False
        self.nocount = False
        self.results: list[ResultSet] = []
        self.tables: list[str] = []  # tables that hold table variables, dropped on close
        self.cursors: dict[str, Any] = {}  # GLOBAL cursors by lower-cased name
        self.fetch_status = -1
        self._wake = threading.Condition()
        self._queues: tuple[tuple[str, int], ...] | None = None
        self._queues_at = 0.0

    # -- transactions ---------------------------------------------------------------------
    def work(self) -> _Work:
        """The explicit transaction when one is open; otherwise a transaction of its own
        for this statement (autocommit), committed when the statement succeeds."""
        return _Work(self)

    def begin(self) -> None:
        if self.tx is None:
            self.tx = self.broker.transaction()
        self.trancount += 1

    def commit(self) -> None:
        if self.tx is None:
            raise TSqlError("The COMMIT TRANSACTION request has no corresponding BEGIN"
                            " TRANSACTION.", NO_BEGIN_FOR_COMMIT)
        self.trancount -= 1
        if self.trancount == 0:
            tx, self.tx = self.tx, None
            tx.commit()

    def rollback(self) -> None:
        if self.tx is None:
            raise TSqlError("The ROLLBACK TRANSACTION request has no corresponding BEGIN"
                            " TRANSACTION.", NO_BEGIN_FOR_ROLLBACK)
        tx, self.tx = self.tx, None
        self.trancount = 0
        tx.rollback()

    def close(self) -> None:
        """A connection that closes with a transaction open rolls it back."""
        if self.tx is not None:
            self.rollback()

    # -- names -------------------------------------------------------------------------------
    def queues(self) -> tuple[tuple[str, int], ...]:
        """The broker's queues (lower-cased name, id), which plain SQL may read as tables:
        looked up again when older than ``CATALOG_AGE`` seconds or after this session
        changed a queue (another process's new queue shows within that age)."""
        clock = self.broker.clock
        if self._queues is None or clock.monotonic() - self._queues_at > CATALOG_AGE:
            self._queues = tuple(sorted((name.lower(), queue.queue_id)
                                        for name, queue in self.broker.catalog.queues.items()))
            self._queues_at = clock.monotonic()
        return self._queues

    def queues_changed(self) -> None:
        """This session created, altered or dropped a queue: look again next time."""
        self._queues = None

    # -- time -----------------------------------------------------------------------------
    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.broker.clock.now(), dt.UTC).replace(tzinfo=None)

    def sleep(self, seconds: float) -> None:
        """WAITFOR DELAY on the broker's clock; returns early when the session is asked to
        stop (an activated procedure while the broker stops)."""
        clock = self.broker.clock
        deadline = clock.monotonic() + seconds
        with self._wake:
            while clock.monotonic() < deadline and not self.stopping.is_set():
                clock.wait(self._wake, deadline)

    # -- values bound to SQL ------------------------------------------------------------------
    def special(self, name: str) -> Any:
        """The value of a placeholder that stands for an @@ value or a function."""
        if name == "f_now":
            return self.now()
        if name == "f_newid":
            return str(uuid.uuid4()).upper()
        if name == "f_scope_identity":
            return self.identity
        if name == "f_db_id":
            return 1
        if name == "f_db_name":
            return "sbroker"
        return self.sysvar(name[2:].upper())

    def sysvar(self, name: str) -> Any:
        if name == "SPID":
            return self.spid
        if name == "ROWCOUNT":
            return self.rowcount
        if name == "TRANCOUNT":
            return self.trancount
        if name == "ERROR":
            return self.error_number
        if name == "IDENTITY":
            return self.identity
        if name == "FETCH_STATUS":
            return self.fetch_status
        if name == "XACT_STATE":
            return 1 if self.tx is not None else 0
        if name in ("VERSION", "SERVERNAME", "SERVICENAME"):
            return "sbroker"
        raise unsupported(f"@@{name}")


def bindable(value: Any) -> Any:
    """A Python value as both database drivers take it."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, uuid.UUID):
        return str(value).upper()
    return value


def readable(value: Any) -> Any:
    """A value read from the database as T-SQL shows it (UUIDs as text, memoryview as
    bytes)."""
    if isinstance(value, uuid.UUID):
        return str(value).upper()
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@dataclass
class Frame:
    """Variables of one batch or procedure call, the errors its CATCH blocks handle, and the
    tables that hold its table variables."""

    session: Session
    procedure: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    types: dict[str, n.TypeName] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    handling: list[TSqlError] = field(default_factory=list)
    row: dict[str, Any] | None = None
    subquery_runner: Callable[[Frame, n.Query], Any] | None = None
    exists_runner: Callable[[Frame, n.Query], bool] | None = None
    object_runner: Callable[[Frame, str], int | None] | None = None
    cursors: dict[str, Any] = field(default_factory=dict)  # LOCAL cursors

    def declare(self, name: str, type_name: n.TypeName, value: Any = None) -> None:
        self.types[name] = type_name
        self.vars[name] = None
        if value is not None:
            self.assign(name, value)

    def value(self, expr: n.Expr | None) -> Any:
        """The value of ``expr`` here (None for a part the statement left out)."""
        return None if expr is None else evaluate(expr, self)

    def assign(self, name: str, value: Any) -> None:
        type_name = self.types.get(name)
        if type_name is None:
            raise TSqlError(f'Must declare the scalar variable "@{name}".', UNDECLARED)
        length = type_name.args[0] if type_name.args else None
        self.vars[name] = values.convert(value, type_name.name, length)

    # -- evaluate.Scope -------------------------------------------------------------------------
    def variable(self, name: str) -> Any:
        if name not in self.types:
            raise TSqlError(f'Must declare the scalar variable "@{name}".', UNDECLARED)
        return self.vars[name]

    def sysvar(self, name: str) -> Any:
        return self.session.sysvar(name)

    def caught(self) -> TSqlError | None:
        return self.handling[-1] if self.handling else None

    def now(self) -> dt.datetime:
        return self.session.now()

    def scope_identity(self) -> Any:
        return self.session.identity

    def subquery(self, select: n.Query) -> Any:
        assert self.subquery_runner is not None
        return self.subquery_runner(self, select)

    def exists(self, select: n.Query) -> bool:
        assert self.exists_runner is not None
        return self.exists_runner(self, select)

    def object_id(self, name: str) -> int | None:
        assert self.object_runner is not None
        return self.object_runner(self, name)

    def with_row(self, row: dict[str, Any]) -> Frame:
        """The same variables, with the columns of ``row`` in scope (RECEIVE)."""
        return Frame(self.session, self.procedure, self.vars, self.types, self.tables,
                     self.handling, row, self.subquery_runner, self.exists_runner,
                     self.object_runner)
