"""The syntax tree of T-SQL expressions as frozen dataclasses, and the parts statements
share (types, SELECT items, the query of a SELECT).  The statements themselves are classes
of ``statements/``, each with its parse rule and how it runs (``statement.Statement``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    select: Query


@dataclass(frozen=True)
class Subquery(Expr):
    """A scalar subquery: a SELECT evaluated for its single value."""
    select: Query


# -- parts of statements ------------------------------------------------------------------
@dataclass(frozen=True)
class TypeName:
    name: str                   # upper-cased
    args: tuple[str, ...] = ()  # (max) (10, 2) ...


@dataclass(frozen=True)
class SelectItem:
    expr: Expr | None           # None for "*" or SQL-only items
    alias: str | None
    target: str | None          # @variable it assigns, or None
    sql: str                    # the item's T-SQL text


@dataclass(frozen=True)
class Query:
    """A SELECT (a statement's, a subquery's, a cursor's): ``items`` parsed; ``rest`` the
    T-SQL text from FROM on ('' if none); ``xml_path`` the element name of FOR XML
    PATH('name')."""
    items: tuple[SelectItem, ...]
    rest: str
    top: Expr | None = None
    xml_path: str | None = None
    sql: str = ""               # the whole statement as T-SQL
    top_sql: str = ""           # the TOP expression as T-SQL


@dataclass(frozen=True)
class Param:
    """A procedure's parameter."""
    name: str
    type: TypeName
    default: Expr | None
    output: bool


@dataclass(frozen=True)
class ExecArg:
    """An argument of EXEC procedure."""
    name: str | None            # @param = ... ; None when positional
    value: Expr
    output: bool
