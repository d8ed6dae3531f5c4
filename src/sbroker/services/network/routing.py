"""Route resolution for the transmitter: where a message for (service, broker instance) goes.

Matching, first tier that matches wins (inside a tier, the route with the smallest name):
1. the service name and the message's broker instance; 2. the service name, route without a
broker instance; 3. the service name, any broker instance (the dialog named none);
4. no service name, the message's broker instance; 5. ``TRANSPORT`` routes, whose address is
derived from the service name itself: a service named ``tcp://host:port/anything`` is
reached at ``host:port``; 6. wildcard routes (no service, no instance) with a tcp address.
A service served by a local queue, with no tcp route naming it, is local (the engine
delivers it); otherwise ``LOCAL`` routes never send anything away. Expired routes are ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from sbroker.core.catalog import Route
from sbroker.engine.endpoints import STATUS_NO_ROUTE

Address = tuple[str, int]


@dataclass(frozen=True)
class Resolution:
    """``local``: the engine's business; ``remote``: send to ``address``; ``none``: wait."""

    kind: Literal["local", "remote", "none"]
    address: Address | None = None
    target_instance: str | None = None
    status: str = ""


NO_ROUTE = Resolution("none", status=STATUS_NO_ROUTE)


def parse_tcp(address: str) -> Address | None:
    """``tcp://host:port[/...]`` → (host, port), else None."""
    if not address.startswith("tcp://"):
        return None
    hostport = address[len("tcp://") :].split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


def resolve(
    routes: Sequence[Route],
    *,
    me: str,
    local_services: Collection[str],
    to_service: str,
    to_instance: str | None,
    now: float,
) -> Resolution:
    """Where a message for ``to_service`` (at ``to_instance``, if known) goes from here."""
    live = sorted(
        (r for r in routes if r.expires_at is None or r.expires_at > now), key=lambda r: r.name
    )
    named_tcp = [r for r in live if r.service_name == to_service and r.address != "LOCAL"]
    if to_instance == me or (
        to_instance is None and to_service in local_services and not named_tcp
    ):
        return Resolution("local")
    named = [r for r in live if r.service_name == to_service]
    tiers = (
        [r for r in named if to_instance is not None and r.broker_instance == to_instance],
        [r for r in named if r.broker_instance is None],
        [r for r in named if to_instance is None],
        [r for r in live if r.service_name is None and r.broker_instance == to_instance
         and to_instance is not None],
        [r for r in live if r.address == "TRANSPORT" and r.service_name in (None, to_service)],
        [r for r in live if r.service_name is None and r.broker_instance is None
         and r.address.startswith("tcp://")],
    )
    for tier in tiers:
        for route in tier:
            if route.address == "LOCAL":
                if to_service in local_services:
                    return Resolution("local")
                continue
            source = to_service if route.address == "TRANSPORT" else route.address
            address = parse_tcp(source)
            if address is None:
                continue
            instance = to_instance or route.broker_instance
            return Resolution("remote", address, instance)
    return NO_ROUTE
