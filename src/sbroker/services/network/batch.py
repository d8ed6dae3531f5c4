"""Statements that read or write a whole batch of received messages in one SQLite step.

Each step of a statement lets go of the GIL and must win it back; with the transport's loop
decoding on another thread, a step per row can wait a switch interval (5 ms) per row. So
endpoints come back as one JSON value, queue rows go in as multi-row INSERTs and receive
sequence numbers as one UPDATE over a JSON array.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields

from sbroker.engine import dialogs
from sbroker.engine.dialogs import Endpoint

_NAMES = [f.name for f in fields(Endpoint)]
_ENDPOINTS = (
    "SELECT json_group_array(json_array({})) FROM json_each(?) j CROSS JOIN sb_endpoints e"
    " ON e.conversation_id = json_extract(j.value, '$[0]')"
    " AND e.is_initiator = json_extract(j.value, '$[1]')"
)
_SET_RECEIVE_SEQ = (
    "UPDATE sb_endpoints SET receive_seq = json_extract(j.value, '$[1]') FROM json_each(?) j"
    " WHERE sb_endpoints.handle = json_extract(j.value, '$[0]')"
)
_INSERT_HEAD, _, _INSERT_ROW = dialogs._INSERT.partition(" VALUES ")
_ROWS_PER_INSERT = 500


def load_endpoints(
    conn: sqlite3.Connection, keys: set[tuple[str, bool]]
) -> dict[tuple[str, bool], Endpoint | None]:
    """The endpoints (conversation_id, is_initiator) of ``keys``; None where there is none."""
    out: dict[tuple[str, bool], Endpoint | None] = dict.fromkeys(keys)
    if not keys:
        return out
    sql, reals = _endpoints_query(conn)
    arg = json.dumps([[conv, int(initiator)] for conv, initiator in keys])
    (text,) = conn.execute(sql, (arg,)).fetchone()
    for row in json.loads(text):
        for i in reals:
            row[i] = None if row[i] == "NULL" else float(row[i])
        ep = dialogs._row(tuple(row))
        assert ep is not None
        out[(ep.conversation_id, ep.is_initiator)] = ep
    return out


_QUERY: list[tuple[str, list[int]]] = []  # built on first use, from the schema


def _endpoints_query(conn: sqlite3.Connection) -> tuple[str, list[int]]:
    """The endpoints query and which of its values come from REAL columns: those travel as
    ``quote(x)`` text, exact, where JSON would round them to 15 digits."""
    if not _QUERY:
        real = {name for _, name, decl, *_ in conn.execute("PRAGMA table_info(sb_endpoints)")
                if "REAL" in decl.upper()}
        values = [f"quote(e.{n})" if n in real else f"e.{n}" for n in _NAMES]
        reals = [i for i, name in enumerate(_NAMES) if name in real]
        _QUERY.append((_ENDPOINTS.format(", ".join(values)), reals))
    return _QUERY[0]


def insert_messages(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert queue rows (the columns of ``dialogs._INSERT``), many per statement."""
    if not rows:
        return
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(rows[0])
    per = max(1, min(_ROWS_PER_INSERT, limit))
    for i in range(0, len(rows), per):
        part = rows[i : i + per]
        conn.execute(
            f"{_INSERT_HEAD} VALUES {', '.join([_INSERT_ROW] * len(part))}",
            [value for row in part for value in row],
        )


def set_receive_seqs(conn: sqlite3.Connection, seqs: dict[str, int]) -> None:
    """Set ``receive_seq`` of each endpoint handle in ``seqs``."""
    if seqs:
        conn.execute(_SET_RECEIVE_SEQ, (json.dumps(list(seqs.items())),))
