"""The W3C ``traceparent`` a message carries (``msg.trace_context``): read and written
without OpenTelemetry, so that the dashboard shows trace ids whether this process traces or
not (docs/tracing.md)."""

from __future__ import annotations

_ZERO_TRACE = "0" * 32


def parse(traceparent: str | None) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a ``traceparent``, or None when it is absent, malformed
    or names no span (an all-zero trace or span id)."""
    tid = trace_id(traceparent)
    if tid is None or traceparent is None:
        return None
    _, _, span_hex, flags_hex = traceparent.split("-")
    try:
        span_id, flags = int(span_hex, 16), int(flags_hex, 16)
    except ValueError:
        return None
    if span_id == 0:
        return None
    return int(tid, 16), span_id, flags & 0xFF


def trace_id(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) of a ``traceparent``, or None when there is none or it is
    malformed."""
    parts = (traceparent or "").split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return None if parts[1] == _ZERO_TRACE else parts[1]


def format_traceparent(trace: int, span: int, flags: int) -> str:
    """The ``traceparent`` header of a span (version 00)."""
    return f"00-{trace:032x}-{span:016x}-{flags:02x}"
