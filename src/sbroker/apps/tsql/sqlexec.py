"""Plain SQL and SELECT: translated by ``translate``, run through ``tx.execute`` in the
session's transaction, variables bound as parameters; SELECTs without FROM and scalar
subqueries of the seeds (``FOR XML PATH``) evaluated in Python."""

from __future__ import annotations

import zlib
from typing import Any

from sbroker.apps.sql import statements
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import values
from sbroker.apps.tsql.errors import (
    ASSIGN_AND_RETRIEVE,
    DUPLICATE_KEY,
    INVALID_OBJECT,
    NULL_NOT_ALLOWED,
    OBJECT_EXISTS,
    UNKNOWN_FUNCTION,
    USER,
    TSqlError,
)
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.session import Frame, ResultSet, Session, bindable, readable
from sbroker.apps.tsql.translate import OWN_NAMES, SYS_VIEWS, Names, Translated, translate
from sbroker.core.errors import BrokerError
from sbroker.storage.queries import Queries

XML_COLUMN = "XML_F52E2B61-18A1-11d1-B105-00805F49916B"  # FOR XML's column, as SQL Server


def sys_views(queries: Queries) -> tuple[tuple[str, str], ...]:
    """``sys.<name>`` -> its SELECT: a block ``sys_<name>`` of the dialect's file, or the
    broker's view of that name as it is."""
    blocks = set(queries)
    out = []
    for name in SYS_VIEWS:
        block = f"sys_{name}"
        out.append((name, queries[block] if block in blocks else f"SELECT * FROM {name}"))
    return tuple(out)


def prepared(frame: Frame, text: str) -> tuple[Translated, dict[str, Any]]:
    """``text`` translated for the broker's backend, and the values of its placeholders."""
    session = frame.session
    broker = session.broker
    queries = statements(broker, "sbroker.apps.tsql")
    text_variables = frozenset(name for name, value in frame.vars.items()
                               if isinstance(value, str))
    scope = Names(tuple(sorted(frame.tables.items())), sys_views(queries), session.queues(),
                  queries["queue_rows"])
    done = translate(text, broker.dialect, scope, text_variables)
    if done.schema_tables:  # a + of columns: concatenation if they are text
        done = translate(text, broker.dialect, scope, text_variables,
                         text_columns(frame, done.schema_tables))
    params = {}
    for name in done.names:
        if name.startswith("v_"):
            value = frame.variable(name[2:])
        elif name.startswith("e_"):
            value = evaluate(n.Call(f"ERROR_{name[2:].upper()}", ()), frame)
        elif name.startswith("q_"):
            value = int(name[2:])
        else:
            value = session.special(name)
        params[name] = bindable(value)
    return done, params


def text_columns(frame: Frame, tables: tuple[str, ...]
                 ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The text columns of ``tables`` as the database has them now."""
    queries = statements(frame.session.broker, "sbroker.apps.tsql")
    out = []
    with frame.session.work() as tx:
        for table in tables:
            rows = tx.execute(queries["text_columns"], {"table": table}).fetchall()
            out.append((table, tuple(sorted(str(row[0]) for row in rows))))
    return tuple(out)


def run_sql(frame: Frame, text: str) -> ResultSet | None:
    """Run one plain statement; its rows when it returns any."""
    session = frame.session
    done, params = prepared(frame, text)
    try:
        with session.work() as tx:
            rows = tx.execute(done.sql, params)
            result = None
            if rows.description is not None and done.returns_rows:
                columns = [d[0] for d in rows.description]
                result = ResultSet(columns, [[readable(v) for v in row]
                                             for row in rows.fetchall()])
                session.rowcount = len(result.rows)
            else:
                session.rowcount = max(rows.rowcount, 0)
            if done.insert_table is not None:
                queries = statements(session.broker, "sbroker.apps.tsql")
                found = tx.execute(queries["scope_identity"],
                                   {"table": done.insert_table}).fetchone()
                session.identity = found[0] if found else None
    except TSqlError:
        raise
    except BrokerError as exc:
        raise TSqlError(str(exc).removeprefix("application statement failed: "),
                        _number(str(exc))) from exc
    return result


def _number(message: str) -> int:
    lowered = message.lower()
    if "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered):
        return INVALID_OBJECT
    if "already exists" in lowered:
        return OBJECT_EXISTS
    if "unique" in lowered or "duplicate key" in lowered:
        return DUPLICATE_KEY
    if "not null" in lowered:
        return NULL_NOT_ALLOWED
    if "no such function" in lowered or ("function" in lowered and "does not exist" in lowered):
        return UNKNOWN_FUNCTION
    return USER


def evaluated_row(frame: Frame, select: n.Query) -> list[tuple[str | None, Any]]:
    """The items of a SELECT without FROM, evaluated in Python."""
    row = []
    for item in select.items:
        assert item.expr is not None
        row.append((item.alias, evaluate(item.expr, frame)))
    return row


def in_python(select: n.Query) -> bool:
    return not select.rest and all(item.expr is not None for item in select.items)


def select_rows(frame: Frame, select: n.Query) -> tuple[list[str | None], list[list[Any]]]:
    """Names and rows of a SELECT's items (without FOR XML), run where it must run."""
    if in_python(select):
        row = evaluated_row(frame, select)
        return [name for name, _ in row], [[value for _, value in row]]
    top = f"TOP ({select.top_sql}) " if select.top_sql else ""
    text = f"SELECT {top}{', '.join(item.sql for item in select.items)} {select.rest}"
    result = run_sql(frame, text)
    if result is None:
        return [], []
    names: list[str | None] = [item.alias or column
                               for item, column in zip(select.items, result.columns,
                                                       strict=False)]
    names += result.columns[len(names):]
    return names, result.rows


def subquery(frame: Frame, select: n.Query) -> Any:
    """A scalar subquery's value: its first row's first column, or FOR XML PATH's text."""
    names, rows = select_rows(frame, select)
    if select.xml_path is not None:
        return values.for_xml_path(select.xml_path,
                                   [list(zip(names, row, strict=True)) for row in rows])
    return rows[0][0] if rows and rows[0] else None


def exists(frame: Frame, select: n.Query) -> bool:
    """EXISTS (SELECT ...): whether the query returns a row."""
    return bool(select_rows(frame, select)[1])


def run_select(frame: Frame, select: n.Query) -> ResultSet | None:
    """A SELECT statement: assignments to variables, or a result set."""
    targets = [item.target for item in select.items]
    if any(targets):
        if not all(targets):
            raise TSqlError("A SELECT statement that assigns a value to a variable must not"
                            " be combined with data-retrieval operations.",
                            ASSIGN_AND_RETRIEVE)
        names, rows = select_rows(frame, select)
        for row in rows:
            for target, value in zip(targets, row, strict=False):
                assert target is not None
                frame.assign(target, value)
        frame.session.rowcount = len(rows)
        return None
    if select.xml_path is not None:
        return ResultSet([XML_COLUMN], [[subquery(frame, select)]])
    if in_python(select):
        row = evaluated_row(frame, select)
        frame.session.rowcount = 1
        return ResultSet([name or "" for name, _ in row], [[value for _, value in row]])
    result = run_sql(frame, select.sql)
    if result is not None and len(result.columns) == len(select.items):
        result.columns = [_as_written(item, column)
                          for item, column in zip(select.items, result.columns, strict=True)]
    return result


def _as_written(item: n.SelectItem, column: str) -> str:
    """A result column named as the script wrote it (PostgreSQL folds unquoted names to
    lower case): the alias, or a column's own name."""
    if item.alias:
        return item.alias
    if isinstance(item.expr, n.Column):
        written = item.sql.rsplit(".", 1)[-1].strip("[]\"")
        if written.lower() == column.lower():
            return written
    return column


def object_id(frame: Frame, name: str) -> int | None:
    """OBJECT_ID('name'): a number for a table, view or procedure that exists, else NULL
    (the number is stable: derived from the lower-cased name)."""
    base = name.split(".")[-1].strip("[]\"")
    stored = f"tsql_{base}" if base.lower() in OWN_NAMES else base
    queries = statements(frame.session.broker, "sbroker.apps.tsql")
    with frame.session.work() as tx:
        found = tx.execute(queries["relation_exists"], {"name": stored}).fetchone()
    return zlib.crc32(stored.lower().encode("utf-8")) & 0x7FFFFFFF if found else None


def new_frame(session: Session, procedure: str | None = None) -> Frame:
    """A frame whose scalar subqueries, EXISTS and OBJECT_ID run here."""
    return Frame(session, procedure, subquery_runner=subquery, exists_runner=exists,
                 object_runner=object_id)
