"""The dashboard's ASGI application (Starlette): pages, the JSON API, /metrics and actions.

Pages are Jinja2 templates; each polls its own address every few seconds with htmx and swaps
in the part marked ``#live`` (no full reload).  Every read runs in Starlette's thread pool
(the broker API is blocking); no route takes SQL or a table name from the request.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sbroker.apps.dashboard import actions, metrics, pipeline_runs, timeline
from sbroker.apps.dashboard.reader import BadRequest, BrokerApi, Reader, page_number
from sbroker.apps.dashboard.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    TOKEN_COOKIE,
    Access,
)
from sbroker.core import tracing
from sbroker.core.errors import (
    BrokerError,
    ConversationNotFoundError,
    InvalidArgumentError,
    NotFoundError,
)

__all__ = ["DashboardOptions", "create_app"]

HERE = Path(__file__).parent
NOTICE_COOKIE = "sbroker_notice"
log = logging.getLogger("sbroker.dashboard")
NAV = (("/", "Overview"), ("/conversations", "Conversations"), ("/transmission", "Transmission"),
       ("/scheduler", "Scheduler"), ("/poison", "Poison"), ("/metrics", "Metrics"))


@dataclass(frozen=True)
class DashboardOptions:
    """``token``: needed for actions (and for reading off loopback); ``loopback``: bound to a
    loopback address; ``refresh``: seconds between page updates; ``spark_ui``: its address;
    ``trace_url``: a trace viewer's address with ``{trace_id}`` in it (SPEC §15)."""

    token: str | None = None
    loopback: bool = True
    refresh: float = 3.0
    spark_ui: str | None = None
    trace_url: str | None = None


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _epoch(value: float | None) -> str:
    if not value:
        return "-"
    return dt.datetime.fromtimestamp(float(value), dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _body(value: bytes | str | None, limit: int = 120) -> str:
    if value is None:
        return ""
    text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clock(value: str | None) -> str:
    """An ExecutionLog time (ISO text) as its time of day, to the millisecond."""
    if not value:
        return "-"
    try:
        return dt.datetime.fromisoformat(value).strftime("%H:%M:%S.%f")[:-3]
    except ValueError:
        return value


def _local_path(value: object, default: str) -> str:
    """Where a form sends the browser back: a path of this site only."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return value
    return default


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def create_app(broker: BrokerApi, options: DashboardOptions | None = None) -> Starlette:
    """The dashboard of one open broker (``Broker.open(...)``; it need not be started)."""
    opts = options or DashboardOptions()
    access = Access(opts.token, opts.loopback)
    reader = Reader(broker)
    registry = metrics.registry_for(reader)
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(["html"]))
    env.filters.update(age=_age, epoch=_epoch, body=_body, clock=_clock,
                       task=timeline.task_name, trace_id=tracing.trace_id)
    env.globals["trace_url"] = opts.trace_url  # the trace macro links trace ids with it

    def render(request: Request, name: str, context: dict[str, Any],
               status: int = 200) -> HTMLResponse:
        notice = request.cookies.get(NOTICE_COOKIE)
        html = env.get_template(name).render(
            request=request, nav=NAV, refresh=opts.refresh, notice=notice,
            csrf=request.state.csrf, csrf_field=CSRF_FIELD, **context)
        response = HTMLResponse(html, status_code=status)
        if notice:
            response.delete_cookie(NOTICE_COOKIE, path="/")
        return response

    def error_page(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        if not hasattr(request.state, "csrf"):
            request.state.csrf = ""
        return render(request, "error.html", {"status": status, "message": message}, status)

    def page(name: str, build: Callable[[Request], dict[str, Any]]) -> Callable[
            [Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            context = await run_in_threadpool(build, request)
            return render(request, name, context)
        return endpoint

    def action(run: Callable[[Request, Any], str], default: str) -> Callable[
            [Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            form = await access.checked_form(request)
            notice = await run_in_threadpool(run, request, form)
            response = RedirectResponse(_local_path(form.get("next"), default), 303)
            response.set_cookie(NOTICE_COOKIE, notice[:300], path="/", samesite="strict",
                                httponly=True)
            return response
        return endpoint

    # -- pages ---------------------------------------------------------------------------
    def overview(request: Request) -> dict[str, Any]:
        return reader.overview()

    def queue(request: Request) -> dict[str, Any]:
        q = request.query_params
        return reader.queue_detail(request.path_params["name"], page_number(q.get("page")),
                                   page_number(q.get("groups_page")))

    def conversations(request: Request) -> dict[str, Any]:
        q = request.query_params
        return {**reader.conversations(q, page_number(q.get("page"))), "filters": q}

    def transmission(request: Request) -> dict[str, Any]:
        q = request.query_params
        return {**reader.transmission(q.get("to_service"), page_number(q.get("page"))),
                "to_service": q.get("to_service") or ""}

    def scheduler(request: Request) -> dict[str, Any]:
        q = request.query_params
        data = timeline.scheduler_page(reader, q, page_number(q.get("page")), opts.spark_ui)
        return {**data, "filters": q}

    def poison(request: Request) -> dict[str, Any]:
        return actions.poison_page(reader)

    # -- actions ---------------------------------------------------------------------------
    def enable(request: Request, form: Any) -> str:
        return actions.enable_queue(reader, request.path_params["name"])

    def redrive(request: Request, form: Any) -> str:
        ids = None if form.get("all") else actions.record_ids(form.getlist("record"))
        return actions.redrive(broker, ids).summary()

    def cancel(request: Request, form: Any) -> str:
        return actions.cancel(broker, request.path_params["log_id"])

    def end(request: Request, form: Any) -> str:
        return actions.end_conversation(broker, request.path_params["handle"])

    # -- API, metrics, login ------------------------------------------------------------------
    async def api_view(request: Request) -> Response:
        rows = await run_in_threadpool(reader.view, request.path_params["name"])
        return JSONResponse([{k: _json_safe(v) for k, v in r.items()} for r in rows])

    async def metrics_endpoint(request: Request) -> Response:
        body = await run_in_threadpool(metrics.exposition, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render(request, "login.html", {"next": request.query_params.get("next")})
        form = await request.form()
        token = form.get("token")
        if not opts.token or not isinstance(token, str) or not secrets.compare_digest(
                token.encode(), opts.token.encode()):
            raise BadRequest("wrong token: use the dashboard's --token", 403)
        response = RedirectResponse(_local_path(form.get("next"), "/"), 303)
        response.set_cookie(TOKEN_COOKIE, token, path="/", samesite="strict", httponly=True)
        return response

    routes = [
        Route("/", page("index.html", overview)),
        Route("/queues/{name}", page("queue.html", queue)),
        Route("/queues/{name}/enable", action(enable, "/poison"), methods=["POST"]),
        Route("/conversations", page("conversations.html", conversations)),
        Route("/conversations/{handle}/end", action(end, "/conversations"), methods=["POST"]),
        Route("/transmission", page("transmission.html", transmission)),
        Route("/scheduler", page("scheduler.html", scheduler)),
        Route("/scheduler/runs", page("pipeline_runs.html",
                                      lambda request: pipeline_runs.runs_page(broker))),
        Route("/scheduler/tasks/{log_id:int}/cancel", action(cancel, "/scheduler"),
              methods=["POST"]),
        Route("/poison", page("poison.html", poison)),
        Route("/poison/redrive", action(redrive, "/poison"), methods=["POST"]),
        Route("/api/views/{name}", api_view),
        Route("/metrics", metrics_endpoint),
        Route("/login", login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    class Guard(BaseHTTPMiddleware):
        """Reading off loopback needs the token; every browser gets a CSRF cookie."""

        async def dispatch(self, request: Request,
                           call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            fresh = None if request.cookies.get(CSRF_COOKIE) else secrets.token_urlsafe(32)
            request.state.csrf = fresh or request.cookies.get(CSRF_COOKIE)
            if (request.method == "GET" and request.url.path != "/login"
                    and not request.url.path.startswith("/static/")
                    and not access.may_read(request)):
                response = error_page(request, 401, "this dashboard needs its token: sign in "
                                      "at /login, or send Authorization: Bearer <token>")
            else:
                response = await call_next(request)
            if fresh:
                response.set_cookie(CSRF_COOKIE, fresh, path="/", samesite="strict",
                                    httponly=True)
            return response

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        return error_page(request, exc.status, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_page(request, exc.status_code, str(exc.detail))

    async def broker_error(request: Request, exc: Exception) -> Response:
        status = (404 if isinstance(exc, NotFoundError | ConversationNotFoundError)
                  else 400 if isinstance(exc, InvalidArgumentError) else 409)
        return error_page(request, status, str(exc))

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("dashboard request failed", exc_info=exc,
                  extra={"path": request.url.path})
        return error_page(request, 500, f"the dashboard failed: {type(exc).__name__}")

    return Starlette(
        routes=routes, middleware=[Middleware(Guard)],
        exception_handlers={BadRequest: bad_request, HTTPException: http_error,
                            BrokerError: broker_error, Exception: server_error},
    )
