"""Tracing in tests: an SDK tracer provider with an in-memory exporter, handed to a broker as
its instrumentation (``Broker.open(..., instrumentation=t.instrumentation)``; not the
process-wide provider, which could never be unset), and the finished spans as a tree a test
can compare."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sbroker.apps.tracing.otel import OpenTelemetry


@dataclass
class Traced:
    """The exporter sbroker's spans go to, the instrumentation that makes them (give it to
    ``Broker.open``), and the application's tracer beside it."""

    exporter: InMemorySpanExporter
    instrumentation: OpenTelemetry
    tracer: Any

    def spans(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())


@contextmanager
def traced() -> Iterator[Traced]:
    """Brokers opened with ``instrumentation=t.instrumentation`` trace into an in-memory
    exporter; the provider shuts down when the block ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield Traced(exporter, OpenTelemetry(provider), provider.get_tracer("app"))
    finally:
        provider.shutdown()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    """The finished span that is ``span``'s parent (None for a root or a remote parent)."""
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def tree(spans: Sequence[ReadableSpan], root: ReadableSpan) -> tuple[str, list[Any]]:
    """(name, [children's trees]) under ``root``, children in start order."""
    kids = sorted((s for s in spans if s.parent is not None
                   and s.parent.span_id == root.context.span_id),
                  key=lambda s: s.start_time or 0)
    return root.name, [tree(spans, k) for k in kids]


def traceparent(span: ReadableSpan) -> str:
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"
