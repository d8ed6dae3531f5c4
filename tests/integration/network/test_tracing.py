"""A dialog across two brokers over loopback TCP is one trace: the traceparent
of A's SEND travels with the message (also a message cut into fragments), B's activated
procedure works in a ``process`` span under it, its reply's ``send`` is a child of that,
and A's RECEIVE links the reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.otel import named, parent_of, traced, traceparent

import sbroker

from .helpers import node, receive, route, wait_for


def echo(ctx: Any) -> None:
    """B's activated procedure: answer each message with its body."""
    while True:
        with ctx.broker.transaction() as tx:
            msgs = tx.receive(ctx.queue)
            if not msgs:
                return
            for msg in msgs:
                if msg.message_type_name == "DEFAULT":
                    tx.send(msg.conversation_handle, body=msg.message_body)


def test_a_dialog_across_two_brokers_and_an_activated_reply_is_one_trace(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    with traced() as t:
        a = node(tmp_path, "a", services={"SvcA": []}, fragment_size=1024,
                 instrumentation=t.instrumentation)
        b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, fragment_size=1024,
                 instrumentation=t.instrumentation)
        nodes += [a, b]
        route(a, "SvcB", b)
        route(b, "SvcA", a)
        b.alter_queue("q", activation=sbroker.Activation(echo))
        big = b"x" * 5000  # five fragments: the context rides on the first
        with t.tracer.start_as_current_span("request") as request, a.transaction() as tx:
            tx.send(tx.begin_dialog("SvcA", "SvcB"), body=big)
        (reply,) = receive(a, 1)
        spans = wait_for(lambda: [s for s in t.spans() if s.name == "process"] and t.spans(),
                         what="the process span")
    assert reply.message_body == big
    trace_ids = {s.context.trace_id for s in spans}
    assert trace_ids == {request.get_span_context().trace_id}
    send_a = next(s for s in named(spans, "send")
                  if (s.attributes or {})["messaging.destination.name"] == "SvcB")
    (process,) = named(spans, "process")
    assert process.parent is not None and process.parent.span_id == send_a.context.span_id
    assert (process.attributes or {})["messaging.destination.name"] == "q"
    send_b = next(s for s in named(spans, "send")
                  if (s.attributes or {})["messaging.destination.name"] == "SvcA")
    assert parent_of(send_b, spans) is process
    assert reply.trace_context == traceparent(send_b)
    receive_a = [s for s in named(spans, "receive")
                 if [link.context.span_id for link in s.links] == [send_b.context.span_id]]
    assert len(receive_a) == 1
