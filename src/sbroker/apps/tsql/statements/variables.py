"""Variables and session options: DECLARE (scalars, table variables, cursors), SET @variable,
SET option."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sbroker.apps.sql import statements
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import unsupported
from sbroker.apps.tsql.grammar import SET_OPS
from sbroker.apps.tsql.session import Frame, Session
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.cursors import DeclareCursor
from sbroker.apps.tsql.tokens import Kind, Token

#: SET options accepted; the ones sbroker acts on are XACT_ABORT and NOCOUNT.
SET_OPTIONS = frozenset((
    "XACT_ABORT", "NOCOUNT", "ANSI_NULLS", "QUOTED_IDENTIFIER", "ANSI_WARNINGS", "ARITHABORT",
    "ANSI_PADDING", "CONCAT_NULL_YIELDS_NULL", "NUMERIC_ROUNDABORT", "TRANSACTION",
    "DEADLOCK_PRIORITY", "LOCK_TIMEOUT", "DATEFORMAT", "ANSI_NULL_DFLT_ON", "IMPLICIT_TRANSACTIONS",
))
_table_numbers = itertools.count(1)


@statement("DECLARE")
@dataclass(frozen=True)
class Declare(Statement):
    """DECLARE @a type [= value], ...; its rule also reads DECLARE @t TABLE (...) and
    DECLARE name CURSOR ...."""
    items: tuple[tuple[str, n.TypeName, n.Expr | None], ...]

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if p.tok.kind in (Kind.WORD, Kind.QUOTED) and (
                p.peek().is_word("CURSOR", "INSENSITIVE", "SCROLL")):
            return DeclareCursor.after_declare(p, head.first)
        if p.tok.kind is Kind.VAR and (p.peek().is_word("TABLE") or (
                p.peek().is_word("AS") and p.peek(2).is_word("TABLE"))):
            return DeclareTable.after_declare(p, head.first)
        items = []
        while True:
            name = p.variable()
            p.accept_word("AS")
            if p.tok.is_word("CURSOR"):
                raise p.unsupported("cursor variables")
            type_name = p.type_name()
            value = p.expression() if p.accept_op("=") else None
            items.append((name, type_name, value))
            if not p.accept_op(","):
                return cls(head.line, head.column, tuple(items))

    def run(self, frame: Frame) -> None:
        for name, type_name, value in self.items:
            frame.declare(name, type_name, frame.value(value))


@dataclass(frozen=True)
class DeclareTable(Statement):
    """DECLARE @t [AS] TABLE (...): a table of the database that holds the variable's rows
    until the session ends."""
    name: str
    columns_sql: str            # the column list as T-SQL, "(a int, b nvarchar(10))"

    @classmethod
    def after_declare(cls, p: Parser, first: Token) -> Statement:
        name = p.variable()
        p.accept_word("AS")
        p.advance()
        start = p.pos
        p.expect_op("(")
        depth = 1
        while depth:
            tok = p.advance()
            if tok.kind is Kind.EOF:
                raise p.error("unterminated table definition")
            depth += tok.is_op("(") - tok.is_op(")")
        return cls(first.line, first.column, name, p.span(start, p.pos))

    def run(self, frame: Frame) -> None:
        session = frame.session
        table = f"tsql_tv_{session.spid}_{next(_table_numbers)}"
        sqlexec.run_sql(frame, f"CREATE TABLE {table} {self.columns_sql}")
        frame.tables[self.name] = table
        session.tables.append(table)


@statement("SET @")
@dataclass(frozen=True)
class SetVar(Statement):
    name: str
    op: str                     # "=" or "+=" ...
    value: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.variable()
        if not p.tok.is_op(*SET_OPS):
            raise p.error("expected = after SET @variable")
        op = p.advance().value
        return cls(head.line, head.column, name, op, p.expression())

    def run(self, frame: Frame) -> None:
        value = frame.value(self.value)
        if self.op != "=":
            value = frame.value(n.Binary(self.op[0], n.Literal(frame.variable(self.name)),
                                         n.Literal(value)))
        frame.assign(self.name, value)


@statement("SET")
@dataclass(frozen=True)
class SetOption(Statement):
    options: tuple[str, ...]    # XACT_ABORT, NOCOUNT, ... (SET A, B ON sets both)
    value: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        option = p.name().upper()
        if option == "TRANSACTION":
            start = p.pos
            while not (p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.starts_statement()):
                p.advance()
            return cls(head.line, head.column, (option,), p.span(start, p.pos))
        names = [option]
        while p.accept_op(","):
            names.append(p.name().upper())
        value = p.advance()
        if value.kind is Kind.EOF:
            raise p.error("expected ON or OFF")
        return cls(head.line, head.column, tuple(names), value.value.upper())

    def run(self, frame: Frame) -> None:
        for option in self.options:
            if option not in SET_OPTIONS:
                raise unsupported(f"SET {option}")
            if option == "XACT_ABORT":
                frame.session.xact_abort = self.value == "ON"
            elif option == "NOCOUNT":
                frame.session.nocount = self.value == "ON"


def _spid_of(table: str) -> int | None:
    """The SPID in a table variable's table name ``tsql_tv_<spid>_<n>``, else None."""
    spid, _, number = table.removeprefix("tsql_tv_").partition("_")
    return int(spid) if spid.isdigit() and number.isdigit() else None


def sweep_table_variables(session: Session) -> int:
    """Drop the tables of table variables whose session's process is gone (a process that
    crashed could not drop them); how many it dropped."""
    broker = session.broker
    queries = statements(broker, "sbroker.apps.tsql")
    with broker.transaction() as tx:
        tables = [str(row[0]) for row in tx.execute(queries["table_variable_tables"], ())]
    owned = {table: _spid_of(table) for table in tables}
    if not any(spid is not None for spid in owned.values()):
        return 0
    alive = {int(row["session_id"]) for row in broker.view("dm_broker_sessions")}  # reaps
    dead = [t for t, spid in owned.items() if spid is not None and spid // 100000 not in alive]
    for table in dead:
        with broker.transaction() as tx:
            tx.execute(f"DROP TABLE IF EXISTS {table}", ())
    return len(dead)
