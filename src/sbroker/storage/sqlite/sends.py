"""SQLite's :class:`~sbroker.storage.ports.SendPath`: under the group-commit writer one
commit runs at a time, so the direct SENDs' INSERT ... SELECTs tell at once whether they all
went in (their row count); a second statement then numbers each sender's next message."""

from __future__ import annotations

from collections.abc import Sequence

from sbroker.storage.direct import PeerMemory
from sbroker.storage.ports import Connection, Direct, Verdict


class SerialSends(PeerMemory):
    """Any number of SENDs per commit, whatever else the commit does. Each message is
    numbered in its statement from its sender's ``send_seq`` and its place among the commit's
    messages on that conversation. When some do not go in (a conversation changed since its
    peer was learned), those that did are deleted again and the commit goes the ordinary
    way: all or nothing, without a savepoint (which would copy every page the statement
    touches)."""

    def takes(self, count: int, alone: bool) -> bool:
        return True

    def send(self, conn: Connection, sends: Sequence[Direct], now: float, version: str,
             alone: bool) -> Verdict:
        placed: dict[int, int] = {}  # sender rowid -> how many of its messages so far
        rows = []
        for d in sends:
            place = placed.get(d.sender, 0)
            placed[d.sender] = place + 1
            rows.append((place, d.message_type, d.validation, d.body, d.message_id, now,
                         d.trace, d.sender, d.handle, d.peer, version))
        if len(rows) == 1:  # W1's commit: plain calls cost less than executemany's
            if conn.execute(conn.sql.send_direct, rows[0]).rowcount != 1:
                return False
            conn.execute(conn.sql.bump_send_seq, (1, rows[0][7]))
            return True
        went = conn.executemany(conn.sql.send_direct, rows).rowcount
        if went != len(rows):
            if went:
                conn.execute(conn.sql.unsend_direct, (went,))
            return False
        conn.executemany(conn.sql.bump_send_seq, [(n, s) for s, n in placed.items()])
        return True
