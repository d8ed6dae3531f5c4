"""Who may read and act (docs/dashboard.md, "Actions and security").

- Bound to a loopback address, reading needs no token; bound to any other address the
  dashboard refuses to start without a token, and reading needs it too.
- Every POST needs the token when one is set, and is protected against cross-site requests:
  its form carries the value of the ``sbroker_csrf`` cookie (a double-submit token a foreign
  site can neither read nor set; the cookie is SameSite=Strict), and a POST whose ``Origin``
  names another site is refused.  A client that sends ``Authorization: Bearer <token>`` is no
  browser riding on a cookie, so it needs no CSRF field.
- The token comes as that header, or as the ``sbroker_token`` cookie set by ``/login``.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request

from sbroker.apps.dashboard.reader import BadRequest

CSRF_COOKIE = "sbroker_csrf"
CSRF_FIELD = "csrf"
TOKEN_COOKIE = "sbroker_token"
TOKEN_ENV = "SBROKER_DASHBOARD_TOKEN"


class DashboardError(Exception):
    """A dashboard that must not start as configured (one line: what and how to fix it)."""


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token."""
    if not is_loopback(host) and not token:
        raise DashboardError(
            f"refusing to serve the dashboard on {host} without a token: give --token "
            f"(or set {TOKEN_ENV}), or bind to 127.0.0.1")


@dataclass(frozen=True)
class Access:
    """The token (None: none set) and whether the dashboard listens on loopback only."""

    token: str | None = None
    loopback: bool = True

    def authenticated(self, request: Request) -> bool:
        """The request carries the token (always True when none is set)."""
        if not self.token:
            return True
        return any(_same(candidate, self.token) for candidate in (
            _bearer(request), request.cookies.get(TOKEN_COOKIE)))

    def may_read(self, request: Request) -> bool:
        return self.loopback or self.authenticated(request)

    async def checked_form(self, request: Request) -> FormData:
        """The form of a POST, once the token and the CSRF rules are satisfied."""
        if not self.authenticated(request):
            raise BadRequest("this action needs the dashboard's token: sign in at /login", 403)
        form = await request.form()
        if self.token and _same(_bearer(request), self.token):
            return form  # an API client with the token in a header: no cookie to ride on
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get(
                "host"):
            raise BadRequest(f"cross-site request from {origin} refused", 403)
        sent = form.get(CSRF_FIELD)
        cookie = request.cookies.get(CSRF_COOKIE)
        if not isinstance(sent, str) or not cookie or not _same(sent, cookie):
            raise BadRequest("the form's CSRF token is missing or stale: reload the page and "
                             "try again", 403)
        return form


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())
