"""What every page module of the dashboard shares: the broker, its reader, the templates, and
how a page renders, a form action answers and an error shows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sbroker.apps.dashboard import timeline
from sbroker.apps.dashboard.reader import Reader
from sbroker.apps.dashboard.security import CSRF_FIELD, Access
from sbroker.core.traceparent import trace_id
from sbroker.engine.api import BrokerAPI

__all__ = ["DashboardOptions", "Endpoint", "Site", "local_path"]

HERE = Path(__file__).parent
NOTICE_COOKIE = "sbroker_notice"
NAV = (("/", "Overview"), ("/conversations", "Conversations"), ("/transmission", "Transmission"),
       ("/scheduler", "Scheduler"), ("/poison", "Poison"), ("/metrics", "Metrics"))

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class DashboardOptions:
    """``token``: needed for actions (and for reading off loopback); ``loopback``: bound to a
    loopback address; ``refresh``: seconds between page updates; ``spark_ui``: its address;
    ``trace_url``: a trace viewer's address with ``{trace_id}`` in it (docs/tracing.md)."""

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


def local_path(value: object, default: str) -> str:
    """Where a form sends the browser back: a path of this site only."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return value
    return default


def templates(trace_url: str | None = None) -> Environment:
    """The Jinja2 templates with the dashboard's filters; ``trace_url`` links trace ids."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(["html"]))
    env.filters.update(age=_age, epoch=_epoch, body=_body, clock=_clock,
                       task=timeline.task_name, trace_id=trace_id)
    env.globals["trace_url"] = trace_url  # the trace macro links trace ids with it
    return env


@dataclass(frozen=True)
class Site:
    """One dashboard: its broker, reader, options, access rules and templates."""

    broker: BrokerAPI
    reader: Reader
    options: DashboardOptions
    access: Access
    env: Environment

    def render(self, request: Request, name: str, context: dict[str, Any],
               status: int = 200) -> HTMLResponse:
        """A page from its template; a notice left by the last action is shown once."""
        notice = request.cookies.get(NOTICE_COOKIE)
        html = self.env.get_template(name).render(
            request=request, nav=NAV, refresh=self.options.refresh, notice=notice,
            csrf=request.state.csrf, csrf_field=CSRF_FIELD, **context)
        response = HTMLResponse(html, status_code=status)
        if notice:
            response.delete_cookie(NOTICE_COOKIE, path="/")
        return response

    def error_page(self, request: Request, status: int, message: str) -> Response:
        """The error as JSON under /api/, else as a page."""
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        if not hasattr(request.state, "csrf"):
            request.state.csrf = ""
        return self.render(request, "error.html", {"status": status, "message": message},
                           status)

    def page(self, name: str, build: Callable[[Request], dict[str, Any]]) -> Endpoint:
        """A GET page: ``build`` (blocking reads, in the thread pool) fills template ``name``."""
        async def endpoint(request: Request) -> Response:
            context = await run_in_threadpool(build, request)
            return self.render(request, name, context)
        return endpoint

    def action(self, run: Callable[[Request, FormData], str], default: str) -> Endpoint:
        """A checked POST: ``run`` acts and returns a notice; the browser goes back."""
        async def endpoint(request: Request) -> Response:
            form = await self.access.checked_form(request)
            notice = await run_in_threadpool(run, request, form)
            response = RedirectResponse(local_path(form.get("next"), default), 303)
            response.set_cookie(NOTICE_COOKIE, notice[:300], path="/", samesite="strict",
                                httponly=True)
            return response
        return endpoint
