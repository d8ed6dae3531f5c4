"""Statements about databases, which act on the one open broker database (docs/tsql.md,
"Statements about databases"): USE, CREATE / ALTER / DROP DATABASE."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.apps.tsql.errors import DATABASE_IN_USE, TSqlError
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.tokens import Kind


@statement("USE", "CREATE DATABASE", "ALTER DATABASE", "DROP DATABASE")
@dataclass(frozen=True)
class Database(Statement):
    action: str                 # USE, CREATE, ALTER, DROP
    name: str
    options: tuple[str, ...] = ()

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        action = head.words[0]
        if action == "DROP":
            p.if_exists()
            name = p.name()
            while p.accept_op(","):
                p.name()
            return cls(head.line, head.column, action, name)
        name = p.name()
        if action == "USE":
            return cls(head.line, head.column, action, name)
        words: list[str] = []
        while p.tok.kind is not Kind.EOF and not p.tok.is_op(";") and not (
                p.starts_statement() and not _option_word(action, words, p)):
            words.append(p.advance().value.upper())
        return cls(head.line, head.column, action, name, tuple(words))

    def run(self, frame: Frame) -> None:
        if self.action == "DROP":
            raise TSqlError(f"DROP DATABASE {self.name}: sbroker does not drop the broker"
                            " database it runs on (delete the file, or DROP DATABASE on the"
                            " server)", DATABASE_IN_USE)
        # USE, CREATE DATABASE, ALTER DATABASE ... SET ENABLE_BROKER / SINGLE_USER: the one
        # open broker database is the database, and its broker is always enabled.


def _option_word(action: str, words: list[str], p: Parser) -> bool:
    """Whether a word that begins statements is an option of ALTER DATABASE here:
    ``SET option`` right after the name, ``ROLLBACK`` in ``WITH ROLLBACK IMMEDIATE``."""
    if p.tok.is_word("SET"):
        return action == "ALTER" and not words and p.peek().kind is not Kind.VAR
    return p.tok.is_word("ROLLBACK") and words[-1:] == ["WITH"]
