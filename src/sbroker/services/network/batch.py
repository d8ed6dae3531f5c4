"""Statements that read or write a whole batch of received messages in one step.

Each step of a statement lets go of the GIL and must win it back; with the transport's loop
decoding on another thread, a step per row can wait a switch interval (5 ms) per row. So
endpoints come back as one JSON value, queue rows go in as one INSERT over a JSON array
(bodies as one blob) and receive sequence numbers as one UPDATE over a JSON array.
"""

from __future__ import annotations

import json

from sbroker.engine.endpoints import Endpoint, from_row
from sbroker.storage.ports import Connection

_REALS = (14, 15, 16)  # lifetime_expires, timer_at, created_at: quote(x) text in the JSON


def load_endpoints(
    conn: Connection, keys: set[tuple[str, bool]]
) -> dict[tuple[str, bool], Endpoint | None]:
    """The endpoints (conversation_id, is_initiator) of ``keys``; None where there is none."""
    out: dict[tuple[str, bool], Endpoint | None] = dict.fromkeys(keys)
    if not keys:
        return out
    arg = json.dumps([[conv, int(initiator)] for conv, initiator in keys])
    (text,) = conn.execute(conn.sql.endpoints_by_keys, (arg,)).fetchone()
    for row in json.loads(text):
        for i in _REALS:
            row[i] = None if row[i] == "NULL" else float(row[i])
        ep = from_row(tuple(row))
        assert ep is not None
        out[(ep.conversation_id, ep.is_initiator)] = ep
    return out


def insert_messages(conn: Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert queue rows (the columns of the ``insert_message`` statement) in one step."""
    if not rows:
        return
    meta: list[list[object]] = []
    bodies: list[bytes] = []
    offset = 1
    for row in rows:
        body = row[10]
        assert isinstance(body, bytes)
        meta.append([*row[:10], *row[11:], offset, len(body)])
        bodies.append(body)
        offset += len(body)
    conn.execute(conn.sql.insert_messages_json, (json.dumps(meta), b"".join(bodies)))


def set_receive_seqs(conn: Connection, seqs: dict[str, int]) -> None:
    """Set ``receive_seq`` of each endpoint handle in ``seqs``."""
    if seqs:
        conn.execute(conn.sql.set_receive_seqs, (json.dumps(list(seqs.items())),))
