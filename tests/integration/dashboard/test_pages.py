"""Every page and the JSON API answer, show what docs/dashboard.md names, page long lists, and
turn bad input into a 4xx page (never a traceback)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support.otel import traced

import sbroker
from sbroker.apps.dashboard.reader import API_VIEWS, PAGE_SIZE
from sbroker.apps.spark import StubRunner
from sbroker.core.traceparent import trace_id

from .helpers import send

PAGES = ("/", "/queues/TargetQueue", "/conversations", "/transmission", "/scheduler",
         "/poison", "/login")


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_and_polls_itself(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "/static/htmx.min.js" in r.text
    if path != "/login":
        assert 'hx-trigger="every 3.0s"' in r.text and 'hx-select="#live"' in r.text


def test_static_files_are_served_locally(client: TestClient) -> None:
    assert client.get("/static/htmx.min.js").text.startswith("var htmx=")
    assert "gantt" in client.get("/static/dashboard.css").text


def test_overview_shows_each_queue_with_ready_locked_age_readers_and_status(
        pair: sbroker.Broker, client: TestClient) -> None:
    send(pair, 3)
    tx = pair.transaction()
    tx.receive("TargetQueue", top=1)  # holds the group: its 3 messages are locked
    try:
        send(pair, 2)
        r = client.get("/")
    finally:
        tx.rollback()
    row = r.text.split('id="queue-TargetQueue"')[1].split("</tr>")[0]
    assert '<td class="num ready">2</td>' in row and '<td class="num locked">3</td>' in row
    assert "enabled" in row and "0 / 0" in row
    assert 'id="transmission"' in r.text and 'id="connections"' not in r.text


def test_queue_page_peeks_a_page_of_messages_and_names_the_lock_holder(
        pair: sbroker.Broker, client: TestClient) -> None:
    for _ in range(3):
        send(pair, PAGE_SIZE)
    tx = pair.transaction()
    tx.receive("TargetQueue", top=1)
    with pair.transaction() as other:  # a commit writes the lock the writer keeps in memory
        other.begin_dialog("InitService", "TargetService")
    try:
        first = client.get("/queues/TargetQueue")
        second = client.get("/queues/TargetQueue?page=2")
    finally:
        tx.rollback()
    assert first.text.count('<td class="body">hello</td>') == PAGE_SIZE
    assert "page 1 of 3" in first.text and "page 2 of 3" in second.text
    locks = first.text.split('id="locks"')[1].split("</table>")[0]
    assert f"<td>{os.getpid()}</td>" in locks  # held by this process
    assert len(pair.peek("TargetQueue")) == 3 * PAGE_SIZE  # nothing was received


def test_conversations_filter_by_state_service_and_far_service(
        pair: sbroker.Broker, client: TestClient) -> None:
    handle = send(pair)
    with pair.transaction() as tx:
        tx.end_conversation(handle)
    other = send(pair)
    r = client.get("/conversations?state=CO&service_name=InitService")
    assert other in r.text and handle not in r.text
    r = client.get("/conversations?far_service=InitService")
    assert "TargetService" in r.text and 'id="conversations"' in r.text
    assert other not in client.get("/conversations?state=DI").text


def test_transmission_page_shows_each_message_status(pair: sbroker.Broker,
                                                     client: TestClient) -> None:
    pair.create_route("Far", service_name="FarService", address="tcp://127.0.0.1:9")
    with pair.transaction() as tx:
        tx.send(tx.begin_dialog("InitService", "FarService"), body="away")
    r = client.get("/transmission?to_service=FarService")
    assert "FarService" in r.text and "(not tried yet)" in r.text and "1 row(s)" in r.text
    assert "No message." in client.get("/transmission?to_service=Nobody").text


def test_views_api_returns_every_view_as_json(pair: sbroker.Broker, client: TestClient) -> None:
    send(pair)
    pair.install_executor(runner=sbroker.apps.spark.StubRunner())  # type: ignore[attr-defined]
    for name in API_VIEWS:
        r = client.get(f"/api/views/{name}")
        assert r.status_code == 200, name
        assert isinstance(r.json(), list)
    rows = client.get("/api/views/transmission_queue").json()
    assert rows == []
    [stats] = [q for q in client.get("/api/views/queue_stats").json()
               if q["queue_name"] == "TargetQueue"]
    assert stats["ready_messages"] == 1


@pytest.mark.parametrize(("path", "status", "words"), [
    ("/queues/NoSuchQueue", 404, "no queue named &#39;NoSuchQueue&#39;"),
    ("/queues/TargetQueue?page=0", 400, "page must be a whole number"),
    ("/queues/TargetQueue?page=abc", 400, "page must be a whole number"),
    ("/conversations?state=XX", 400, "state must be one of"),
    ("/scheduler?status=lost", 400, "status must be one of"),
    ("/scheduler?since=yesterday", 400, "since must be an ISO date"),
    ("/nowhere", 404, "Not Found"),
    ("/queues/TargetQueue/enable", 405, "Method Not Allowed"),
])
def test_bad_input_gets_a_4xx_html_page_not_a_traceback(client: TestClient, path: str,
                                                        status: int, words: str) -> None:
    r = client.get(path)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/html")
    assert words in r.text and "Traceback" not in r.text


def test_unknown_view_is_a_json_404(client: TestClient) -> None:
    r = client.get("/api/views/sqlite_schema")
    assert r.status_code == 404 and "no view named" in r.json()["error"]
    r = client.get("/api/views/ExecutionLog")  # the table comes with every database
    assert r.status_code == 200 and r.json() == []


def test_no_request_can_run_sql(pair: sbroker.Broker, client: TestClient) -> None:
    send(pair)
    for path in ("/api/views/queue_stats;DROP TABLE sb_queues",
                 "/queues/TargetQueue' OR '1'='1", "/conversations?state=CO';DELETE",
                 "/transmission?to_service=x' OR 1=1 --"):
        assert client.get(path).status_code in (200, 400, 404)
    assert len(pair.peek("TargetQueue")) == 1
    assert "TargetQueue" in pair.catalog.queues


def test_a_failure_inside_is_a_500_page_without_a_traceback(
        pair: sbroker.Broker, client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pair, "peek", broken)
    r = client.get("/queues/TargetQueue")
    assert r.status_code == 500 and "RuntimeError" in r.text
    assert "Traceback" not in r.text and "disk on fire" not in r.text


def test_messages_and_tasks_show_their_trace_ids_linked_to_the_trace_viewer(
        pair: sbroker.Broker, db_path: Path, make_client: Any) -> None:
    send(pair, 1, body="untraced")
    with traced() as t, sbroker.Broker.open(db_path, instrumentation=t.instrumentation) as b:
        send(b, 1, body="traced")  # from a traced process
    (_, traced_msg) = pair.peek("TargetQueue")
    tid = trace_id(traced_msg.trace_context)
    assert tid is not None
    pair.install_executor(runner=StubRunner())  # not started: nothing runs
    with pair.transaction() as tx:  # an ExecutionLog row as the executor marks it started
        tx.execute("INSERT INTO ExecutionLog(CallerID, SchedulerHandle, Task, QueuedTime, "
                   "Status, TraceContext) VALUES ('c', 'h', '{}', ?, 'running', ?)",
                   ("2026-01-01T00:00:00+00:00", traced_msg.trace_context))
    viewer = make_client(trace_url="https://traces.example/trace/{trace_id}")
    link = f'href="https://traces.example/trace/{tid}"'
    queue_page = viewer.get("/queues/TargetQueue").text
    assert queue_page.count(link) == 1 and "<td>-</td></tr>" in queue_page  # the untraced
    assert viewer.get("/scheduler").text.count(link) == 1
    plain = make_client().get("/queues/TargetQueue").text
    assert f'<span class="trace mono">{tid}</span>' in plain and "href=\"https://" not in plain
