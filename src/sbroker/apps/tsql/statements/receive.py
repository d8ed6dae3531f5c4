"""Reading a queue: RECEIVE, GET CONVERSATION GROUP, and WAITFOR around either, which waits
for messages (for ever, or TIMEOUT milliseconds)."""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import ASSIGN_AND_RETRIEVE, UNDECLARED_TABLE, TSqlError
from sbroker.apps.tsql.session import Frame, ResultSet
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.core.messages import Message

#: The columns of a queue, as SQL Server has them (RECEIVE *, SELECT * FROM a queue).
MESSAGE_COLUMNS = ("status", "priority", "queuing_order", "conversation_group_id",
                   "conversation_handle", "message_sequence_number", "service_name",
                   "service_id", "service_contract_name", "service_contract_id",
                   "message_type_name", "message_type_id", "validation", "message_body",
                   "message_enqueue_time")
_KEPT = tuple(name for name in MESSAGE_COLUMNS if name in Message.__dataclass_fields__)
_KEPT_VALUES = operator.attrgetter(*_KEPT)
_NOT_KEPT = dict.fromkeys(name for name in MESSAGE_COLUMNS if name not in _KEPT)  # the *_id


def _row(msg: Message) -> dict[str, Any]:
    """A received message as RECEIVE's columns (the ids SQL Server numbers are NULL; the
    enqueue time a UTC datetime, as GETDATE() gives)."""
    row = dict(zip(_KEPT, _KEPT_VALUES(msg), strict=True))
    row.update(_NOT_KEPT)
    row["message_enqueue_time"] = dt.datetime.fromtimestamp(
        msg.message_enqueue_time, dt.UTC).replace(tzinfo=None)
    return row


@dataclass(frozen=True)
class Take(Statement):
    """A statement that takes from a queue and may wait (RECEIVE, GET CONVERSATION
    GROUP)."""

    def take(self, frame: Frame, timeout: float | None) -> None:
        raise NotImplementedError

    def run(self, frame: Frame) -> None:
        self.take(frame, 0)


@statement("RECEIVE")
@dataclass(frozen=True)
class Receive(Take):
    """RECEIVE [TOP (n)] columns | @v = column, ... FROM queue [INTO @table] [WHERE
    conversation_handle = ... | conversation_group_id = ...]."""
    top: n.Expr | None
    items: tuple[n.SelectItem, ...]
    queue: str
    into: str | None
    where: tuple[str, n.Expr] | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        top = p.expression() if p.accept_word("TOP") else None
        items = [p.select_item()]
        while p.accept_op(","):
            items.append(p.select_item())
        p.expect_word("FROM")
        queue = p.dotted_name()
        into = p.variable() if p.accept_word("INTO") else None
        where: tuple[str, n.Expr] | None = None
        if p.accept_word("WHERE"):
            column = p.name().lower()
            if column not in ("conversation_handle", "conversation_group_id"):
                raise p.unsupported(f"RECEIVE ... WHERE {column}")
            p.expect_op("=")
            where = (column, p.expression())
        return cls(head.line, head.column, top, tuple(items), queue, into, where)

    def take(self, frame: Frame, timeout: float | None) -> None:
        filters: dict[str, Any] = {}
        if self.where is not None:
            column, expr = self.where
            filters[column] = frame.value(expr)
        top = None if self.top is None else int(frame.value(self.top))
        with frame.session.work() as tx:
            messages = tx.receive(self.queue, top=top, timeout=timeout, **filters)
        frame.session.rowcount = len(messages)
        if messages:
            frame.session.received()
        if any(item.target for item in self.items):
            self._assign(frame, messages)
            return
        columns: list[str] = []
        for item in self.items:
            columns.extend(MESSAGE_COLUMNS if item.expr is None else
                           [item.alias or _column_name(item)])
        rows = [self._values(frame, msg) for msg in messages]
        if self.into is not None:
            _insert_into(frame, self.into, rows)
            return
        frame.session.results.append(ResultSet(columns, rows))

    def _assign(self, frame: Frame, messages: list[Message]) -> None:
        for msg in messages:
            scope = frame.with_row(_row(msg))
            for item in self.items:
                if item.target is None or item.expr is None:
                    raise TSqlError("RECEIVE that assigns variables must assign every"
                                    " column", ASSIGN_AND_RETRIEVE)
                frame.assign(item.target, scope.value(item.expr))

    def _values(self, frame: Frame, msg: Message) -> list[Any]:
        row = _row(msg)
        scope = frame.with_row(row)
        out: list[Any] = []
        for item in self.items:
            out.extend([row[c] for c in MESSAGE_COLUMNS] if item.expr is None
                       else [scope.value(item.expr)])
        return out


def _insert_into(frame: Frame, table: str, rows: list[list[Any]]) -> None:
    """RECEIVE ... INTO @table: each row inserted into the table variable, its columns in
    the order of the RECEIVE's."""
    if table not in frame.tables:
        raise TSqlError(f'Must declare the table variable "@{table}".', UNDECLARED_TABLE)
    for row in rows:
        scope = sqlexec.new_frame(frame.session, frame.procedure)
        scope.tables = frame.tables
        names = [f"c{i}" for i in range(len(row))]
        for name, value in zip(names, row, strict=True):
            scope.types[name] = n.TypeName("SQL_VARIANT")
            scope.vars[name] = value
        sqlexec.run_sql(scope, f"INSERT INTO @{table} VALUES"
                               f" ({', '.join('@' + name for name in names)})")
    frame.session.rowcount = len(rows)


def _column_name(item: n.SelectItem) -> str:
    return item.expr.name if isinstance(item.expr, n.Column) else ""


@statement("GET CONVERSATION GROUP")
@dataclass(frozen=True)
class GetConversationGroup(Take):
    """GET CONVERSATION GROUP @g FROM queue."""
    target: str
    queue: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        target = p.variable()
        p.expect_word("FROM")
        return cls(head.line, head.column, target, p.dotted_name())

    def take(self, frame: Frame, timeout: float | None) -> None:
        with frame.session.work() as tx:
            group = tx.get_conversation_group(self.queue, timeout=timeout)
        frame.assign(self.target, group)
        frame.session.rowcount = 0 if group is None else 1


@statement("WAITFOR (")
@dataclass(frozen=True)
class Waitfor(Statement):
    """WAITFOR (RECEIVE ... | GET CONVERSATION GROUP ...) [, TIMEOUT ms]: none or -1 waits
    for ever."""
    inner: Take
    timeout: n.Expr | None

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.expect_op("(")
        if not p.tok.is_word("RECEIVE", "GET"):
            raise p.unsupported(f"WAITFOR ({p.tok.value.upper()} ...)")
        inner = p.statement()
        assert isinstance(inner, Take)
        p.expect_op(")")
        timeout = None
        if p.accept_op(","):
            p.expect_word("TIMEOUT")
            timeout = p.expression()
        return cls(head.line, head.column, inner, timeout)

    def run(self, frame: Frame) -> None:
        value = frame.value(self.timeout)
        wait = None if value is None or int(value) < 0 else int(value) / 1000.0
        self.inner.take(frame, wait)
