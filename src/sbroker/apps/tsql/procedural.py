"""Rules of the procedural statements: DECLARE, SET, IF, WHILE, BEGIN ... END, TRY/CATCH,
RAISERROR, THROW, RETURN, PRINT, transactions, EXEC, WAITFOR DELAY, procedures, databases."""

from __future__ import annotations

from sbroker.apps.tsql import ddl, sbparse
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import REFUSED
from sbroker.apps.tsql.grammar import SET_OPS, STARTS, Parser, Rule
from sbroker.apps.tsql.tokens import Kind, Token

#: Procedures that reach outside the database: refused by name.
REFUSED_PROCEDURES = ("xp_cmdshell", "sp_configure", "sp_addlinkedserver", "sp_oacreate",
                      "sp_oamethod", "xp_dirtree", "xp_fileexist", "xp_regread")


CURSOR_OPTIONS = ("LOCAL", "GLOBAL", "FORWARD_ONLY", "STATIC", "KEYSET", "DYNAMIC",
                  "FAST_FORWARD", "READ_ONLY", "SCROLL_LOCKS", "OPTIMISTIC", "TYPE_WARNING",
                  "INSENSITIVE")


def declare_cursor(p: Parser, first: Token) -> n.Stmt:
    """``DECLARE name [INSENSITIVE] CURSOR [options] FOR select [FOR READ ONLY]``: rows are
    read at OPEN (a static cursor), fetched forward only."""
    name = p.name()
    local = False
    while not p.accept_word("FOR"):
        word = p.expect_word("CURSOR", "SCROLL", *CURSOR_OPTIONS).upper
        if word in ("SCROLL", "KEYSET", "DYNAMIC", "SCROLL_LOCKS", "OPTIMISTIC"):
            raise p.unsupported(f"{word} cursors (cursors here are static and forward only)")
        local = local or word == "LOCAL"
    select = p.subquery()
    if p.accept_word("FOR"):
        if p.tok.is_word("UPDATE"):
            raise p.unsupported("FOR UPDATE cursors")
        p.expect_word("READ")
        p.expect_word("ONLY")
    return n.DeclareCursor(first.line, first.column, name, select, local)


def cursor_statement(p: Parser) -> n.Stmt:
    """OPEN / CLOSE / DEALLOCATE [GLOBAL] name, FETCH [NEXT] [FROM] name [INTO @a, ...]."""
    first = p.advance()
    action = first.upper
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
    return n.CursorOp(first.line, first.column, action, name, tuple(targets))


def declare(p: Parser) -> n.Stmt:
    first = p.advance()
    if p.tok.kind in (Kind.WORD, Kind.QUOTED) and (
            p.peek().is_word("CURSOR", "INSENSITIVE", "SCROLL")):
        return declare_cursor(p, first)
    if (p.tok.kind is Kind.VAR and p.peek().is_word("TABLE")) or (
            p.tok.kind is Kind.VAR and p.peek().is_word("AS") and p.peek(2).is_word("TABLE")):
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
        return n.DeclareTable(first.line, first.column, name, p.span(start, p.pos))
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
            return n.Declare(first.line, first.column, tuple(items))


def set_statement(p: Parser) -> n.Stmt:
    first = p.advance()
    if p.tok.kind is Kind.VAR:
        name = p.variable()
        if not p.tok.is_op(*SET_OPS):
            raise p.error("expected = after SET @variable")
        op = p.advance().value
        return n.SetVar(first.line, first.column, name, op, p.expression())
    option = p.name().upper()
    if option == "TRANSACTION":
        start = p.pos
        while not (p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.tok.upper in STARTS):
            p.advance()
        return n.SetOption(first.line, first.column, option, p.span(start, p.pos))
    names = [option]
    while p.accept_op(","):
        names.append(p.name().upper())
    value = p.advance()
    if value.kind is Kind.EOF:
        raise p.error("expected ON or OFF")
    for name in names:  # SET ANSI_NULLS, QUOTED_IDENTIFIER ON sets both
        last = n.SetOption(first.line, first.column, name, value.value.upper())
    return last


def if_statement(p: Parser) -> n.Stmt:
    first = p.advance()
    condition = p.expression()
    then = _required(p)
    otherwise = _required(p) if p.accept_word("ELSE") else None
    return n.If(first.line, first.column, condition, then, otherwise)


def while_statement(p: Parser) -> n.Stmt:
    first = p.advance()
    condition = p.expression()
    return n.While(first.line, first.column, condition, _required(p))


def _required(p: Parser) -> n.Stmt:
    while p.accept_op(";"):
        pass
    stmt = p.statement()
    if stmt is None:
        raise p.error("expected a statement")
    return stmt


def begin(p: Parser) -> n.Stmt | None:
    nxt = p.peek()
    if nxt.is_word("TRY"):
        return _try_catch(p)
    if nxt.is_word("TRAN", "TRANSACTION"):
        first = p.advance()
        p.advance()
        if p.tok.kind in (Kind.WORD, Kind.VAR) and p.tok.upper not in STARTS:
            p.advance()
        return n.TranControl(first.line, first.column, "BEGIN")
    if nxt.is_word("DISTRIBUTED"):
        raise p.unsupported("BEGIN DISTRIBUTED TRANSACTION")
    rule = sbparse.BEGIN_RULES.get(nxt.upper)
    if rule is not None:
        return rule(p)
    first = p.advance()
    body = p.block_until()
    p.expect_word("END")
    return n.Block(first.line, first.column, body)


def _try_catch(p: Parser) -> n.Stmt:
    first = p.advance()
    p.advance()
    body = p.block_until("TRY")
    p.advance()
    p.advance()
    p.accept_op(";")
    p.expect_word("BEGIN")
    p.expect_word("CATCH")
    handler = p.block_until("CATCH")
    p.advance()
    p.advance()
    return n.TryCatch(first.line, first.column, body, handler)


def simple(p: Parser) -> n.Stmt:
    first = p.advance()
    word = first.upper
    if word == "BREAK":
        return n.Break(first.line, first.column)
    if word == "CONTINUE":
        return n.Continue(first.line, first.column)
    if word == "PRINT":
        return n.Print(first.line, first.column, p.expression())
    value = None  # RETURN [value]
    if p.tok.kind in (Kind.VAR, Kind.NUMBER, Kind.SYSVAR, Kind.STRING) or p.tok.is_op("(", "-"):
        value = p.expression()
    return n.Return(first.line, first.column, value)


def transaction(p: Parser) -> n.Stmt:
    first = p.advance()
    p.accept_word("TRAN", "TRANSACTION", "WORK")
    if p.tok.kind in (Kind.WORD, Kind.VAR) and p.tok.upper not in STARTS:
        p.advance()
    return n.TranControl(first.line, first.column, first.upper)


def raiserror(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_op("(")
    args = [p.expression()]
    while p.accept_op(","):
        args.append(p.expression())
    p.expect_op(")")
    if len(args) < 3:
        raise p.error("RAISERROR needs a message, a severity and a state")
    if p.accept_word("WITH"):
        p.expect_word("LOG", "NOWAIT", "SETERROR")
        while p.accept_op(","):
            p.expect_word("LOG", "NOWAIT", "SETERROR")
    return n.Raiserror(first.line, first.column, args[0], args[1], args[2], tuple(args[3:]))


def throw(p: Parser) -> n.Stmt:
    first = p.advance()
    if p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.tok.upper in STARTS:
        return n.Throw(first.line, first.column, None, None, None)
    number = p.expression()
    p.expect_op(",")
    message = p.expression()
    p.expect_op(",")
    return n.Throw(first.line, first.column, number, message, p.expression())


def execute(p: Parser) -> n.Stmt:
    first = p.advance()
    if p.accept_op("("):
        sql = p.expression()
        p.expect_op(")")
        if p.tok.is_word("AT"):
            raise p.error("EXEC ... AT a linked server is refused", number=REFUSED)
        return n.ExecDynamic(first.line, first.column, sql)
    result = None
    if p.tok.kind is Kind.VAR and p.peek().is_op("="):
        result = p.variable()
        p.advance()
    name_tok = p.tok
    parts = [p.name()]
    while p.accept_op("."):
        parts.append(p.name())
    name = parts[-1]
    if len(parts) >= 4:
        raise p.error("a procedure on a linked server is refused", name_tok, number=REFUSED)
    if name.lower() in REFUSED_PROCEDURES:
        raise p.error(f"{name} reaches outside the database and is refused", name_tok,
                      number=REFUSED)
    args = _exec_args(p)
    if name.lower() == "sp_executesql":
        if not args or len(args) > 1:
            raise p.unsupported("sp_executesql with parameters", name_tok)
        return n.ExecDynamic(first.line, first.column, args[0].value)
    return n.ExecProc(first.line, first.column, name, tuple(args), result)


def _exec_args(p: Parser) -> list[n.ExecArg]:
    args: list[n.ExecArg] = []
    if p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.tok.upper in STARTS:
        return args
    while True:
        name = None
        if p.tok.kind is Kind.VAR and p.peek().is_op("="):
            name = p.variable()
            p.advance()
        if p.tok.kind is Kind.WORD and p.tok.upper not in ("NULL", "DEFAULT") and not (
                p.peek().is_op("(")):
            value: n.Expr = n.Literal(p.advance().value)  # a bare word is a string
        elif p.accept_word("DEFAULT"):
            value = n.Call("DEFAULT", ())
        else:
            value = p.expression()
        output = p.accept_word("OUTPUT", "OUT") is not None
        args.append(n.ExecArg(name, value, output))
        if not p.accept_op(","):
            return args


def waitfor(p: Parser) -> n.Stmt:
    if p.peek().is_op("("):
        return sbparse.waitfor_receive(p)
    first = p.advance()
    kind = p.expect_word("DELAY", "TIME")
    return n.WaitforDelay(first.line, first.column, p.expression(), kind.upper == "TIME")


RULES: dict[str, Rule] = {
    "DECLARE": declare, "SET": set_statement, "IF": if_statement,
    "WHILE": while_statement, "BEGIN": begin, "BREAK": simple, "CONTINUE": simple,
    "RETURN": simple, "PRINT": simple, "COMMIT": transaction, "ROLLBACK": transaction,
    "RAISERROR": raiserror, "THROW": throw, "EXEC": execute, "EXECUTE": execute,
    "WAITFOR": waitfor, "OPEN": cursor_statement, "FETCH": cursor_statement,
    "CLOSE": cursor_statement, "DEALLOCATE": cursor_statement, **ddl.RULES,
}
