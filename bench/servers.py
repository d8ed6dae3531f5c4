"""PostgreSQL and RabbitMQ started by hand on loopback in temp dirs, once per benchmark run."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.systems.base import Unavailable

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `ready` every 0.2 s until it is true; raise Unavailable after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise Unavailable(f"{what} did not come up within {timeout:g} s")
        time.sleep(0.2)


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a command, returning its output; raise Unavailable with its output on failure."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise Unavailable(f"{Path(cmd[0]).name} failed: {' / '.join(tail)}")
    return done.stdout


class Server(ABC):
    """A server process living in its own temp dir; `stop` is safe to call more than once."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"sbroker-bench-{self.label}-"))
        self.port = free_port()
        self.started = False

    label = "server"

    @abstractmethod
    def start(self) -> None:
        """Start the server and wait until it accepts clients."""

    @abstractmethod
    def _shutdown(self) -> None:
        """Stop the server process(es)."""

    def stop(self) -> None:
        """Stop the server if it runs and remove its temp dir."""
        try:
            if self.started:
                self._shutdown()
        finally:
            self.started = False
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgresServer(Server):
    """`initdb` + `pg_ctl` on a free loopback port, as the postgres user when we are root."""

    label = "pg"

    def _as_owner(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def _bin(self, name: str) -> str:
        for d in PG_BIN_DIRS:
            if (d / name).exists():
                return str(d / name)
        found = shutil.which(name)
        if not found:
            raise Unavailable(f"PostgreSQL's {name} not found (run bench/setup.sh)")
        return found

    def start(self) -> None:
        data = self.dir / "data"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        _run(self._as_owner([self._bin("initdb"), "-D", str(data), "-U", "postgres",
                             "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]))
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.dir} -c fsync=on")
        self.started = True
        _run(self._as_owner([self._bin("pg_ctl"), "-D", str(data), "-l",
                             str(self.dir / "log"), "-o", opts, "-w", "-t", "60", "start"]))

    def _shutdown(self) -> None:
        _run(self._as_owner([self._bin("pg_ctl"), "-D", str(self.dir / "data"),
                             "-m", "fast", "-w", "stop"]))

    def dsn(self) -> str:
        """A libpq connection string for the server's postgres database."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"


class RabbitServer(Server):
    """`rabbitmq-server` with its own node name, ports, epmd and Mnesia dir under a temp dir."""

    label = "rabbit"

    def __init__(self) -> None:
        super().__init__()
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


SERVER_KINDS: dict[str, type[Server]] = {"postgres": PostgresServer, "rabbitmq": RabbitServer}


class ServerPool:
    """Servers started on first use and all stopped by `close` (also on Ctrl-C or error)."""

    def __init__(self, log: Callable[[str], None] = print) -> None:
        self.log = log
        self.servers: dict[str, Server] = {}
        self.failures: dict[str, str] = {}

    def get(self, kind: str) -> Server:
        """The running server of this kind, starting it now if needed."""
        if kind in self.failures:
            raise Unavailable(self.failures[kind])
        if kind not in self.servers:
            server = SERVER_KINDS[kind]()
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
