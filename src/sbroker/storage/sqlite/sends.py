"""SQLite's :class:`~sbroker.storage.ports.SendPath`: under the group-commit writer one
commit runs at a time, so a direct SEND's INSERT ... SELECT tells at once whether it went in
(its row count); a second statement then numbers the sender's next message."""

from __future__ import annotations

from collections.abc import Sequence

from sbroker.storage.direct import PeerMemory
from sbroker.storage.ports import Connection, Direct, Verdict


class SerialSends(PeerMemory):
    """One SEND per commit, whatever else the commit does (a commit of many numbers them in
    memory on the engine's ordinary path: there is no conversation to lock)."""

    def takes(self, count: int, alone: bool) -> bool:
        return count == 1

    def send(self, conn: Connection, sends: Sequence[Direct], now: float, version: str,
             alone: bool) -> Verdict:
        d = sends[0]
        done = conn.execute(conn.sql.send_direct, (
            d.message_type, d.validation, d.body, d.message_id, now, d.sender, d.handle,
            d.peer, version))
        if done.rowcount != 1:
            return False
        conn.execute(conn.sql.bump_send_seq, (d.sender,))
        return True
