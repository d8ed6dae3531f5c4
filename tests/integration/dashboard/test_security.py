"""Loopback reads need no token; a non-loopback bind needs one (and reading needs it); every
POST needs the CSRF field and, when a token is set, the token."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import sbroker
from sbroker.apps.dashboard import DashboardError, DashboardServer, check_bind, is_loopback
from sbroker.cli.main import main

from .conftest import Client
from .helpers import csrf, post

TOKEN = "s3cret-token"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("10.1.2.3", False), ("::", False),
    ("example.org", False)])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_bind_refuses_to_start_without_a_token(pair: sbroker.Broker) -> None:
    with pytest.raises(DashboardError, match="without a token: give --token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(DashboardError, match="SBROKER_DASHBOARD_TOKEN"):
        DashboardServer(pair, host="0.0.0.0", port=0)
    check_bind("0.0.0.0", TOKEN)
    check_bind("127.0.0.1", None)


def test_the_cli_refuses_a_non_loopback_bind_without_a_token(tmp_path: object) -> None:
    result = CliRunner(mix_stderr=False).invoke(
        main, ["--db", f"{tmp_path}/d.db", "dashboard", "--host", "0.0.0.0"], env={
            "SBROKER_DASHBOARD_TOKEN": ""})
    assert result.exit_code == 1
    assert "refusing to serve the dashboard on 0.0.0.0 without a token" in result.stderr
    result = CliRunner(mix_stderr=False).invoke(
        main, ["--db", f"{tmp_path}/d.db", "serve", "--dashboard", "--dashboard-host",
               "0.0.0.0"], env={"SBROKER_DASHBOARD_TOKEN": ""})
    assert result.exit_code == 1 and "without a token" in result.stderr


def test_reading_on_loopback_needs_no_token(make_client: Client) -> None:
    client = make_client(token=TOKEN, loopback=True)
    for path in ("/", "/metrics", "/api/views/queue_stats"):
        assert client.get(path).status_code == 200


def test_reading_off_loopback_needs_the_token(make_client: Client) -> None:
    client = make_client(token=TOKEN, loopback=False)
    r = client.get("/")
    assert r.status_code == 401 and "sign in" in r.text
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/login").status_code == 200
    signed_in = client.post("/login", data={"token": TOKEN, "next": "/poison"},
                            follow_redirects=False)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/poison"
    assert client.get("/").status_code == 200  # the token cookie
    assert client.post("/login", data={"token": "nope"}).status_code == 403


def test_a_post_without_the_csrf_field_is_refused(pair: sbroker.Broker,
                                                  client: TestClient) -> None:
    csrf(client)
    r = client.post("/queues/TargetQueue/enable", data={}, follow_redirects=False)
    assert r.status_code == 403 and "CSRF" in r.text
    r = client.post("/queues/TargetQueue/enable", data={"csrf": "forged"},
                    follow_redirects=False)
    assert r.status_code == 403
    assert post(client, "/queues/TargetQueue/enable").status_code == 303


def test_a_post_from_another_site_is_refused(client: TestClient) -> None:
    r = post(client, "/queues/TargetQueue/enable", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-site" in r.text


def test_the_csrf_cookie_is_strict_and_http_only(make_client: Client) -> None:
    cookie = make_client().get("/").headers["set-cookie"]
    assert "sbroker_csrf=" in cookie and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()


def test_with_a_token_every_post_needs_it(make_client: Client) -> None:
    client = make_client(token=TOKEN, loopback=True)
    r = post(client, "/queues/TargetQueue/enable")
    assert r.status_code == 403 and "needs the dashboard&#39;s token" in r.text
    bearer = client.post("/queues/TargetQueue/enable", follow_redirects=False,
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 303  # an API client: no cookie to ride on, no CSRF field
    client.post("/login", data={"token": TOKEN})
    assert post(client, "/queues/TargetQueue/enable").status_code == 303
    client.cookies.delete("sbroker_csrf")
    client.get("/")
    assert client.post("/queues/TargetQueue/enable", follow_redirects=False).status_code == 403


def test_a_form_cannot_send_the_browser_elsewhere(client: TestClient) -> None:
    r = post(client, "/queues/TargetQueue/enable", {"next": "//evil.example/x"})
    assert r.headers["location"] == "/poison"
