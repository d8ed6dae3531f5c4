"""Matching broker priorities to an endpoint, in SQL Server's precedence order (pure;
docs/concepts.md, "Conversation priorities")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ANY = "ANY"
DEFAULT_PRIORITY = 5


@dataclass(frozen=True, slots=True)
class BrokerPriority:
    name: str
    contract: str
    local_service: str
    remote_service: str
    priority_level: int


def _rank(p: BrokerPriority, contract: str, local: str, remote: str) -> int | None:
    """0 (most specific) .. 7 (ANY, ANY, ANY); None when the priority does not apply."""
    if p.contract not in (contract, ANY):
        return None
    if p.local_service not in (local, ANY):
        return None
    if p.remote_service not in (remote, ANY):
        return None
    return (
        (4 if p.contract == ANY else 0)
        + (2 if p.local_service == ANY else 0)
        + (1 if p.remote_service == ANY else 0)
    )


def match_priority(
    priorities: Iterable[BrokerPriority], contract: str, local_service: str, remote_service: str
) -> int:
    """The level for an endpoint: the most specific matching priority, else 5.

    Order: (contract, local, remote) > (contract, local, ANY) > (contract, ANY, remote) >
    (contract, ANY, ANY) > (ANY, local, remote) > (ANY, local, ANY) > (ANY, ANY, remote) >
    (ANY, ANY, ANY).  Local and remote are from the endpoint's own point of view.
    """
    best: tuple[int, int] | None = None
    for p in priorities:
        rank = _rank(p, contract, local_service, remote_service)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, p.priority_level)
    return DEFAULT_PRIORITY if best is None else best[1]
