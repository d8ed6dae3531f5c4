"""The overview (every queue) and one queue's page, with its enable action."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard import actions
from sbroker.apps.dashboard.reader import page_number
from sbroker.apps.dashboard.site import Site


def routes(site: Site) -> list[BaseRoute]:
    reader = site.reader

    def overview(request: Request) -> dict[str, Any]:
        return reader.overview()

    def queue(request: Request) -> dict[str, Any]:
        q = request.query_params
        return reader.queue_detail(request.path_params["name"], page_number(q.get("page")),
                                   page_number(q.get("groups_page")))

    def enable(request: Request, form: FormData) -> str:
        return actions.enable_queue(reader, request.path_params["name"])

    return [
        Route("/", site.page("index.html", overview)),
        Route("/queues/{name}", site.page("queue.html", queue)),
        Route("/queues/{name}/enable", site.action(enable, "/poison"), methods=["POST"]),
    ]
