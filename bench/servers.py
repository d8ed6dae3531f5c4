"""PostgreSQL and RabbitMQ started by hand on loopback in temp dirs, once per benchmark run,
and fresh databases for the benchmarks that make their own."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.systems.base import Unavailable
from tools import pgserver

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")
free_port = pgserver.free_port


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `ready` every 0.2 s until it is true; raise Unavailable after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise Unavailable(f"{what} did not come up within {timeout:g} s")
        time.sleep(0.2)


@contextlib.contextmanager
def databases(backend: str, prefix: str = "sbroker-bench-") -> Iterator[Callable[[str], str]]:
    """``new(name)``: a fresh database at each call, a SQLite file in a temp folder or, on
    ``postgres``/``postgresql``, a database of a throwaway server started for the block."""
    numbers = itertools.count(1)
    if backend.startswith("postgres"):
        with pgserver.PostgresServer(prefix=prefix) as server:
            yield lambda name: server.create_database(f"{name}{next(numbers)}")
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield lambda name: str(Path(tmp, f"{name}{next(numbers)}.db"))


class PostgresServer(pgserver.PostgresServer):
    """tools/pgserver.py's throwaway server (``initdb`` + ``pg_ctl`` on a free loopback port,
    as the postgres user when we are root), shared with the test suite; what fails makes the
    systems on it unavailable."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        super().__init__(settings=settings, prefix="sbroker-bench-pg-")

    def start(self) -> PostgresServer:
        try:
            super().start()
        except pgserver.ServerError as exc:
            raise Unavailable(str(exc)) from None
        return self

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """A new empty database; its URL."""
        try:
            return super().create_database(name, template=template)
        except pgserver.ServerError as exc:
            raise Unavailable(str(exc)) from None


class RabbitServer:
    """`rabbitmq-server` with its own node name, ports, epmd and Mnesia dir under a temp dir;
    `stop` is safe to call more than once."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sbroker-bench-rabbit-"))
        self.port = free_port()
        self.started = False
        self.node = f"sbroker-bench-{os.getpid()}@localhost"
        self.epmd_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        d = self.dir
        return {
            **os.environ,
            "HOME": str(d),  # the Erlang cookie lives here
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_PID_FILE": str(d / "pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
        }

    def start(self) -> None:
        server = RABBIT_BIN / "rabbitmq-server"
        if not server.exists():
            raise Unavailable("rabbitmq-server not installed (run bench/setup.sh)")
        (self.dir / "enabled_plugins").write_text("[].\n")
        log = open(self.dir / "stdout.log", "wb")  # noqa: SIM115 - the server owns it
        self.proc = subprocess.Popen([str(server)], env=self._env(), cwd=self.dir,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.started = True
        wait_until(self._accepts, 90, "rabbitmq-server")

    def _accepts(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            out = (self.dir / "stdout.log").read_text(errors="replace").strip().splitlines()
            raise Unavailable(f"rabbitmq-server exited: {' / '.join(out[-3:])}")
        import pika  # the client decides when the broker is really ready

        try:
            pika.BlockingConnection(self.params()).close()
            return True
        except Exception:
            return False

    def params(self) -> Any:
        """pika connection parameters for this server."""
        import pika

        return pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0,
                                         blocked_connection_timeout=60)

    def stop(self) -> None:
        """Stop the server if it runs and remove its temp dir."""
        try:
            if self.started:
                self._shutdown()
        finally:
            self.started = False
            shutil.rmtree(self.dir, ignore_errors=True)

    def _shutdown(self) -> None:
        env = self._env()
        try:
            subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "-n", self.node, "stop"],
                           env=env, capture_output=True, timeout=60)
            if self.proc is not None:
                self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc is not None and self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"],
                           env=env, capture_output=True, timeout=10)


Server = PostgresServer | RabbitServer


class ServerPool:
    """Servers started on first use and all stopped by `close` (also on Ctrl-C or error)."""

    def __init__(self, log: Callable[[str], None] = print,
                 pg_settings: dict[str, str] | None = None) -> None:
        self.log, self.pg_settings = log, pg_settings
        self.servers: dict[str, Server] = {}
        self.failures: dict[str, str] = {}

    def get(self, kind: str) -> Server:
        """The running server of this kind, starting it now if needed."""
        if kind in self.failures:
            raise Unavailable(self.failures[kind])
        if kind not in self.servers:
            server: Server = (PostgresServer(self.pg_settings) if kind == "postgres"
                              else RabbitServer())
            self.servers[kind] = server
            self.log(f"starting {kind} on 127.0.0.1:{server.port} ...")
            t0 = time.perf_counter()
            try:
                server.start()
            except Exception as exc:
                self.failures[kind] = str(exc) or type(exc).__name__
                with contextlib.suppress(Exception):
                    server.stop()
                del self.servers[kind]
                raise Unavailable(self.failures[kind]) from exc
            self.log(f"{kind} up in {time.perf_counter() - t0:.1f} s")
        return self.servers[kind]

    def close(self) -> None:
        """Stop every server this pool started."""
        for kind, server in list(self.servers.items()):
            self.log(f"stopping {kind}")
            try:
                server.stop()
            except Exception as exc:
                self.log(f"could not stop {kind} cleanly: {exc}")
        self.servers.clear()
