"""The administrator's actions: re-enable a poisoned queue, re-drive parked messages (all or
selected, none lost when cut off), cancel a scheduler task, end a conversation with cleanup."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

import sbroker
from sbroker.apps import poison
from sbroker.apps.dashboard import actions
from sbroker.apps.dashboard.demo import park_messages, poison_queue
from sbroker.apps.scheduler.executor import executor_state, serve_one
from sbroker.apps.spark import StubRunner
from sbroker.engine.transaction import Transaction

from .helpers import post, send


def stats(broker: sbroker.Broker, queue: str) -> dict[str, object]:
    return next(q for q in broker.view("queue_stats") if q["queue_name"] == queue)


def test_re_enabling_a_queue_disabled_by_poison(pair: sbroker.Broker,
                                                client: TestClient) -> None:
    poison_queue(pair)
    page = client.get("/poison").text
    assert 'id="disabled-Payments"' in page and "disabled by poison" in page
    r = post(client, "/queues/Payments/enable", {"next": "/poison"})
    assert r.status_code == 303 and r.headers["location"] == "/poison"
    assert stats(pair, "Payments")["is_enabled"] == 1
    assert stats(pair, "Payments")["rollback_count"] == 0
    page = client.get("/poison").text
    assert "queue Payments enabled (was disabled by poison)" in page  # the notice, once
    assert 'id="disabled-Payments"' not in page
    assert "queue Payments enabled" not in client.get("/poison").text
    with pair.transaction() as tx:
        assert tx.receive("Payments")


def test_re_enabling_an_unknown_queue_is_a_404(client: TestClient) -> None:
    r = post(client, "/queues/Nope/enable")
    assert r.status_code == 404 and "no queue named" in r.text


def parked(broker: sbroker.Broker) -> list[int]:
    return [r["record_id"] for r in poison.list_messages(broker, state="parked")]


def test_re_drive_selected_messages(pair: sbroker.Broker, client: TestClient) -> None:
    park_messages(pair, 3)
    ids = parked(pair)
    assert len(ids) == 3 and not pair.peek("Invoices")
    assert client.get("/poison").text.count('name="record"') == 3
    r = post(client, "/poison/redrive", {"record": [str(ids[0]), str(ids[2])]})
    assert r.status_code == 303
    assert parked(pair) == [ids[1]]
    assert len(pair.peek("Invoices")) == 2
    assert "re-drove 2 message(s)" in client.get("/poison").text


def test_re_drive_all(pair: sbroker.Broker, client: TestClient) -> None:
    park_messages(pair, 4)
    post(client, "/poison/redrive", {"all": "1"})
    assert parked(pair) == [] and len(pair.peek("Invoices")) == 4


def test_re_drive_input_errors(pair: sbroker.Broker, client: TestClient) -> None:
    park_messages(pair, 1)
    assert post(client, "/poison/redrive", {}).status_code == 400
    r = post(client, "/poison/redrive", {"record": "12; DROP TABLE poison_messages"})
    assert r.status_code == 400 and "whole numbers" in r.text
    post(client, "/poison/redrive", {"record": "999"})
    assert "could not be re-driven (record 999" in client.get("/poison").text
    assert len(parked(pair)) == 1


def test_a_re_drive_cut_off_half_way_loses_and_repeats_nothing(
        pair: sbroker.Broker, client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    park_messages(pair, 5)
    ids = parked(pair)
    real_send = Transaction.send
    sends = []

    def send_then_die(self: Transaction, *args: object, **kwargs: object) -> None:
        sends.append(args)
        if len(sends) == 3:  # the third message: the process dies inside its transaction
            raise KeyboardInterrupt
        real_send(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Transaction, "send", send_then_die)
    with pytest.raises(KeyboardInterrupt):  # the action of POST /poison/redrive, all
        actions.redrive(pair, None)
    monkeypatch.setattr(Transaction, "send", real_send)
    bodies = sorted(m.message_body for m in pair.peek("Invoices"))
    assert len(bodies) == 2 and parked(pair) == ids[2:]  # sent = no longer parked, exactly
    post(client, "/poison/redrive", {"all": "1"})  # the operator runs it again
    bodies = sorted(m.message_body for m in pair.peek("Invoices"))
    assert len(bodies) == 5 and len(set(bodies)) == 5 and parked(pair) == []


def test_cancel_a_queued_task(pair: sbroker.Broker, client: TestClient) -> None:
    pair.install_executor(runner=StubRunner())
    with pair.scheduler("nightly") as s:
        log_id = s.exec_async("SELECT 1")
        assert f"/scheduler/tasks/{log_id}/cancel" in client.get("/scheduler").text
        r = post(client, f"/scheduler/tasks/{log_id}/cancel")
        assert r.status_code == 303
        serve_one(pair, executor_state(pair), "w1", wait=0)  # the executor takes it
        result = s.synchronize(timeout=10)
    assert result.status == "cancelled"
    assert "cancel requested" in client.get("/scheduler").text
    r = post(client, f"/scheduler/tasks/{log_id}/cancel")
    assert r.status_code == 409 and "nothing to cancel" in r.text


def test_end_a_conversation_with_cleanup(pair: sbroker.Broker, client: TestClient) -> None:
    handle = send(pair, 2)
    assert f"/conversations/{handle}/end" in client.get("/conversations").text
    r = post(client, f"/conversations/{handle}/end", {"next": "/conversations?state=CO"})
    assert r.status_code == 303 and r.headers["location"] == "/conversations?state=CO"
    handles = {e["conversation_handle"] for e in pair.view("conversation_endpoints")}
    assert handle not in handles
    r = post(client, f"/conversations/{handle}/end")
    assert r.status_code == 404 and "no conversation with handle" in r.text


def test_cancel_a_pipeline_run_from_its_page(pair: sbroker.Broker, client: TestClient,
                                             tmp_path: object) -> None:
    from sbroker.apps.pipeline import get_run, parse_pipeline, submit_run

    pair.install_executor(runner=StubRunner())
    run_id = submit_run(pair, parse_pipeline('[[task]]\nname = "a"\nsql = "SELECT 1"\n'))
    page = client.get("/scheduler/runs").text
    assert f"/scheduler/runs/{run_id}/cancel" in page  # a running run has the button
    r = client.post(f"/scheduler/runs/{run_id}/cancel", data={"next": "/scheduler/runs"},
                    follow_redirects=False)
    assert r.status_code == 403  # without the CSRF field, refused
    assert get_run(pair, run_id)["status"] == "running"  # type: ignore[index]
    r = post(client, f"/scheduler/runs/{run_id}/cancel", {"next": "/scheduler/runs"})
    assert r.status_code == 303 and r.headers["location"] == "/scheduler/runs"
    assert get_run(pair, run_id)["status"] == "cancelled"  # type: ignore[index]
    page = client.get("/scheduler/runs").text
    assert f"run {run_id} cancelled" in page  # the notice
    assert f"/scheduler/runs/{run_id}/cancel" not in page
    r = post(client, f"/scheduler/runs/{run_id}/cancel")
    assert r.status_code == 409 and "nothing to cancel" in r.text
