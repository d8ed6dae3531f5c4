"""A newer transport (and a whole broker) sends traced messages over loopback TCP to one
whose sessions decode fragments as brokers did before the optional fields (docs/tracing.md,
"Mixed versions"): the old end drops the first connection, the newer one reconnects and sends
without the trace context, and every message arrives once, in order."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest
from support.old_peer import OldSession
from support.otel import traced

import sbroker
from sbroker.protocol import Message, Session
from sbroker.services.network.transport import BrokerTransport, TransportConfig

from .helpers import node, receive, route
from .test_protocol_transport import SECRET, Recorder

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class OldTransport(BrokerTransport):
    """A transport whose connections run `OldSession` (the rest is today's)."""

    def _session(self, initiator: bool, binding: bytes) -> Session:
        config = super()._session(initiator, binding).config
        return OldSession(config, initiator=initiator, rng=self._rng, now=self._clock(),
                          engine_for=self._engine)


class TracedRecorder(Recorder):
    """Also keeps each delivered message's trace context."""

    def __init__(self) -> None:
        super().__init__()
        self.traces: list[str | None] = []

    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        super().deliver(peer, messages)
        with self.cond:
            self.traces += [m.trace_context for m in messages]


def test_traced_messages_reach_an_old_transport_once_in_order_without_context(
        caplog: pytest.LogCaptureFixture) -> None:
    ha, hb = Recorder(), TracedRecorder()
    a = BrokerTransport(TransportConfig(UUID(int=1), port=0, secret=SECRET,
                                        encryption="disabled", reconnect_min=0.01), ha)
    b = OldTransport(TransportConfig(UUID(int=2), port=0, secret=SECRET,
                                     encryption="disabled"), hb)
    a.start()
    addr_b = b.start()
    try:
        sent = [Message(UUID(int=9), True, s, "T", b"%d" % s * (s % 7 + 1), "a", "b",
                        trace_context=None if s % 3 == 2 else TRACE) for s in range(30)]
        a.send_many(sent, addr_b, UUID(int=2))
        hb.wait(lambda: hb.delivered() == len(sent))
        ha.wait(lambda: len(ha.acks) == len(sent))
        assert hb.queue[sent[0].key] == [m.body for m in sent]  # each once, in order
        assert hb.traces == [None] * len(sent)
        assert [r["state_desc"] for r in a.connections()] == ["CONNECTED", "CLOSED"]
        assert [r["last_error"] for r in b.connections()] == [
            None, "protocol error: bad fragment flags"]
        assert "cannot read a message's trace context" in caplog.text
    finally:
        a.stop()
        b.stop()


def test_a_traced_dialog_reaches_an_old_broker_once_in_order_without_context(
        tmp_path: Path, nodes: list[sbroker.Broker]) -> None:
    with traced() as t:
        a = node(tmp_path, "a", services={"SvcA": []}, fragment_size=1024,
                 instrumentation=t.instrumentation)
        b = node(tmp_path, "b", services={"SvcB": ["DEFAULT"]}, fragment_size=1024,
                 start=False, instrumentation=t.instrumentation)
        nodes += [a, b]
        b.network.transport_factory = OldTransport  # the service's transport seam
        b.start()
        route(a, "SvcB", b)
        bodies = [b"%d" % i * (3000 if i == 2 else 1) for i in range(6)]
        with a.transaction() as tx:
            handle = tx.begin_dialog("SvcA", "SvcB")
            for body in bodies:
                tx.send(handle, body=body)
        got = receive(b, len(bodies))
    assert [msg.message_body for msg in got] == bodies
    assert [msg.trace_context for msg in got] == [None] * len(bodies)
    transport = b.network.transport
    assert transport is not None
    errors = [row["last_error"] for row in transport.connections()]  # a did send the trace
    assert "protocol error: bad fragment flags" in errors
