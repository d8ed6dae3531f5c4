"""The dashboard's ASGI application (Starlette): the routes of every page module
(``pages/``), the static files, the access guard and the error pages.

Pages are Jinja2 templates; each polls its own address every few seconds with htmx and swaps
in the part marked ``#live`` (no full reload).  Every read runs in Starlette's thread pool
(the broker API is blocking); no route takes SQL or a table name from the request.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from sbroker.apps.dashboard.pages import (
    api,
    conversations,
    login,
    poison,
    queues,
    scheduler,
    transmission,
)
from sbroker.apps.dashboard.reader import BadRequest, Reader
from sbroker.apps.dashboard.security import CSRF_COOKIE, Access
from sbroker.apps.dashboard.site import HERE, DashboardOptions, Site, templates
from sbroker.core.errors import (
    BrokerError,
    ConversationNotFoundError,
    InvalidArgumentError,
    NotFoundError,
)
from sbroker.engine.api import BrokerAPI

__all__ = ["DashboardOptions", "create_app"]

log = logging.getLogger("sbroker.dashboard")
PAGES = (queues, conversations, transmission, scheduler, poison, api, login)


class Guard(BaseHTTPMiddleware):
    """Reading off loopback needs the token; every browser gets a CSRF cookie."""

    def __init__(self, app: ASGIApp, site: Site) -> None:
        super().__init__(app)
        self.site = site

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        fresh = None if request.cookies.get(CSRF_COOKIE) else secrets.token_urlsafe(32)
        request.state.csrf = fresh or request.cookies.get(CSRF_COOKIE)
        if (request.method == "GET" and request.url.path != "/login"
                and not request.url.path.startswith("/static/")
                and not self.site.access.may_read(request)):
            response = self.site.error_page(
                request, 401, "this dashboard needs its token: sign in at /login, or send"
                " Authorization: Bearer <token>")
        else:
            response = await call_next(request)
        if fresh:
            response.set_cookie(CSRF_COOKIE, fresh, path="/", samesite="strict", httponly=True)
        return response


def _error_handlers(site: Site) -> dict[object, Callable[[Request, Exception],
                                                        Awaitable[Response]]]:
    """Every failure as an error page (JSON under /api/) with a fitting status."""

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        return site.error_page(request, exc.status, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return site.error_page(request, exc.status_code, str(exc.detail))

    async def broker_error(request: Request, exc: Exception) -> Response:
        status = (404 if isinstance(exc, NotFoundError | ConversationNotFoundError)
                  else 400 if isinstance(exc, InvalidArgumentError) else 409)
        return site.error_page(request, status, str(exc))

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("dashboard request failed", exc_info=exc,
                  extra={"path": request.url.path})
        return site.error_page(request, 500, f"the dashboard failed: {type(exc).__name__}")

    return {BadRequest: bad_request, HTTPException: http_error, BrokerError: broker_error,
            Exception: server_error}


def create_app(broker: BrokerAPI, options: DashboardOptions | None = None) -> Starlette:
    """The dashboard of one open broker (``Broker.open(...)``; it need not be started)."""
    opts = options or DashboardOptions()
    site = Site(broker, Reader(broker), opts, Access(opts.token, opts.loopback),
                templates(opts.trace_url))
    routes: list[BaseRoute] = [route for module in PAGES for route in module.routes(site)]
    routes.append(Mount("/static", StaticFiles(directory=HERE / "static"), name="static"))
    return Starlette(routes=routes, middleware=[Middleware(Guard, site=site)],
                     exception_handlers=_error_handlers(site))
