"""Rules of CREATE / ALTER / DROP / USE: procedures, the user's tables, indexes and views
(plain SQL), databases, and the Service Broker objects (``sbparse``)."""

from __future__ import annotations

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sbparse
from sbroker.apps.tsql.grammar import Parser, Rule
from sbroker.apps.tsql.tokens import Kind, Token

PLAIN_OBJECTS = ("TABLE", "INDEX", "UNIQUE", "CLUSTERED", "NONCLUSTERED", "VIEW")


def create_or_alter(p: Parser) -> n.Stmt:
    first = p.tok
    start = p.pos
    p.advance()
    action = first.upper
    if action == "CREATE" and p.tok.is_word("OR") and p.peek().is_word("ALTER"):
        p.advance()
        p.advance()
        action = "ALTER"
    kind = p.tok
    if kind.is_word("PROCEDURE", "PROC"):
        p.advance()
        return _procedure(p, first, start, alter=action == "ALTER")
    if kind.is_word("DATABASE"):
        p.advance()
        name = p.name()
        options = _rest_words(p)
        return n.Database(first.line, first.column, action, name, options)
    if kind.is_word(*PLAIN_OBJECTS):
        p.pos = start
        return p.plain()
    rule = sbparse.DDL.get(_object_kind(p))
    if rule is None:
        raise p.unsupported(f"{action} {kind.value.upper()}")
    return rule(p, first, action)


def _object_kind(p: Parser) -> str:
    """The object kind after CREATE/ALTER/DROP: one word, or two for MESSAGE TYPE,
    BROKER PRIORITY, EVENT NOTIFICATION (consumed when known)."""
    word = p.tok.upper
    pair = f"{word} {p.peek().upper}"
    if pair in sbparse.DDL:
        p.advance()
        p.advance()
        return pair
    if word in sbparse.DDL:
        p.advance()
        return word
    return word


def _procedure(p: Parser, first: Token, start: int, *, alter: bool) -> n.Stmt:
    name = p.dotted_name()
    params = []
    parens = p.accept_op("(") is not None
    while p.tok.kind is Kind.VAR:
        pname = p.variable()
        p.accept_word("AS")
        type_name = p.type_name()
        default = p.expression() if p.accept_op("=") else None
        output = p.accept_word("OUTPUT", "OUT") is not None
        p.accept_word("READONLY")
        params.append(n.Param(pname, type_name, default, output))
        if not p.accept_op(","):
            break
    if parens:
        p.expect_op(")")
    if p.accept_word("WITH"):
        while not p.tok.is_word("AS") and p.tok.kind is not Kind.EOF:
            p.advance()
    p.expect_word("AS")
    body = p.batch()
    return n.CreateProcedure(first.line, first.column, name, tuple(params), body, alter,
                             p.span(start, p.pos))


def _rest_words(p: Parser) -> tuple[str, ...]:
    """The rest of a database statement (its options), as upper-cased words."""
    words = []
    while p.tok.kind is not Kind.EOF and not p.tok.is_op(";") and not (
            p.tok.is_word("USE", "CREATE", "DROP", "IF", "ALTER", "GO") and p.tok.newline_before):
        words.append(p.advance().value.upper())
    return tuple(words)


def drop(p: Parser) -> n.Stmt:
    first = p.tok
    start = p.pos
    p.advance()
    if p.tok.is_word(*PLAIN_OBJECTS):
        p.pos = start
        return p.plain()
    if p.accept_word("DATABASE"):
        p.accept_word("IF") and p.expect_word("EXISTS")
        names = [p.name()]
        while p.accept_op(","):
            names.append(p.name())
        return n.Database(first.line, first.column, "DROP", names[0])
    if p.accept_word("PROCEDURE", "PROC"):
        kind = "PROCEDURE"
    else:
        kind = _object_kind(p)
        if kind not in sbparse.DDL:
            raise p.unsupported(f"DROP {p.tok.value.upper()}")
    if_exists = False
    if p.tok.is_word("IF") and p.peek().is_word("EXISTS"):
        p.advance()
        p.advance()
        if_exists = True
    names = [p.dotted_name() if kind != "ENDPOINT" else p.name()]
    while kind == "PROCEDURE" and p.accept_op(","):
        names.append(p.dotted_name())
    if kind == "EVENT NOTIFICATION" and p.accept_word("ON"):
        p.expect_word("QUEUE")
        p.dotted_name()
    return n.DropObject(first.line, first.column, kind, tuple(names), if_exists)


def use(p: Parser) -> n.Stmt:
    first = p.advance()
    return n.Database(first.line, first.column, "USE", p.name())


def bulk(p: Parser) -> n.Stmt:
    raise p.error("BULK INSERT reads files outside the database and is refused", number=15281)


RULES: dict[str, Rule] = {
    "CREATE": create_or_alter, "ALTER": create_or_alter, "DROP": drop, "USE": use,
    "BULK": bulk,
}
