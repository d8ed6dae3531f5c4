"""PostgreSQL's :class:`~sbroker.storage.ports.SendPath`: hosts commit at once, so
``sb_send_direct`` (migration 0013) locks the conversation, checks, inserts and numbers in
one function, and its answer comes back with COMMIT in the same round trip."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sbroker.storage.direct import PeerMemory
from sbroker.storage.ports import Connection, Cursor, Direct, Verdict


class CommitSends(PeerMemory):
    """Only a commit that does nothing but its SENDs (``alone``): when the function wrote
    nothing, the engine makes the commit again the ordinary way."""

    def takes(self, count: int, alone: bool) -> bool:
        return alone

    def send(self, conn: Connection, sends: Sequence[Direct], now: float, version: str,
             alone: bool) -> Verdict:
        if len(sends) == 1:
            d = sends[0]
            done = conn.execute(conn.sql.send_direct, (
                d.message_type, d.validation, d.body, d.message_id, now, d.sender, d.handle,
                d.peer, version))
        else:
            rows, bodies = _rows(sends)
            done = conn.execute(conn.sql.send_direct_many, (rows, bodies, now, version))
        return _Answer(done)


class _Answer:
    """Whether the function wrote its messages, read once COMMIT has answered."""

    __slots__ = ("_done",)

    def __init__(self, done: Cursor) -> None:
        self._done = done

    def __call__(self) -> bool:
        return self._done.rowcount == 1


def _rows(sends: Sequence[Direct]) -> tuple[str, bytes]:
    """sb_send_direct_many's rows (JSON text) and bodies (one bytea), in send order.  The
    text is written here rather than by ``json.dumps``: the numbers and the message ids
    (``messages.new_id``'s UUID text) need no escaping, and a commit's message types are
    few, each encoded once."""
    rows: list[str] = []
    bodies: list[bytes] = []
    append, add = rows.append, bodies.append
    types: dict[tuple[str, str], str] = {}
    offset = 1
    for sender, _, peer, _, mtype, validation, body, message_id in sends:
        kind = types.get((mtype, validation))
        if kind is None:
            kind = types[mtype, validation] = f"{json.dumps(mtype)},{json.dumps(validation)}"
        size = len(body)
        append(f'[{sender},{peer},{kind},"{message_id}",{offset},{size}]')
        add(body)
        offset += size
    return f"[{','.join(rows)}]", b"".join(bodies)
