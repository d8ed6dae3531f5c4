"""Tracing with OpenTelemetry (docs/tracing.md): the implementation of the broker's
instrumentation hooks (``sbroker.core.instrumentation``) in :mod:`.otel`, and the choice
``Broker.open`` makes when it is given none.

Nothing here imports OpenTelemetry: an application that set a tracer provider has imported
its API already, and one that has not pays nothing."""

from __future__ import annotations

import sys

from sbroker.core.instrumentation import NO_INSTRUMENTATION, Instrumentation

_API = "opentelemetry.trace"


def from_environment() -> Instrumentation:
    """OpenTelemetry's hooks when its API is loaded and the application set a tracer
    provider; else the hooks that do nothing (without importing anything)."""
    api = sys.modules.get(_API)
    if api is None:
        return NO_INSTRUMENTATION
    provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return NO_INSTRUMENTATION
    from sbroker.apps.tracing.otel import OpenTelemetry

    return OpenTelemetry(provider)

