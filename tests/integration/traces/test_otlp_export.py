"""End to end: sbroker's spans leave the process over OTLP/HTTP, as a user sets
it up with the SDK's batch processor and exporter, and arrive at a receiver this test runs
on 127.0.0.1, which decodes them: the send, the receive and its link to the send."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import sbroker
from sbroker.apps.tracing.otel import OpenTelemetry


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps every span of every request it is sent."""

    spans: list[Any]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                type(self).spans.extend(scope.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200 if self.path == "/v1/traces" else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Any]]]:
    handler = type("Receiver", (_Receiver,), {"spans": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", handler.spans
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def test_spans_are_exported_over_otlp_http(tmp_path: Path,
                                           receiver: tuple[str, list[Any]]) -> None:
    url, received = receiver
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=10)))
    try:
        b = sbroker.Broker.open(tmp_path / "b.db", instrumentation=OpenTelemetry(provider))
        b.create_queue("qa")
        b.create_queue("qb")
        b.create_service("A", "qa")
        b.create_service("B", "qb", ["DEFAULT"])
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("A", "B"), body="over the wire")
        with b.transaction() as tx:
            (msg,) = tx.receive("qb")
        b.close()
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()
    by_name = {s.name: s for s in received}
    assert set(by_name) == {"send", "receive"}
    send, receive = by_name["send"], by_name["receive"]
    assert msg.trace_context is not None
    assert msg.trace_context.startswith(f"00-{send.trace_id.hex()}-{send.span_id.hex()}-")
    assert [link.span_id for link in receive.links] == [send.span_id]
    attrs = {a.key: a.value.string_value for a in send.attributes}
    assert attrs["messaging.system"] == "sbroker"
    assert attrs["messaging.destination.name"] == "B"
