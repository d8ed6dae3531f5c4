"""The W3C ``traceparent`` a message carries (``msg.trace_context``): read and written
without OpenTelemetry, so that the dashboard shows trace ids whether this process traces or
not (docs/tracing.md)."""

from __future__ import annotations


def parse(traceparent: str | None) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a ``traceparent``, or None when it is absent, malformed
    or names no span (an all-zero trace or span id)."""
    if traceparent is None or len(traceparent) != 55 or traceparent[2] != "-" or \
            traceparent[35] != "-" or traceparent[52] != "-":
        return None
    try:
        ids = int(traceparent[3:35], 16), int(traceparent[36:52], 16), \
            int(traceparent[53:55], 16)
    except ValueError:
        return None
    return ids if ids[0] and ids[1] else None


def trace_id(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) of a ``traceparent``, or None when there is none or it is
    malformed."""
    if traceparent is None or parse(traceparent) is None:
        return None
    return traceparent[3:35]


def format_traceparent(trace: int, span: int, flags: int) -> str:
    """The ``traceparent`` header of a span (version 00)."""
    return f"00-{trace:032x}-{span:016x}-{flags:02x}"
