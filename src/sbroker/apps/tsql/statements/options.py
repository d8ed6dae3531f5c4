"""Option lists of the Service Broker statements, as SQL Server writes them:
``WITH STATUS = ON, ACTIVATION (PROCEDURE_NAME = p, EXECUTE AS SELF)``, and what their
values mean when the statement runs."""

from __future__ import annotations

from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import bad_value
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Parser
from sbroker.apps.tsql.tokens import Kind

#: Words kept upper-cased as option values; other words are names, kept as written.
KEYWORDS = ("ON", "OFF", "ANY", "DEFAULT", "NONE", "SELF", "OWNER", "EMPTY", "WELL_FORMED_XML",
            "DROP")


def option_value(p: Parser) -> Any:
    """A value in an option list: a nested ``( ... )`` list, a string, a number, a
    variable expression, or a word (upper-cased)."""
    if p.tok.is_op("("):
        return options(p)
    tok = p.tok
    if tok.kind is Kind.STRING:
        return p.advance().value
    if tok.kind is Kind.NUMBER or tok.is_op("-") or tok.kind is Kind.VAR:
        return p.expression()
    if tok.kind is Kind.QUOTED:
        return p.dotted_name()
    name = p.dotted_name()
    return name.upper() if name.upper() in KEYWORDS else name


def options(p: Parser) -> dict[str, Any]:
    """``(KEY = value, KEY (...), EXECUTE AS x, ...)`` or the same without parentheses."""
    out: dict[str, Any] = {}
    parens = p.accept_op("(") is not None
    while True:
        if parens and p.accept_op(")"):
            return out
        key = p.name().upper()
        if key == "EXECUTE":
            p.expect_word("AS")
            out[key] = option_value(p)
        elif p.accept_op("="):
            out[key] = option_value(p)
        elif p.tok.is_op("("):
            out[key] = options(p)
        else:
            out[key] = True  # DROP, CLEANUP ...
        if not p.accept_op(","):
            if parens:
                p.expect_op(")")
            return out


def authorization(p: Parser) -> None:
    """``AUTHORIZATION owner``: accepted and ignored (one owner here)."""
    if p.accept_word("AUTHORIZATION"):
        p.name()


def value(frame: Frame, option: Any) -> Any:
    """An option's value when the statement runs: expressions evaluated."""
    return frame.value(option) if isinstance(option, n.Expr) else option


def values(frame: Frame, opts: dict[str, Any]) -> dict[str, Any]:
    return {key: value(frame, option) for key, option in opts.items()}


def on(option: Any, what: str) -> bool:
    """ON / OFF (or 1 / 0) as a bool."""
    if option in ("ON", 1, True):
        return True
    if option in ("OFF", 0, False):
        return False
    raise bad_value(f"{what} must be ON or OFF, not {option!r}")
