"""The operations dashboard (docs/dashboard.md): pages, the JSON API, Prometheus metrics and the
administrator's actions, served from a broker database by Starlette and uvicorn.

Needs the ``dashboard`` extra (``pip install 'sbroker[dashboard]'``).
"""

from __future__ import annotations

from sbroker.apps.dashboard.app import DashboardOptions, create_app
from sbroker.apps.dashboard.security import DashboardError, check_bind, is_loopback
from sbroker.apps.dashboard.server import DEFAULT_HOST, DEFAULT_PORT, DashboardServer

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardError", "DashboardOptions",
           "DashboardServer", "check_bind", "create_app", "is_loopback"]
