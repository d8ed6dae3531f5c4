"""The JSON API (catalog and dynamic-management views) and the Prometheus metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard import metrics
from sbroker.apps.dashboard.site import Site


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def routes(site: Site) -> list[BaseRoute]:
    registry = metrics.registry_for(site.reader)

    async def api_view(request: Request) -> Response:
        rows = await run_in_threadpool(site.reader.view, request.path_params["name"])
        return JSONResponse([{k: _json_safe(v) for k, v in r.items()} for r in rows])

    async def metrics_endpoint(request: Request) -> Response:
        body = await run_in_threadpool(metrics.exposition, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return [Route("/api/views/{name}", api_view), Route("/metrics", metrics_endpoint)]
