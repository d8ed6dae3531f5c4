"""Plain SQL (the user's tables) translated by sqlglot from T-SQL to the backend's dialect.

T-SQL's variables, ``@@SPID``, ``SCOPE_IDENTITY()``, ``GETDATE()``, ``NEWID()`` become named
placeholders bound when the statement runs; ``sys.*`` names become the broker's views; table
variables become the tables that hold them; table and join hints are dropped (accepted and
ignored).  A translation is cached per (text, dialect)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from sbroker.apps.tsql import queuetables
from sbroker.apps.tsql.errors import (
    INVALID_OBJECT,
    TYPE_NOT_FOUND,
    UNDECLARED_TABLE,
    VARIABLE_IN_DDL,
    TSqlSyntaxError,
)
from sbroker.apps.tsql.tokens import Kind, Token, tokenize

DIALECTS = {"sqlite": "sqlite", "postgresql": "postgres"}
TABLE_HINTS = frozenset((
    "NOLOCK", "INDEX", "READPAST", "UPDLOCK", "ROWLOCK", "HOLDLOCK", "TABLOCK", "TABLOCKX",
    "PAGLOCK", "READCOMMITTED", "READUNCOMMITTED", "REPEATABLEREAD", "SERIALIZABLE", "NOWAIT",
    "XLOCK", "FORCESEEK", "FORCESCAN", "NOEXPAND", "READCOMMITTEDLOCK", "SNAPSHOT",
))
JOIN_HINTS = frozenset(("LOOP", "HASH", "MERGE", "REMOTE"))
#: Values the interpreter binds: placeholder name -> what it stands for.
SPECIAL_FUNCTIONS = {"SCOPE_IDENTITY": "f_scope_identity", "NEWID": "f_newid",
                     "GETDATE": "f_now", "SYSDATETIME": "f_now", "GETUTCDATE": "f_now",
                     "SYSUTCDATETIME": "f_now", "DB_ID": "f_db_id", "DB_NAME": "f_db_name",
                     **{f"ERROR_{part}": f"e_{part.lower()}" for part in (
                         "NUMBER", "MESSAGE", "SEVERITY", "STATE", "LINE", "PROCEDURE")}}
#: Names sbroker's own tables, views and indexes have (the task scheduler's, docs/scheduler.md;
#: the poison helper's, docs/poison.md): a T-SQL script's objects of these names live beside them as
#: ``tsql_<name>`` (docs/tsql.md).
OWN_NAMES = frozenset((
    "executionlog", "executionstatus", "schedulers", "executorsettings",
    "poison_message_details", "poison_messages", "executionlog_open",
    "ix_poison_message_details", "ix_poison_messages_state"))
#: sys.<name> -> the broker's view (docs/operations.md) with SQL Server's column names added.
SYS_VIEWS = ("service_queues", "dm_broker_activated_tasks", "conversation_endpoints",
             "conversation_groups", "transmission_queue", "services", "routes",
             "conversation_priorities", "dm_broker_queue_monitors",
             "service_message_types", "service_contracts", "service_broker_endpoints",
             "tcp_endpoints")


@dataclass(frozen=True)
class Names:
    """What the names in a statement stand for beyond the user's tables: table variables
    (-> the tables that hold them), ``sys.`` views (-> their SELECT), queues (lower-cased
    name -> id; their rows are ``queue_rows``, a SELECT with the placeholder ``:queue_id``)."""

    tables: tuple[tuple[str, str], ...] = ()
    sys_views: tuple[tuple[str, str], ...] = ()
    queues: tuple[tuple[str, int], ...] = ()
    queue_rows: str = ""


@dataclass(frozen=True)
class Translated:
    """SQL for the backend, the placeholders it binds, and what kind of statement it is."""

    sql: str
    names: tuple[str, ...]       # placeholders: v_<variable>, s_<sysvar>, f_<function>,
                                 # e_<part of the error a CATCH block handles>, q_<queue id>
    returns_rows: bool
    insert_table: str | None     # the table of an INSERT (for SCOPE_IDENTITY)
    verb: str
    # Tables whose text columns decide whether a ``+`` of columns concatenates: translate
    # again with their ``text_columns`` (empty when given or not needed).
    schema_tables: tuple[str, ...] = ()


def without_hints(text: str) -> str:
    """``text`` with table hints ``WITH (NOLOCK, INDEX = x)``, join hints (``INNER LOOP
    JOIN``) and ``OPTION (...)`` taken out, at the token level."""
    tokens = tokenize(text)
    keep: list[Token] = []
    i = 0
    while i < len(tokens) and tokens[i].kind is not Kind.EOF:
        tok = tokens[i]
        nxt = tokens[i + 1]
        if (tok.is_word("WITH") and nxt.is_op("(") and tokens[i + 2].upper in TABLE_HINTS) or (
                tok.is_word("OPTION") and nxt.is_op("(")):
            i = _after_parens(tokens, i + 1)
            continue
        if tok.upper in JOIN_HINTS and nxt.is_word("JOIN"):
            i += 1
            continue
        keep.append(tok)
        i += 1
    return " ".join(text[t.start:t.end] for t in keep)


def _after_parens(tokens: list[Token], i: int) -> int:
    depth = 0
    while tokens[i].kind is not Kind.EOF:
        depth += tokens[i].is_op("(") - tokens[i].is_op(")")
        i += 1
        if depth == 0:
            break
    return i


NO_NAMES = Names()


@functools.lru_cache(maxsize=2048)
def translate(text: str, dialect: str, scope: Names = NO_NAMES,
              text_variables: frozenset[str] = frozenset(),
              text_columns: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Translated:
    """``text`` (one T-SQL statement) for ``dialect``; ``scope`` says what names stand for;
    ``text_variables`` are the variables that hold text now, ``text_columns`` the text
    columns of tables (a ``+`` on text concatenates)."""
    tree = _parse(text)
    names: list[str] = []
    ddl = isinstance(tree, (exp.Create, exp.Alter, exp.Drop))
    variables = dict(scope.tables)
    queues = dict(scope.queues)
    queuetables.refuse_changes(tree, queues)
    target = DIALECTS[dialect]
    texts = _TextSides(text_variables, _tables_in(tree, variables), dict(text_columns))

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table):
            number = queuetables.queue_id(node, queues)
            if number is not None:
                rows, placeholder = queuetables.rows(node, number, scope.queue_rows, target)
                names.append(placeholder)
                return rows
            return _table(node, variables, dict(scope.sys_views))
        if isinstance(node, exp.Cast) and target == "postgres" and queues:
            decoded = queuetables.body_as_text(node)
            if decoded is not None:
                return decoded
        return _rewrite(node, names, target, texts, ddl, rewrite)

    return _translated(tree.transform(rewrite), target, names, texts)


def _rewrite(node: exp.Expression, names: list[str], target: str, texts: _TextSides,
             ddl: bool, rewrite: Callable[[exp.Expression], exp.Expression]
             ) -> exp.Expression:
    """``node`` as the backend takes it: variables and special functions as placeholders,
    types and strings as the dialect has them, text ``+`` as concatenation."""
    if isinstance(node, exp.Index) and node.name.lower() in OWN_NAMES:
        node.set("this", exp.to_identifier(f"tsql_{node.name}"))
    if isinstance(node, exp.Parameter):
        if ddl:
            raise TSqlSyntaxError("variables are not allowed in a CREATE/ALTER/DROP"
                                  f" statement (@{node.name})", number=VARIABLE_IN_DDL)
        name = _placeholder(node)
        names.append(name)
        return exp.Placeholder(this=name)
    if isinstance(node, exp.DataType):
        return _type(node, target)
    if isinstance(node, exp.National):  # N'text': every string is Unicode here
        return exp.Literal.string(node.this)
    if isinstance(node, exp.Add) and texts.concatenates(node):
        return exp.DPipe(this=node.this.transform(rewrite),
                         expression=node.expression.transform(rewrite))
    function = _function_name(node)
    if ddl and function in ("DB_ID", "DB_NAME"):
        return exp.Literal.number(1) if function == "DB_ID" else exp.Literal.string("db")
    if function in SPECIAL_FUNCTIONS and not ddl:
        names.append(SPECIAL_FUNCTIONS[function])
        return exp.Placeholder(this=SPECIAL_FUNCTIONS[function])
    if isinstance(node, exp.IndexParameters) and target == "sqlite":
        node.set("include", None)
    return node


def _parse(text: str) -> exp.Expr:
    """The sqlglot tree of one T-SQL statement, or a syntax error that names the statement."""
    try:
        return sqlglot.parse_one(without_hints(text), read="tsql")
    except ParseError as exc:
        errors = exc.errors[0] if exc.errors else {}
        near = errors.get("highlight") or ""
        raise TSqlSyntaxError(f"cannot translate the {text.split()[0].upper()} statement:"
                              f" {errors.get('description', exc)} near {near!r}") from None


def _translated(tree: exp.Expression, target: str, names: list[str],
                texts: _TextSides) -> Translated:
    """What the rewritten ``tree`` runs as on ``target``, and what the caller must know of it."""
    if isinstance(tree, exp.Update):
        _update_by_alias(tree)
    if isinstance(tree, exp.TruncateTable) and target == "sqlite" and len(tree.expressions) == 1:
        tree = exp.Delete(this=tree.expressions[0])  # SQLite has no TRUNCATE
    insert_table = None
    if isinstance(tree, exp.Insert):
        table = tree.find(exp.Table)
        insert_table = table.name if table is not None else None
    returns_rows = isinstance(tree, (exp.Select, exp.Union, exp.Except, exp.Intersect))
    return Translated(tree.sql(dialect=target), tuple(dict.fromkeys(names)), returns_rows,
                      insert_table, tree.key.upper(), tuple(sorted(texts.unknown)))


class _TextSides:
    """Which side of a ``+`` is text: a string literal, a variable holding text, a CAST to a
    character type, a concatenation, or a column that is text in its table."""

    def __init__(self, variables: frozenset[str], tables: dict[str, str],
                 columns: dict[str, tuple[str, ...]]) -> None:
        self.variables = variables
        self.tables = tables  # name or alias in the statement -> the table's name
        self.columns = columns
        self.unknown: set[str] = set()  # tables whose columns were needed but not given

    def concatenates(self, node: exp.Add) -> bool:
        """T-SQL's ``+`` concatenates with a literal or text variable on a side (as before),
        and when both sides are text."""
        sides = (node.this, node.expression)
        if any(_is_text(side, self.variables) for side in sides):
            return True
        if not all(self._text(side) for side in sides if not isinstance(side, exp.Column)):
            return False  # a number, say: no column's type matters
        return all([self._text(side) for side in sides])  # every column: note unknown tables

    def _text(self, node: exp.Expression) -> bool:
        if isinstance(node, exp.Cast):
            return node.to.is_type(*exp.DataType.TEXT_TYPES)
        if isinstance(node, exp.Add):
            return self.concatenates(node)
        if not isinstance(node, exp.Column):
            return _is_text(node, self.variables)
        qualifier = node.table.lower()
        owners = [self.tables[qualifier]] if qualifier in self.tables else (
            [] if qualifier else list(self.tables.values()))
        missing = [table for table in owners if table not in self.columns]
        self.unknown.update(missing)
        return any(node.name.lower() in self.columns.get(table, ()) for table in owners)


def _tables_in(tree: exp.Expr, variables: dict[str, str]) -> dict[str, str]:
    """The user tables a statement names: name or alias (lower case) -> the table's name in
    the database (table variables' tables, ``tsql_`` for sbroker's own names)."""
    out: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        if table.db.lower() == "sys":
            continue
        if isinstance(table.this, exp.Parameter):
            name = variables.get(table.this.name.lower())
            if name is None:
                continue
        else:
            name = table.name.lower()
            name = f"tsql_{name}" if name in OWN_NAMES else name
        out[table.alias_or_name.lower()] = name
        out.setdefault(table.name.lower(), name)
    return out


def _is_text(node: exp.Expression, text_variables: frozenset[str]) -> bool:
    """A string literal, a variable holding text, or a concatenation already: T-SQL's ``+``
    on it concatenates."""
    if isinstance(node, exp.Parameter) and not isinstance(node.this, exp.Parameter):
        return node.name.lower() in text_variables
    if isinstance(node, exp.Placeholder):
        return str(node.this).startswith("v_") and str(node.this)[2:] in text_variables
    return (isinstance(node, exp.Literal) and node.is_string) or isinstance(
        node, (exp.National, exp.DPipe, exp.Concat))


def _function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.CurrentTimestamp):
        return "GETDATE"
    if isinstance(node, exp.Uuid):
        return "NEWID"
    return None


def _placeholder(node: exp.Parameter) -> str:
    inner = node.this
    if isinstance(inner, exp.Parameter):
        return "s_" + inner.name.lower()
    return "v_" + node.name.lower()


def _table(node: exp.Table, variables: dict[str, str],
           views: dict[str, str]) -> exp.Expression:
    if isinstance(node.this, exp.Parameter):
        name = node.this.name.lower()
        if name not in variables:
            raise TSqlSyntaxError(f"Must declare the table variable \"@{name}\"",
                                  number=UNDECLARED_TABLE)
        return exp.Table(this=exp.to_identifier(variables[name]), alias=node.args.get("alias")
                         or exp.TableAlias(this=exp.to_identifier(name)))
    if node.db.lower() == "sys":
        select = views.get(node.name.lower())
        if select is None:
            raise TSqlSyntaxError(f"sys.{node.name} is not a view sbroker has (it has"
                                  f" sys.{', sys.'.join(SYS_VIEWS)})", number=INVALID_OBJECT)
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        return exp.Subquery(this=sqlglot.parse_one(select), alias=alias)
    if node.db and node.db.lower() == "dbo":
        node.set("db", None)
        node.set("catalog", None)
    if not node.db and node.name.lower() in OWN_NAMES:
        alias = node.args.get("alias")
        renamed = exp.Table(this=exp.to_identifier(f"tsql_{node.name}"))
        if alias is not None:
            renamed.set("alias", alias)
        elif isinstance(node.parent, (exp.From, exp.Join)):
            renamed.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
        return renamed
    return node


def _type(node: exp.DataType, target: str) -> exp.Expression:
    params = node.expressions
    kind = node.this
    if any(isinstance(p, exp.DataTypeParam) and p.name.upper() == "MAX" for p in params) or (
            kind in exp.DataType.TEMPORAL_TYPES):
        node.set("expressions", [])
    if target == "postgres" and kind == exp.DataType.Type.BIT:
        return exp.DataType.build("SMALLINT")
    if kind == exp.DataType.Type.USERDEFINED:
        name = str(node.args.get("kind") or "").lower()
        if name == "sysname":
            return exp.DataType.build("VARCHAR(128)")
        raise TSqlSyntaxError(f"the type {name} is not supported by sbroker",
                              number=TYPE_NOT_FOUND)
    replacement = TYPES.get(kind)
    return exp.DataType.build(replacement) if replacement else node


#: T-SQL types the backends lack, and what stands for them there.
TYPES = {
    exp.DataType.Type.MONEY: "DECIMAL(19, 4)", exp.DataType.Type.SMALLMONEY: "DECIMAL(10, 4)",
    exp.DataType.Type.XML: "TEXT", exp.DataType.Type.VARIANT: "TEXT",
    exp.DataType.Type.IMAGE: "VARBINARY", exp.DataType.Type.UTINYINT: "SMALLINT",
}


def _update_by_alias(tree: exp.Update) -> None:
    """``UPDATE a SET ... FROM t a WHERE ...`` (T-SQL) as ``UPDATE t AS a SET ... WHERE ...``,
    which SQLite and PostgreSQL take, when the FROM clause names one table."""
    source = tree.args.get("from_") or tree.args.get("from")
    target = tree.this
    if source is None or tree.args.get("joins") or not isinstance(target, exp.Table):
        return
    table = source.this
    if isinstance(table, exp.Table) and target.name.lower() in (
            table.alias_or_name.lower(), table.name.lower()):
        tree.set("this", table)
        tree.set("from_" if "from_" in tree.args else "from", None)
