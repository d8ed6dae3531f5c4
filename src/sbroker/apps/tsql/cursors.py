"""Cursors as Service Broker admin scripts use them: DECLARE name CURSOR FOR select, OPEN
(the rows are read then: a static cursor), FETCH NEXT ... INTO with ``@@FETCH_STATUS``,
CLOSE, DEALLOCATE.  GLOBAL cursors (the default) live as long as the session, LOCAL ones
as long as their batch or procedure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import TSqlError
from sbroker.apps.tsql.session import Frame, ResultSet

EXISTS = 16915
NOT_FOUND = 16916
NOT_OPEN = 16917
ALREADY_OPEN = 16905
FETCH_OK, FETCH_END = 0, -1


@dataclass
class Cursor:
    """A declared cursor: its SELECT, and while open its rows and the next one's index."""

    select: n.Select
    names: list[str | None] | None = None
    rows: list[list[Any]] | None = None
    next: int = 0


def _scope(frame: Frame, local: bool) -> dict[str, Any]:
    return frame.cursors if local else frame.session.cursors


def _find(frame: Frame, name: str) -> Cursor:
    key = name.lower()
    cursor = frame.cursors.get(key) or frame.session.cursors.get(key)
    if cursor is None:
        raise TSqlError(f"A cursor with the name '{name}' does not exist.", NOT_FOUND)
    assert isinstance(cursor, Cursor)
    return cursor


def declare(frame: Frame, stmt: n.DeclareCursor) -> None:
    scope = _scope(frame, stmt.local)
    if stmt.name.lower() in scope:
        raise TSqlError(f"A cursor with the name '{stmt.name}' already exists.", EXISTS)
    scope[stmt.name.lower()] = Cursor(stmt.select)


def _open(frame: Frame, cursor: Cursor) -> None:
    if cursor.rows is not None:
        raise TSqlError("The cursor is already open.", ALREADY_OPEN)
    cursor.names, cursor.rows = sqlexec.select_rows(frame, cursor.select)
    cursor.next = 0


def _fetch(frame: Frame, cursor: Cursor, targets: tuple[str, ...]) -> None:
    if cursor.rows is None:
        raise TSqlError("Cursor is not open.", NOT_OPEN)
    session = frame.session
    if cursor.next >= len(cursor.rows):
        session.fetch_status = FETCH_END
        session.rowcount = 0
        return
    row = cursor.rows[cursor.next]
    cursor.next += 1
    session.fetch_status = FETCH_OK
    session.rowcount = 1
    if not targets:
        session.results.append(ResultSet([name or "" for name in cursor.names or []], [row]))
        return
    if len(targets) != len(row):
        raise TSqlError("The number of variables declared in the INTO list must match that"
                        " of selected columns.", 16924)
    for target, value in zip(targets, row, strict=True):
        frame.assign(target, value)


def operate(frame: Frame, stmt: n.CursorOp) -> None:
    """OPEN, FETCH, CLOSE or DEALLOCATE."""
    cursor = _find(frame, stmt.name)
    if stmt.action == "OPEN":
        _open(frame, cursor)
    elif stmt.action == "FETCH":
        _fetch(frame, cursor, stmt.targets)
    elif stmt.action == "CLOSE":
        if cursor.rows is None:
            raise TSqlError("Cursor is not open.", NOT_OPEN)
        cursor.rows = None
    else:  # DEALLOCATE
        key = stmt.name.lower()
        scope = frame.cursors if key in frame.cursors else frame.session.cursors
        del scope[key]
