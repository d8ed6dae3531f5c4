"""Spark Connect in bounded time: a server that does not answer fails the tasks that need it
within ``SparkConfig.connect_timeout`` seconds, with one line that names its address and
what to check, instead of PySpark's ten minutes of retries ending in ``RetriesExceeded``."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from sbroker.core.errors import BrokerError

__all__ = ["SparkUnavailable", "address_of", "bound_retries", "lost", "wait_for_server"]

DEFAULT_PORT = 15002  # Spark Connect's own default
_PAUSE = 0.25  # between two attempts to reach the server
_MAX_BACKOFF_MS = 5000  # longest pause between two retries of one request


class SparkUnavailable(BrokerError):
    """The Spark Connect server could not be reached (every task that needs it fails)."""


def address_of(remote: str) -> tuple[str, int]:
    """(host, port) of an ``sc://host:port/;params`` URL."""
    parts = urlsplit(remote.split(";", 1)[0])
    return parts.hostname or "localhost", parts.port or DEFAULT_PORT


def wait_for_server(remote: str, timeout: float,
                    abort: Callable[[], bool] | None = None) -> None:
    """Return once a TCP connection to the server opens; SparkUnavailable after ``timeout``
    seconds of refused or unanswered attempts (a server still starting gets that long), or
    as soon as ``abort()`` says that nobody waits for it any more (the tasks were cancelled)."""
    host, port = address_of(remote)
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if abort is not None and abort():
            raise SparkUnavailable(f"gave up reaching the Spark Connect server at {remote}:"
                                   " the tasks waiting for it were cancelled")
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.05, min(left, 5.0))):
                return
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if time.monotonic() + _PAUSE >= deadline:
                raise SparkUnavailable(
                    f"cannot reach the Spark Connect server at {remote} within {timeout:g} s"
                    f" ({reason}): check that it runs and that host and port are right"
                ) from None
        pause.wait(_PAUSE)


def bound_retries(session: Any, timeout: float) -> None:
    """Retry a failed request for about ``timeout`` seconds in all, not PySpark's ten
    minutes: a server that goes away during a run fails its tasks in bounded time."""
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy
    except ImportError:  # an older PySpark: keep its policy
        return
    retries, waited, backoff = 0, 0.0, 0.05
    while waited + backoff <= timeout:
        waited += backoff
        retries += 1
        backoff = min(backoff * 4, _MAX_BACKOFF_MS / 1000)
    session.client.set_retry_policies(
        [DefaultPolicy(max_retries=max(retries, 1), max_backoff=_MAX_BACKOFF_MS)])


def lost(remote: str, error: str) -> str:
    """The one line for a task whose requests to the server kept failing."""
    return (f"the Spark Connect server at {remote} stopped answering ({error}): check that"
            " it is still running")
