"""A queue named in plain SQL, as SQL Server lets one be (docs/tsql.md, "Querying a queue"):
the source of a SELECT, in joins, subqueries and EXISTS, with SQL Server's queue columns;
never the target of INSERT, UPDATE, DELETE, TRUNCATE or MERGE (error 416), and no table may
take a queue's name (error 2714).  Reading a queue receives and locks nothing: the rows come
from the dialect's ``queue_rows`` block, a plain read of the broker's tables."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from sbroker.apps.tsql.errors import OBJECT_EXISTS, QUEUE_NOT_UPDATABLE, TSqlError

#: The placeholder of ``queue_rows`` that is bound to the queue's id.
QUEUE_ID = "queue_id"
#: The types a CAST of message_body to text names (PostgreSQL decodes the bytes for them).
TEXT_TYPES = (*exp.DataType.TEXT_TYPES, exp.DataType.Type.XML)


def queue_id(node: exp.Table, queues: dict[str, int]) -> int | None:
    """The id of the queue ``node`` names (``Q``, ``dbo.Q``, any case), or None."""
    if node.db and node.db.lower() != "dbo":
        return None
    if not isinstance(node.this, exp.Identifier):
        return None
    return queues.get(node.name.lower())


def refuse_changes(tree: exp.Expr, queues: dict[str, int]) -> None:
    """Raise SQL Server's error when ``tree`` would change a queue or create a table or view
    named like one."""
    if isinstance(tree, exp.Create) and tree.kind in ("TABLE", "VIEW"):
        table = tree.find(exp.Table)
        if table is not None and queue_id(table, queues) is not None:
            raise TSqlError(f"There is already an object named '{table.name}' in the"
                            " database.", OBJECT_EXISTS)
    for table in _targets(tree):
        if queue_id(table, queues) is not None:
            raise TSqlError(f'The service queue "{table.name}" cannot be directly updated.',
                            QUEUE_NOT_UPDATABLE)


def _targets(tree: exp.Expr) -> list[exp.Table]:
    """The tables a DML statement changes (an alias of T-SQL's ``UPDATE a ... FROM t a``
    stands for its table)."""
    if isinstance(tree, exp.TruncateTable):
        return [t for t in tree.expressions if isinstance(t, exp.Table)]
    if not isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Merge)):
        return []
    target = tree.this
    if isinstance(target, exp.Schema):  # INSERT INTO t (a, b)
        target = target.this
    if not isinstance(target, exp.Table):
        return []
    aliased = [t for t in tree.find_all(exp.Table)
               if t is not target and t.alias and t.alias.lower() == target.name.lower()]
    return [target, *aliased]


@functools.lru_cache(maxsize=8)
def _rows(select: str, dialect: str) -> exp.Expr:
    return sqlglot.parse_one(select, read=dialect)


def rows(node: exp.Table, number: int, select: str, dialect: str) -> tuple[exp.Subquery, str]:
    """The queue ``node`` names as a subquery of its rows, aliased as it is written, and the
    placeholder it binds to the queue's id (``q_<id>``)."""
    placeholder = f"q_{number}"
    query = _rows(select, dialect).copy()
    for found in query.find_all(exp.Placeholder):
        if found.name == QUEUE_ID:
            found.replace(exp.Placeholder(this=placeholder))
    alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
    return exp.Subquery(this=query, alias=alias), placeholder


def body_as_text(node: exp.Cast) -> exp.Expression | None:
    """``CAST(message_body AS NVARCHAR | XML ...)`` for PostgreSQL, which would otherwise give
    the hex of the bytes: the body decoded as UTF-8 (None when ``node`` is another CAST)."""
    column = node.this
    if not (isinstance(column, exp.Column) and column.name.lower() == "message_body"
            and node.to.is_type(*TEXT_TYPES)):
        return None
    return exp.Anonymous(this="convert_from",
                         expressions=[column.copy(), exp.Literal.string("UTF8")])
