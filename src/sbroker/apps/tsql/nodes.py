"""The syntax tree of T-SQL: expressions and statements as frozen dataclasses.

Every statement keeps its first token's line and column, so a runtime error names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.tsql.tokens import Token


# -- expressions ---------------------------------------------------------------------------
class Expr:
    """Base of expression nodes."""


@dataclass(frozen=True)
class Literal(Expr):
    value: Any


@dataclass(frozen=True)
class Var(Expr):
    name: str          # without @, lower-cased


@dataclass(frozen=True)
class SysVar(Expr):
    name: str          # without @@, upper-cased


@dataclass(frozen=True)
class Column(Expr):
    name: str          # a column of the row in scope (RECEIVE), lower-cased


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str            # + - * / % = <> < > <= >= AND OR LIKE
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool


@dataclass(frozen=True)
class Call(Expr):
    name: str          # upper-cased
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Cast(Expr):
    operand: Expr
    type: str          # upper-cased base type, e.g. NVARCHAR
    style: Expr | None = None


@dataclass(frozen=True)
class Method(Expr):
    """``@x.value('xpath', 'type')`` and friends on an XML value."""
    target: Expr
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Case(Expr):
    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None


@dataclass(frozen=True)
class Exists(Expr):
    """``EXISTS (SELECT ...)``: true when the query returns a row."""
    select: Select


@dataclass(frozen=True)
class Subquery(Expr):
    """A scalar subquery: a SELECT evaluated for its single value."""
    select: Select


# -- statements ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Stmt:
    line: int
    column: int


@dataclass(frozen=True)
class TypeName:
    name: str                   # upper-cased
    args: tuple[str, ...] = ()  # (max) (10, 2) ...


@dataclass(frozen=True)
class Declare(Stmt):
    items: tuple[tuple[str, TypeName, Expr | None], ...]


@dataclass(frozen=True)
class DeclareTable(Stmt):
    name: str
    columns_sql: str            # the column list as T-SQL, "(a int, b nvarchar(10))"


@dataclass(frozen=True)
class DeclareCursor(Stmt):
    """DECLARE name CURSOR [LOCAL | GLOBAL] [options] FOR select."""
    name: str
    select: Select
    local: bool


@dataclass(frozen=True)
class CursorOp(Stmt):
    """OPEN / CLOSE / DEALLOCATE name; FETCH [NEXT] FROM name [INTO @a, ...]."""
    action: str
    name: str
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetVar(Stmt):
    name: str
    op: str                     # "=" or "+=" ...
    value: Expr


@dataclass(frozen=True)
class SetOption(Stmt):
    option: str                 # XACT_ABORT, NOCOUNT, ...
    value: str


@dataclass(frozen=True)
class SelectItem:
    expr: Expr | None           # None for "*" or SQL-only items
    alias: str | None
    target: str | None          # @variable it assigns, or None
    sql: str                    # the item's T-SQL text


@dataclass(frozen=True)
class Select(Stmt):
    """A SELECT: ``items`` parsed; ``rest`` the T-SQL text from FROM on ('' if none);
    ``xml_path`` the element name of FOR XML PATH('name')."""
    items: tuple[SelectItem, ...]
    rest: str
    top: Expr | None = None
    xml_path: str | None = None
    sql: str = ""               # the whole statement as T-SQL
    top_sql: str = ""           # the TOP expression as T-SQL


@dataclass(frozen=True)
class PlainSql(Stmt):
    """A statement sent to the database after translation (INSERT, UPDATE, CREATE TABLE...)."""
    sql: str
    verb: str


@dataclass(frozen=True)
class Block(Stmt):
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class If(Stmt):
    condition: Expr
    then: Stmt
    otherwise: Stmt | None


@dataclass(frozen=True)
class While(Stmt):
    condition: Expr
    body: Stmt


@dataclass(frozen=True)
class Break(Stmt):
    pass


@dataclass(frozen=True)
class Continue(Stmt):
    pass


@dataclass(frozen=True)
class TryCatch(Stmt):
    body: tuple[Stmt, ...]
    handler: tuple[Stmt, ...]


@dataclass(frozen=True)
class Raiserror(Stmt):
    message: Expr
    severity: Expr
    state: Expr
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Throw(Stmt):
    number: Expr | None         # None: rethrow in CATCH
    message: Expr | None
    state: Expr | None


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None


@dataclass(frozen=True)
class Print(Stmt):
    value: Expr


@dataclass(frozen=True)
class TranControl(Stmt):
    action: str                 # BEGIN, COMMIT, ROLLBACK, SAVE


@dataclass(frozen=True)
class ExecArg:
    name: str | None            # @param = ... ; None when positional
    value: Expr
    output: bool


@dataclass(frozen=True)
class ExecProc(Stmt):
    name: str
    args: tuple[ExecArg, ...]
    result: str | None          # EXEC @rc = proc


@dataclass(frozen=True)
class ExecDynamic(Stmt):
    sql: Expr


@dataclass(frozen=True)
class WaitforDelay(Stmt):
    delay: Expr
    until: bool                 # WAITFOR TIME


@dataclass(frozen=True)
class Param:
    name: str
    type: TypeName
    default: Expr | None
    output: bool


@dataclass(frozen=True)
class CreateProcedure(Stmt):
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    alter: bool
    source: str                 # the CREATE statement's text, kept in the database


@dataclass(frozen=True)
class DropObject(Stmt):
    kind: str                   # PROCEDURE, MESSAGE TYPE, ...
    names: tuple[str, ...]
    if_exists: bool


@dataclass(frozen=True)
class Database(Stmt):
    """USE / CREATE / DROP / ALTER DATABASE: act on the one open broker database."""
    action: str
    name: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Broker(Stmt):
    """A Service Broker statement: ``verb`` names it (CREATE QUEUE, SEND, ...); ``args``
    holds its parts, parsed."""
    verb: str
    args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Script:
    """A parsed batch."""
    body: tuple[Stmt, ...]
    tokens: tuple[Token, ...] = ()
