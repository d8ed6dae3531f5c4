"""Broker sessions on SQLite: a row per open broker with its process id, and the test that
tells a dead process from a live one (all processes that share a SQLite file run on one
host)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager

from sbroker.storage.processes import process_alive, process_start_token
from sbroker.storage.sqlite.connection import SqliteConnection

__all__ = ["PidLiveness", "process_alive", "process_start_token"]


class PidLiveness:
    """Sessions are rows of sb_sessions (ids never reused: AUTOINCREMENT); a session is dead
    when its process is."""

    def __init__(self, read: Callable[[], AbstractContextManager[SqliteConnection]]) -> None:
        self._read = read

    def register(self, now: float) -> int:
        pid = os.getpid()
        with self._read() as conn:
            cur = conn.execute(conn.sql.register_session,
                               (pid, process_start_token(pid), socket.gethostname(), now))
            assert cur.lastrowid is not None
            return cur.lastrowid

    def dead(self, own: int) -> list[int]:
        with self._read() as conn:
            rows = conn.query_all(conn.sql.other_sessions, (own,))
        return [sid for sid, pid, token, host in rows if not process_alive(pid, token, host)]

    def alive(self, session: int) -> bool:
        """Whether ``session`` is registered and its process runs."""
        with self._read() as conn:
            row = conn.query_one(conn.sql.session_process, (session,))
        return row is not None and process_alive(*row)
