"""Between instances (SPEC §7): the broker endpoint, route resolution, the transmitter and
the receiver around the sans-IO protocol core in :mod:`sbroker.protocol`."""

from __future__ import annotations

from .config import EndpointConfig
from .routing import Resolution, resolve
from .service import NetworkService

__all__ = ["EndpointConfig", "NetworkService", "Resolution", "resolve"]
