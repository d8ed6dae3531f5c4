"""Processes of this host, as both backends' liveness tests see them: a broker session is its
process's, and a process of this host that no longer runs (or is a zombie: killed, not yet
reaped by its parent) is dead at once."""

from __future__ import annotations

import os
import socket

__all__ = ["process_alive", "process_start_token"]


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name, or None (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
        return data.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start_token(pid: int) -> str:
    """Something that changes if ``pid`` is reused by another process (Linux: start time)."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else "?"


def process_alive(pid: int, start_token: str, host: str) -> bool:
    """Whether the process that registered a session still runs; a process of another host
    counts as alive (this host cannot tell)."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(pid)
    if fields is not None and fields[0] in ("Z", "X"):  # killed, its parent not told yet
        return False
    token = process_start_token(pid)
    return token == "?" or start_token == "?" or token == start_token
