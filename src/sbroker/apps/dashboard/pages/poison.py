"""Disabled queues and parked poison messages, with re-drive."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard import actions
from sbroker.apps.dashboard.site import Site


def routes(site: Site) -> list[BaseRoute]:
    def poison(request: Request) -> dict[str, Any]:
        return actions.poison_page(site.broker, site.reader)

    def redrive(request: Request, form: FormData) -> str:
        ids = None if form.get("all") else actions.record_ids(form.getlist("record"))
        return actions.redrive(site.broker, ids).summary()

    return [
        Route("/poison", site.page("poison.html", poison)),
        Route("/poison/redrive", site.action(redrive, "/poison"), methods=["POST"]),
    ]
