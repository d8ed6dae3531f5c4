"""Signing in with the dashboard's token (kept in an HTTP-only cookie)."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard.reader import BadRequest
from sbroker.apps.dashboard.security import TOKEN_COOKIE
from sbroker.apps.dashboard.site import Site, local_path


def routes(site: Site) -> list[BaseRoute]:
    expected = site.options.token

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return site.render(request, "login.html", {"next": request.query_params.get("next")})
        form = await request.form()
        token = form.get("token")
        if not expected or not isinstance(token, str) or not secrets.compare_digest(
                token.encode(), expected.encode()):
            raise BadRequest("wrong token: use the dashboard's --token", 403)
        response = RedirectResponse(local_path(form.get("next"), "/"), 303)
        response.set_cookie(TOKEN_COOKIE, token, path="/", samesite="strict", httponly=True)
        return response

    return [Route("/login", login, methods=["GET", "POST"])]
