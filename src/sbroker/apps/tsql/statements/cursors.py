"""Cursors as Service Broker admin scripts use them: DECLARE name CURSOR FOR select, OPEN
(the rows are read then: a static cursor), FETCH NEXT ... INTO with ``@@FETCH_STATUS``,
CLOSE, DEALLOCATE.  GLOBAL cursors (the default) live as long as the session, LOCAL ones
as long as their batch or procedure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import (
    CURSOR_ALREADY_OPEN,
    CURSOR_EXISTS,
    CURSOR_NOT_FOUND,
    CURSOR_NOT_OPEN,
    FETCH_INTO_COUNT,
    TSqlError,
)
from sbroker.apps.tsql.session import Frame, ResultSet
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.tokens import Kind, Token

FETCH_OK, FETCH_END = 0, -1
OPTIONS = ("LOCAL", "GLOBAL", "FORWARD_ONLY", "STATIC", "KEYSET", "DYNAMIC", "FAST_FORWARD",
           "READ_ONLY", "SCROLL_LOCKS", "OPTIMISTIC", "TYPE_WARNING", "INSENSITIVE")


@dataclass
class Cursor:
    """A declared cursor: its SELECT, and while open its rows and the next one's index."""

    query: n.Query
    names: list[str | None] | None = None
    rows: list[list[Any]] | None = None
    next: int = 0


@dataclass(frozen=True)
class DeclareCursor(Statement):
    """DECLARE name [INSENSITIVE] CURSOR [LOCAL | GLOBAL] [options] FOR select [FOR READ
    ONLY] (read by DECLARE's rule): rows are read at OPEN (a static cursor), fetched
    forward only."""
    name: str
    query: n.Query
    local: bool

    @classmethod
    def after_declare(cls, p: Parser, first: Token) -> Statement:
        name = p.name()
        local = False
        while not p.accept_word("FOR"):
            word = p.expect_word("CURSOR", "SCROLL", *OPTIONS).upper
            if word in ("SCROLL", "KEYSET", "DYNAMIC", "SCROLL_LOCKS", "OPTIMISTIC"):
                raise p.unsupported(f"{word} cursors (cursors here are static and forward"
                                    " only)")
            local = local or word == "LOCAL"
        query = p.query()
        if p.accept_word("FOR"):
            if p.tok.is_word("UPDATE"):
                raise p.unsupported("FOR UPDATE cursors")
            p.expect_word("READ")
            p.expect_word("ONLY")
        return cls(first.line, first.column, name, query, local)

    def run(self, frame: Frame) -> None:
        scope = frame.cursors if self.local else frame.session.cursors
        if self.name.lower() in scope:
            raise TSqlError(f"A cursor with the name '{self.name}' already exists.",
                            CURSOR_EXISTS)
        scope[self.name.lower()] = Cursor(self.query)


@statement("OPEN", "FETCH", "CLOSE", "DEALLOCATE")
@dataclass(frozen=True)
class CursorOp(Statement):
    """OPEN / CLOSE / DEALLOCATE [GLOBAL] name; FETCH [NEXT] [FROM] name [INTO @a, ...]."""
    action: str
    name: str
    targets: tuple[str, ...] = ()

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        action = head.words[0]
        targets: list[str] = []
        if action == "FETCH":
            if p.tok.is_word("PRIOR", "FIRST", "LAST", "ABSOLUTE", "RELATIVE"):
                raise p.unsupported(f"FETCH {p.tok.upper} (cursors here are forward only)")
            p.accept_word("NEXT")
            p.accept_word("FROM")
        p.accept_word("GLOBAL")
        if p.tok.kind is Kind.VAR:
            raise p.unsupported("cursor variables")
        name = p.name()
        if action == "FETCH" and p.accept_word("INTO"):
            targets.append(p.variable())
            while p.accept_op(","):
                targets.append(p.variable())
        return cls(head.line, head.column, action, name, tuple(targets))

    def run(self, frame: Frame) -> None:
        key = self.name.lower()
        cursor = frame.cursors.get(key) or frame.session.cursors.get(key)
        if cursor is None:
            raise TSqlError(f"A cursor with the name '{self.name}' does not exist.",
                            CURSOR_NOT_FOUND)
        assert isinstance(cursor, Cursor)
        if self.action == "OPEN":
            _open(frame, cursor)
        elif self.action == "FETCH":
            _fetch(frame, cursor, self.targets)
        elif self.action == "CLOSE":
            if cursor.rows is None:
                raise TSqlError("Cursor is not open.", CURSOR_NOT_OPEN)
            cursor.rows = None
        else:  # DEALLOCATE
            scope = frame.cursors if key in frame.cursors else frame.session.cursors
            del scope[key]


def _open(frame: Frame, cursor: Cursor) -> None:
    if cursor.rows is not None:
        raise TSqlError("The cursor is already open.", CURSOR_ALREADY_OPEN)
    cursor.names, cursor.rows = sqlexec.select_rows(frame, cursor.query)
    cursor.next = 0


def _fetch(frame: Frame, cursor: Cursor, targets: tuple[str, ...]) -> None:
    if cursor.rows is None:
        raise TSqlError("Cursor is not open.", CURSOR_NOT_OPEN)
    session = frame.session
    if cursor.next >= len(cursor.rows):
        session.fetch_status = FETCH_END
        session.rowcount = 0
        return
    row = cursor.rows[cursor.next]
    cursor.next += 1
    session.fetch_status = FETCH_OK
    session.rowcount = 1
    if not targets:
        session.results.append(ResultSet([name or "" for name in cursor.names or []], [row]))
        return
    if len(targets) != len(row):
        raise TSqlError("The number of variables declared in the INTO list must match that"
                        " of selected columns.", FETCH_INTO_COUNT)
    for target, value in zip(targets, row, strict=True):
        frame.assign(target, value)
