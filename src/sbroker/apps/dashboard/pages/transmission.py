"""The transmission queue: messages waiting for another broker, by target service."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard.reader import page_number
from sbroker.apps.dashboard.site import Site


def routes(site: Site) -> list[BaseRoute]:
    def transmission(request: Request) -> dict[str, Any]:
        q = request.query_params
        return {**site.reader.transmission(q.get("to_service"), page_number(q.get("page"))),
                "to_service": q.get("to_service") or ""}

    return [Route("/transmission", site.page("transmission.html", transmission))]
