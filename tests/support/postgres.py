"""The throwaway PostgreSQL server of a test run (tools/pgserver.py): started on first use,
stopped when the run ends (also on failure); a fresh database per target.  A server that
cannot start fails the tests that need it, with the reason: they never skip."""

from __future__ import annotations

import contextlib
import itertools
import threading

import pytest

from tools.pgserver import PostgresServer, ServerError

SETTINGS = {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}


class RunServer:
    """The run's server and the databases it handed out."""

    def __init__(self) -> None:
        self._server: PostgresServer | None = None
        self._error: str | None = None
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def server(self) -> PostgresServer:
        with self._lock:
            if self._error is not None:
                pytest.fail(f"the test PostgreSQL server could not start: {self._error}",
                            pytrace=False)
            if self._server is None:
                server = PostgresServer(settings=SETTINGS, prefix="sbroker-test-pg-")
                try:
                    server.start()
                except ServerError as exc:
                    server.stop()
                    self._error = str(exc)
                    pytest.fail(f"the test PostgreSQL server could not start: {exc}",
                                pytrace=False)
                self._server = server
            return self._server

    def new_database(self) -> str:
        """The URL of a new, empty database."""
        name = f"sb_test_{next(self._numbers)}"
        return self.server.create_database(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with contextlib.suppress(ServerError):
            self.server.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()
