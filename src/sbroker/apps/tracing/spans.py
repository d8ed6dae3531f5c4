"""What the spans sbroker makes share: the ``messaging.system`` they name, the remote span a
message's trace context names, making a span current in this thread, internal spans."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from sbroker.core.traceparent import parse

SYSTEM = "sbroker"


def span_context(traceparent: str | None) -> SpanContext | None:
    """The remote span a ``traceparent`` names, or None (absent or malformed)."""
    ids = parse(traceparent)
    if ids is None:
        return None
    return SpanContext(ids[0], ids[1], True, TraceFlags(ids[2]))


def under(sc: SpanContext) -> otel_context.Context:
    """A context whose current span is the (remote) span ``sc``."""
    return trace.set_span_in_context(NonRecordingSpan(sc))


def fail(span: Span, error: str) -> None:
    """Mark ``span`` failed with ``error``."""
    span.set_status(Status(StatusCode.ERROR, error))


@contextmanager
def current(span: Span | None) -> Iterator[None]:
    """Make ``span`` the current span in this thread (None: nothing)."""
    if span is None:
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


def start_span(tracer: Tracer, name: str, parent: Span | None, attributes: dict[str, Any],
               *, root: bool = False) -> Span:
    """An internal span under ``parent``, the current span, or none (``root``)."""
    ctx = trace.set_span_in_context(parent) if parent is not None else (
        otel_context.Context() if root else None)
    attrs: dict[str, Any] = {"messaging.system": SYSTEM}
    attrs.update((k, v) for k, v in attributes.items() if v is not None)
    return tracer.start_span(name, context=ctx, attributes=attrs)


def end(span: Span | None, *, error: str | None = None, **attributes: Any) -> None:
    """End ``span`` (None: nothing), with attributes and an error status when given."""
    if span is None:
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)
    if error is not None:
        fail(span, error)
    span.end()
