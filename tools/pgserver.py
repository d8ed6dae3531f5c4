"""A throwaway PostgreSQL server: ``initdb`` + ``pg_ctl`` on a free loopback port in a
temporary folder (as the ``postgres`` user when we are root), for the test suite and the
benchmarks.  ``python -m tools.pgserver`` starts one and prints its URL until Ctrl-C.

Errors are :class:`ServerError` with one line saying what failed and how to fix it: the test
suite fails on them loudly (it never skips), the benchmarks mark the system unavailable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
INSTALL_HINT = "install the Debian package 'postgresql' (make setup does, as root)"


class ServerError(RuntimeError):
    """The throwaway server could not be set up, started or stopped."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(name: str) -> str:
    """The path of a PostgreSQL server program (newest installed major version first)."""
    for folder in PG_BIN_DIRS:
        if (folder / name).exists():
            return str(folder / name)
    found = shutil.which(name)
    if not found:
        raise ServerError(f"PostgreSQL's {name} was not found: {INSTALL_HINT}")
    return found


class PostgresServer:
    """One server in its own temp folder.  ``start``, then ``url(dbname)``; ``stop`` is safe
    to call more than once and removes the folder."""

    def __init__(self, *, settings: dict[str, str] | None = None, prefix: str = "sbroker-pg-"
                 ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.port = free_port()
        self.settings = {"fsync": "on", "max_connections": "300",
                         "max_locks_per_transaction": "256", **(settings or {})}
        self.started = False

    # -- running programs ------------------------------------------------------------------
    def _as_owner(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def _run(self, cmd: list[str], timeout: float = 120) -> str:
        try:
            done = subprocess.run(self._as_owner(cmd), capture_output=True, text=True,
                                  timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServerError(f"{Path(cmd[0]).name} failed: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            log = self.dir / "log"
            if log.exists():
                tail += log.read_text(errors="replace").strip().splitlines()[-3:]
            raise ServerError(f"{Path(cmd[0]).name} failed: {' / '.join(tail)}")
        return done.stdout

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> PostgresServer:
        data = self.dir / "data"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run([binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--locale=C", "--no-sync"])
        self.started = True
        self._pg_ctl("start")
        return self

    def _options(self) -> str:
        extra = " ".join(f"-c {k}={v}" for k, v in self.settings.items())
        return (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.dir} {extra}")

    def _pg_ctl(self, action: str, mode: str = "fast") -> None:
        cmd = [binary("pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "log"),
               "-w", "-t", "60"]
        if action in ("start", "restart"):
            cmd += ["-o", self._options()]
        if action in ("stop", "restart"):
            cmd += ["-m", mode]
        self._run([*cmd, action])

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnect every client) and start it again."""
        self._pg_ctl("restart", mode)

    def stop(self) -> None:
        try:
            if self.started:
                self._pg_ctl("stop", "immediate")
        finally:
            self.started = False
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def cpu_seconds(self) -> float:
        """CPU seconds the server's processes have used since it started (Linux): the
        postmaster's, its live children's, and those of the children that exited (the
        postmaster waits for them, so theirs is in its cutime and cstime)."""
        postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # it exited meanwhile: its time is in the postmaster's cutime
            pid, parent = int(stat.parent.name), int(fields[1])
            if pid == postmaster:
                ticks += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
            elif parent == postmaster:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients -------------------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname``."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def sql(self, statement: str, dbname: str = "postgres") -> str:
        """Run one statement with psql (as the superuser); its output."""
        return self._run([binary("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                          "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                          "-d", dbname, "-c", statement], timeout=60)

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """A new empty database; its URL."""
        clause = f" TEMPLATE {template}" if template else ""
        self.sql(f"CREATE DATABASE {name}{clause}")
        return self.url(name)


def main() -> None:
    import time

    with PostgresServer() as server:
        print(server.url(), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
