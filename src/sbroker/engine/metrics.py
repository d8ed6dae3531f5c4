"""Counts an operator wants per queue (pgmq's ``metrics()``): messages ready to receive,
messages in conversation groups a transaction holds, messages not yet complete, and
retained ones. One read, no lock taken."""

from __future__ import annotations

from typing import Any

from sbroker.storage.sqlite.sweeper import live

Connection = Any  # a connection of the storage layer (execute() returning rows)

_COUNTS = f"""
SELECT q.name,
       coalesce(sum(m.status = 1 AND l.group_id IS NULL), 0),
       coalesce(sum(m.status = 1 AND l.group_id IS NOT NULL), 0),
       coalesce(sum(m.status = 2), 0),
       coalesce(sum(m.status IN (0, 3)), 0)
FROM sb_queues q
LEFT JOIN sb_messages m ON m.queue_id = q.queue_id AND {live("m")}
LEFT JOIN sb_group_locks l ON l.group_id = m.group_id
GROUP BY q.queue_id ORDER BY q.name
"""


def queue_metrics(conn: Connection) -> list[dict[str, Any]]:
    """One dict per queue: ``queue``, ``ready``, ``locked``, ``incomplete``, ``retained``."""
    return [{"queue": name, "ready": ready, "locked": locked, "incomplete": incomplete,
             "retained": retained}
            for name, ready, locked, incomplete, retained in conn.execute(_COUNTS)]
