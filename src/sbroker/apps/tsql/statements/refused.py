"""Statements sbroker does not run, named so that an error says which (and so that a plain
statement before one ends where it begins)."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.apps.tsql.errors import REFUSED
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement


@statement("GOTO", "GRANT", "DENY", "REVOKE", "DBCC", "KILL", "SHUTDOWN", "BACKUP", "RESTORE",
           "CHECKPOINT", "RECONFIGURE", "SAVE TRAN", "SAVE TRANSACTION", "REVERT",
           "SETUSER", "BEGIN DISTRIBUTED TRAN", "BEGIN DISTRIBUTED TRANSACTION",
           "CREATE FUNCTION", "CREATE TRIGGER", "CREATE TYPE", "CREATE SCHEMA",
           "CREATE CERTIFICATE", "CREATE LOGIN", "CREATE USER", "CREATE MASTER")
@dataclass(frozen=True)
class Unsupported(Statement):
    """Raises at parse time: the statement is not supported."""

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        what = " ".join(head.words)
        raise p.unsupported(what if len(head.words) > 1 else f"the statement {what}",
                            head.first)


@statement("BULK INSERT")
@dataclass(frozen=True)
class BulkInsert(Statement):
    """Refused: it reads files outside the database."""

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        raise p.error("BULK INSERT reads files outside the database and is refused",
                      head.first, number=REFUSED)
