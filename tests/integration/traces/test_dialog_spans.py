"""Tracing of SEND and RECEIVE on each backend: a ``send`` span per SEND, its
traceparent stored with the message and read back as ``msg.trace_context``, a ``receive``
span linked to each message's send span; and nothing at all while tracing is off."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind
from support.otel import named, traced, traceparent

import sbroker
from sbroker.core.instrumentation import Instrumentation


def _broker(target: str, instrumentation: Instrumentation | None = None) -> sbroker.Broker:
    b = sbroker.Broker.open(target, instrumentation=instrumentation)
    b.create_queue("qa")
    b.create_queue("qb")
    b.create_service("A", "qa")
    b.create_service("B", "qb", ["DEFAULT"])
    return b


def test_each_send_is_a_producer_span_and_the_receive_links_them(database: str) -> None:
    with traced() as t:
        b = _broker(database, t.instrumentation)
        try:
            with t.tracer.start_as_current_span("request"), b.transaction() as tx:
                h = tx.begin_dialog("A", "B")
                tx.send(h, body="one")
                tx.send(h, body="two")
            with b.transaction() as tx:
                got = tx.receive("qb")
        finally:
            b.close()
        spans = t.spans()
    (request,) = named(spans, "request")
    sends = named(spans, "send")
    assert [s.kind for s in sends] == [SpanKind.PRODUCER] * 2
    assert all(s.parent is not None and s.parent.span_id == request.context.span_id
               for s in sends)
    assert [m.trace_context for m in got] == [traceparent(s) for s in sends]
    attrs = sends[0].attributes or {}
    assert attrs["messaging.system"] == "sbroker"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.destination.name"] == "B"
    assert attrs["messaging.sbroker.conversation_handle"] == h
    (receive,) = named(spans, "receive")
    assert receive.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in receive.links] == [
        s.context.span_id for s in sends]
    rattrs = receive.attributes or {}
    assert rattrs["messaging.destination.name"] == "qb"
    assert rattrs["messaging.batch.message_count"] == 2
    assert rattrs["messaging.sbroker.conversation_group_id"] == got[0].conversation_group_id
    # one trace: the receive (no span of its own around it) joins the first message's
    assert receive.context.trace_id == request.context.trace_id


def test_a_traced_send_to_a_conversing_peer_goes_straight_with_its_context(
        database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with traced() as t:
        b = _broker(database, t.instrumentation)
        try:
            handles = _conversing(b, 2)
            direct: list[object] = []
            plain = b.store.sends.send

            def send(*args: Any) -> Any:  # the backend's one-statement SEND, watched
                direct.append(plain(*args))
                return direct[-1]

            monkeypatch.setattr(b.store.sends, "send", send)
            with b.transaction() as tx:
                tx.send(handles[0], body="one")
            with b.transaction() as tx:
                tx.send(handles, body="to both")
            with b.transaction() as tx:
                got = tx.receive("qb") + tx.receive("qb")
        finally:
            b.close()
        spans = named(t.spans(), "send")[-2:]
    # both commits went the one-statement way, and it stored each message's context
    assert len(direct) == 2 and all(v is True or callable(v) for v in direct)
    assert sorted(m.trace_context for m in got) == sorted(
        [traceparent(spans[0])] + [traceparent(spans[1])] * 2)


def _conversing(b: sbroker.Broker, n: int) -> list[str]:
    """``n`` dialogs from A to B whose both ends converse (each has sent and received)."""
    with b.transaction() as tx:
        handles = [tx.begin_dialog("A", "B") for _ in range(n)]
        for h in handles:
            tx.send(h, body="hello")
    with b.transaction() as tx:
        for msg in tx.receive("qb") + tx.receive("qb"):
            tx.send(msg.conversation_handle, body="hi")
    with b.transaction() as tx:
        assert len(tx.receive("qa") + tx.receive("qa")) == n
    with b.transaction() as tx:  # the peers are learned by an ordinary SEND
        tx.send(handles, body="and")
    with b.transaction() as tx:
        assert len(tx.receive("qb") + tx.receive("qb")) == n
    return handles


def test_untraced_messages_carry_no_context(tmp_path: Path) -> None:
    b = _broker(str(tmp_path / "b.db"))
    try:
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("A", "B"), body="plain")
        with b.transaction() as tx:
            (msg,) = tx.receive("qb")
    finally:
        b.close()
    assert msg.trace_context is None


CHILD = """
import sys
import sbroker

def roundtrip(path):
    b = sbroker.Broker.open(path)
    b.create_queue("qa"); b.create_queue("qb")
    b.create_service("A", "qa"); b.create_service("B", "qb", ["DEFAULT"])
    with b.transaction() as tx:
        tx.send(tx.begin_dialog("A", "B"), body="x")
    with b.transaction() as tx:
        (msg,) = tx.receive("qb")
    b.close()
    return type(b.instrumentation).__name__, msg.trace_context is not None

print("absent", "opentelemetry" in sys.modules, *roundtrip(sys.argv[1] + "/1.db"))
from opentelemetry import trace
print("no provider", *roundtrip(sys.argv[1] + "/2.db"))
from opentelemetry.sdk.trace import TracerProvider
trace.set_tracer_provider(TracerProvider())
print("provider", *roundtrip(sys.argv[1] + "/3.db"))
"""


def test_nothing_of_opentelemetry_is_loaded_or_done_until_a_provider_is_set(
        tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.splitlines() == ["absent False Instrumentation False",
                                "no provider Instrumentation False",
                                "provider OpenTelemetry True"]


RECEIVED = threading.Event()


def failing_reader(ctx: sbroker.ActivationContext) -> None:
    """Receives what came, then fails: its work is recorded, the error in its span."""
    with ctx.broker.transaction() as tx:
        tx.receive(ctx.queue)
    RECEIVED.set()
    raise RuntimeError("cannot price it")


def test_an_activated_procedures_work_is_a_process_span_in_the_messages_trace(
        tmp_path: Path) -> None:
    RECEIVED.clear()
    with traced() as t:
        b = _broker(str(tmp_path / "b.db"), t.instrumentation)
        b.alter_queue("qb", activation=sbroker.Activation(failing_reader))
        try:
            b.start()
            with b.transaction() as tx:
                tx.send(tx.begin_dialog("A", "B"), body="price?")
            assert RECEIVED.wait(60)
        finally:
            b.close()  # joins the procedure's thread: its span has ended
        spans = t.spans()
    (send,) = named(spans, "send")
    (process,) = named(spans, "process")
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert process.context.trace_id == send.context.trace_id
    assert not process.status.is_ok and "cannot price it" in str(process.status.description)
