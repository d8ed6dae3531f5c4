"""Stored procedures and EXEC: CREATE / ALTER / DROP PROCEDURE keep a procedure's text in
the broker database (by lower-cased name); EXEC runs one with positional, named, OUTPUT and
default arguments; EXEC (@sql) and sp_executesql run text through the same interpreter."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from sbroker.apps.sql import statements
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec, values
from sbroker.apps.tsql.errors import (
    DROP_MISSING,
    MISSING_PARAMETER,
    NO_PROCEDURE,
    NOT_A_PARAMETER,
    OBJECT_EXISTS,
    REFUSED,
    TOO_MANY_ARGUMENTS,
    TSqlError,
)
from sbroker.apps.tsql.session import Frame, Session
from sbroker.apps.tsql.statement import Head, Parser, Return, Statement, parse, run, statement
from sbroker.apps.tsql.tokens import Kind

#: Procedures that reach outside the database: refused by name.
REFUSED_PROCEDURES = ("xp_cmdshell", "sp_configure", "sp_addlinkedserver", "sp_oacreate",
                      "sp_oamethod", "xp_dirtree", "xp_fileexist", "xp_regread")
PROCEDURE = ("PROCEDURE", "PROC")


@functools.lru_cache(maxsize=256)
def parse_text(text: str) -> tuple[Statement, ...]:
    """A batch's statements, parsed once per text (procedures, EXEC (@sql))."""
    return parse(text)


@statement(*(f"{verb} {word}" for verb in ("CREATE", "ALTER", "CREATE OR ALTER")
             for word in PROCEDURE))
@dataclass(frozen=True)
class CreateProcedure(Statement):
    name: str
    params: tuple[n.Param, ...]
    body: tuple[Statement, ...]
    alter: bool
    source: str                 # the CREATE statement's text, kept in the database

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
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
        return cls(head.line, head.column, name, tuple(params), body, "ALTER" in head.words,
                   p.span(head.start, p.pos))

    def run(self, frame: Frame) -> None:
        session = frame.session
        queries = statements(session.broker, "sbroker.apps.tsql")
        if not self.alter and definition(session, self.name) is not None:
            raise TSqlError(f"There is already an object named '{self.name}' in the"
                            " database.", OBJECT_EXISTS)
        block = "procedure_alter" if self.alter else "procedure_create"
        with session.work() as tx:
            tx.execute(queries[block], (self.name.lower(), self.source,
                                        session.broker.clock.now()))


def definition(session: Session, name: str) -> CreateProcedure | None:
    """The stored procedure ``name``, parsed, or None."""
    queries = statements(session.broker, "sbroker.apps.tsql")
    with session.work() as tx:
        row = tx.execute(queries["procedure_definition"], (name.lower(),)).fetchone()
    if row is None:
        return None
    [stmt] = parse_text(row[0])
    assert isinstance(stmt, CreateProcedure)
    return stmt


@statement(*(f"DROP {word}" for word in PROCEDURE))
@dataclass(frozen=True)
class DropProcedure(Statement):
    names: tuple[str, ...]
    if_exists: bool

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        if_exists = p.if_exists()
        names = [p.dotted_name()]
        while p.accept_op(","):
            names.append(p.dotted_name())
        return cls(head.line, head.column, tuple(names), if_exists)

    def run(self, frame: Frame) -> None:
        queries = statements(frame.session.broker, "sbroker.apps.tsql")
        for name in self.names:
            with frame.session.work() as tx:
                gone = tx.execute(queries["procedure_drop"], (name.lower(),)).rowcount
            if not gone and not self.if_exists:
                raise TSqlError(f"Cannot drop the procedure '{name}', because it does not"
                                " exist or you do not have permission.", DROP_MISSING)


@statement("EXEC", "EXECUTE")
@dataclass(frozen=True)
class ExecProc(Statement):
    name: str
    args: tuple[n.ExecArg, ...]
    result: str | None          # EXEC @rc = proc

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
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
            raise p.error("a procedure on a linked server is refused", name_tok,
                          number=REFUSED)
        if name.lower() in REFUSED_PROCEDURES:
            raise p.error(f"{name} reaches outside the database and is refused", name_tok,
                          number=REFUSED)
        args = _exec_args(p)
        if name.lower() == "sp_executesql":
            if not args or len(args) > 1:
                raise p.unsupported("sp_executesql with parameters", name_tok)
            return ExecDynamic(head.line, head.column, args[0].value)
        return cls(head.line, head.column, name, tuple(args), result)

    def run(self, frame: Frame) -> None:
        result = call(frame, self)
        if self.result is not None:
            frame.assign(self.result, result)


def _exec_args(p: Parser) -> list[n.ExecArg]:
    args: list[n.ExecArg] = []
    if p.tok.kind is Kind.EOF or p.tok.is_op(";") or p.starts_statement() or p.tok.is_word(
            "END", "ELSE"):
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


def call(frame: Frame, stmt: ExecProc) -> Any:
    """EXEC proc: bind the arguments, run the body in a frame of its own, copy OUTPUT
    arguments back; the RETURN value (0 when none)."""
    proc = definition(frame.session, stmt.name)
    if proc is None:
        raise TSqlError(f"Could not find stored procedure '{stmt.name}'.", NO_PROCEDURE)
    inner = sqlexec.new_frame(frame.session, proc.name)
    pairs = _pairs(proc, stmt)
    for param in proc.params:
        inner.declare(param.name, param.type, _start_value(frame, proc, param,
                                                          pairs.get(param.name)))
    result: Any = 0
    try:
        run(inner, proc.body)
    except Return as exc:
        result = 0 if exc.value is None else exc.value
    for param in proc.params:
        arg = pairs.get(param.name)
        if arg is not None and arg.output and param.output and isinstance(arg.value, n.Var):
            frame.assign(arg.value.name, inner.vars[param.name])
    return result


def _pairs(proc: CreateProcedure, stmt: ExecProc) -> dict[str, n.ExecArg]:
    """Parameter name -> its argument, positional ones first, then named ones."""
    params = list(proc.params)
    named = {p.name for p in params}
    positional = [a for a in stmt.args if a.name is None]
    if len(positional) > len(params):
        raise TSqlError(f"Procedure or function {proc.name} has too many arguments"
                        " specified.", TOO_MANY_ARGUMENTS)
    pairs = {param.name: arg for param, arg in zip(params, positional, strict=False)}
    for arg in stmt.args:
        if arg.name is not None:
            if arg.name not in named:
                raise TSqlError(f"@{arg.name} is not a parameter for procedure {proc.name}.",
                                NOT_A_PARAMETER)
            pairs[arg.name] = arg
    return pairs


def _start_value(frame: Frame, proc: CreateProcedure, param: n.Param,
                 arg: n.ExecArg | None) -> Any:
    """The value a parameter starts with: its argument's, or its default."""
    if arg is not None and not (isinstance(arg.value, n.Call) and arg.value.name == "DEFAULT"):
        return frame.value(arg.value)
    if param.default is None and arg is None:
        raise TSqlError(f"Procedure or function '{proc.name}' expects parameter"
                        f" '@{param.name}', which was not supplied.", MISSING_PARAMETER)
    return frame.value(param.default)


@statement("EXEC (", "EXECUTE (")
@dataclass(frozen=True)
class ExecDynamic(Statement):
    """EXEC (@sql), and sp_executesql without parameters."""
    sql: n.Expr

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        p.expect_op("(")
        sql = p.expression()
        p.expect_op(")")
        if p.tok.is_word("AT"):
            raise p.error("EXEC ... AT a linked server is refused", number=REFUSED)
        return cls(head.line, head.column, sql)

    def run(self, frame: Frame) -> None:
        text = frame.value(self.sql)
        if text is None:
            return
        body = parse_text(values.text_of(text))
        inner = sqlexec.new_frame(frame.session, frame.procedure)
        with contextlib.suppress(Return):
            run(inner, body)
