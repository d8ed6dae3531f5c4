"""SQL on the user's own tables: SELECT (a result set, or assignments to variables) and the
plain statements translated by sqlglot and run on the backend (INSERT, UPDATE, DELETE,
MERGE, TRUNCATE, a CTE's statement, CREATE / ALTER / DROP of tables, indexes and views)."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement

#: Objects of the user's that CREATE / ALTER / DROP hand to the backend.
PLAIN_OBJECTS = ("TABLE", "INDEX", "UNIQUE", "CLUSTERED", "NONCLUSTERED", "VIEW")


@statement("SELECT")
@dataclass(frozen=True)
class Select(Statement):
    query: n.Query

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.pos = head.start
        return cls(head.line, head.column, p.query())

    def run(self, frame: Frame) -> None:
        result = sqlexec.run_select(frame, self.query)
        if result is not None:
            frame.session.results.append(result)


@statement("INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE TABLE",
           "WITH name AS (", "WITH name (",
           *(f"{verb} {kind}" for verb in ("CREATE", "ALTER", "CREATE OR ALTER", "DROP")
             for kind in PLAIN_OBJECTS))
@dataclass(frozen=True)
class PlainSql(Statement):
    """A statement sent to the database after translation."""
    sql: str
    verb: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.pos = head.start + 1
        end = p.scan_to_end(head.words[0])
        return cls(head.line, head.column, p.span(head.start, end), head.words[0])

    def run(self, frame: Frame) -> None:
        result = sqlexec.run_sql(frame, self.sql)
        if result is not None:
            frame.session.results.append(result)
