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
                d.peer, version, d.trace))
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
    """sb_send_direct_many's rows (JSON text: sender, peer, message type, validation, message
    id, the body's 1-based offset and length, trace context) and bodies (one bytea), in send
    order."""
    rows: list[list[object]] = []
    offset = 1
    for d in sends:
        rows.append([d.sender, d.peer, d.message_type, d.validation, d.message_id, offset,
                     len(d.body), d.trace])
        offset += len(d.body)
    return json.dumps(rows), b"".join(d.body for d in sends)
