"""Conversation endpoints, filtered and paged, with END CONVERSATION ... WITH CLEANUP."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard import actions
from sbroker.apps.dashboard.reader import page_number
from sbroker.apps.dashboard.site import Site


def routes(site: Site) -> list[BaseRoute]:
    def conversations(request: Request) -> dict[str, Any]:
        q = request.query_params
        return {**site.reader.conversations(q, page_number(q.get("page"))), "filters": q}

    def end(request: Request, form: FormData) -> str:
        return actions.end_conversation(site.broker, request.path_params["handle"])

    return [
        Route("/conversations", site.page("conversations.html", conversations)),
        Route("/conversations/{handle}/end", site.action(end, "/conversations"),
              methods=["POST"]),
    ]
