"""The statement table: a statement is one class, entered with the keywords that begin it;
the parser reads through the table, and a plain statement ends where a statement of the
table begins."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import sbroker.apps.tsql  # noqa: F401  (enters every statement)
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import SYNTAX, Head, Parser, Statement, Syntax
from sbroker.apps.tsql.statements import catalog, queries, refused
from sbroker.apps.tsql.tokens import tokenize


def test_a_statement_is_one_class_and_a_plain_statement_ends_before_it() -> None:
    table = Syntax()
    ran: list[object] = []

    @table("PING")
    @dataclass(frozen=True)
    class Ping(Statement):
        value: n.Expr

        @classmethod
        def parse(cls, p: Parser, head: Head) -> Statement:
            return cls(head.line, head.column, p.expression())

        def run(self, frame: Frame) -> None:
            ran.append(self.value)

    table("SELECT")(queries.Select)
    text = "select a from t\nping 42 select 1"
    body = Parser(tokenize(text), text, table).batch()
    assert [type(s).__name__ for s in body] == ["Select", "Ping", "Select"]
    assert body[1] == Ping(2, 1, n.Literal(42))
    assert isinstance(body[0], queries.Select) and body[0].query.sql == "select a from t"


def test_the_longest_syntax_wins_and_lookahead_is_not_consumed() -> None:
    table = Syntax()

    @table("GIVE", "GIVE @", "GIVE ME (")
    @dataclass(frozen=True)
    class Give(Statement):
        words: tuple[str, ...]
        next_value: str

        @classmethod
        def parse(cls, p: Parser, head: Head) -> Statement:
            return cls(head.line, head.column, head.words, p.advance().value)

    def first(text: str) -> Statement | None:
        return Parser(tokenize(text), text, table).statement()

    assert first("give x") == Give(1, 1, ("GIVE",), "x")
    assert first("give @v") == Give(1, 1, ("GIVE",), "@v")
    assert first("give me (1)") == Give(1, 1, ("GIVE", "ME"), "(")
    with pytest.raises(ValueError, match="GIVE ME \\( is already a statement"):
        table("GIVE ME (")(Give)


def test_every_statement_of_the_table_parses_and_runs() -> None:
    classes = SYNTAX.classes()
    assert len(classes) > 40
    for cls in classes - {refused.Unsupported, refused.BulkInsert, catalog.AlterContract}:
        assert cls.parse is not Statement.parse, cls
        assert cls.run is not Statement.run, cls
