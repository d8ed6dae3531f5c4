"""Serving the dashboard with uvicorn: in the foreground (``sbroker dashboard``) or in a
thread beside a started broker's services (``sbroker serve --dashboard``).

The listening socket is bound before uvicorn starts, so the address is known (port 0 picks a
free one) and a browser that connects early waits in the backlog instead of being refused.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import uvicorn

from sbroker.apps.dashboard.app import DashboardOptions, create_app
from sbroker.apps.dashboard.security import check_bind, is_loopback
from sbroker.core import threads
from sbroker.engine.api import BrokerAPI

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardServer"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470


class DashboardServer:
    """The dashboard of ``broker`` on ``host:port``; ``run()`` blocks, ``start()``/``stop()``
    run it in a thread (the shape of a broker service: ``broker.add_service(server)``)."""

    def __init__(self, broker: BrokerAPI, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 token: str | None = None, refresh: float = 3.0,
                 spark_ui: str | None = None, trace_url: str | None = None) -> None:
        check_bind(host, token)
        self.options = DashboardOptions(token=token or None, loopback=is_loopback(host),
                                        refresh=refresh, spark_ui=spark_ui, trace_url=trace_url)
        self.app = create_app(broker, self.options)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host.strip("[]"), port))
        except OSError as exc:
            self.socket.close()
            raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}; pick another "
                          f"--port") from None
        self.socket.listen(128)
        self.host = host
        self.port = int(self.socket.getsockname()[1])
        self._server = uvicorn.Server(uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve until SIGINT/SIGTERM (in the main thread) or ``stop()``."""
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self.socket.close()

    def start(self) -> None:
        """Serve in a thread of its own."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="sbroker-dashboard",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop serving and join the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            threads.join(self._thread)
            self._thread = None
        else:
            self.socket.close()

    def __enter__(self) -> DashboardServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
