"""The T-SQL parser: the statement table (leading keyword -> rule) assembled from the
grammar's base rules, the procedural rules and the Service Broker rules."""

from __future__ import annotations

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import procedural, sbparse
from sbroker.apps.tsql.grammar import Parser, Rule
from sbroker.apps.tsql.tokens import Token, tokenize

RULES: dict[str, Rule] = {
    "SELECT": Parser.select,
    "INSERT": Parser.plain, "UPDATE": Parser.plain, "DELETE": Parser.plain,
    "MERGE": Parser.plain, "TRUNCATE": Parser.plain, "WITH": Parser.plain,
    **procedural.RULES,
    **sbparse.RULES,
}


def parse(text: str, tokens: list[Token] | None = None) -> tuple[n.Stmt, ...]:
    """The statements of one batch of T-SQL (its tokens, when already split from a script)."""
    return Parser(tokens if tokens is not None else tokenize(text), text, RULES).batch()
