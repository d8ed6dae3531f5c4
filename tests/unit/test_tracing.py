"""The pieces of tracing that need no provider: reading a traceparent (the dashboard shows
trace ids of untraced processes), and the decision to trace, taken without importing
anything of OpenTelemetry when the application has not."""

from __future__ import annotations

import importlib
import sys

import pytest

from sbroker.core import tracing

GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_trace_id_of_a_traceparent() -> None:
    assert tracing.trace_id(GOOD) == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("bad", [None, "", "garbage", "00-xyz-b7ad6b7169203331-01",
                                 "00-" + "0" * 32 + "-b7ad6b7169203331-01",
                                 "00-0af7651916cd43dd8448eb211c80319c-b7ad-01"])
def test_no_trace_id_from_a_missing_or_malformed_traceparent(bad: str | None) -> None:
    assert tracing.trace_id(bad) is None
    assert tracing.span_context(bad) is None


def test_a_span_context_is_remote_with_the_ids_and_flags_of_the_traceparent() -> None:
    # span_context is called only once tracing is on, i.e. the application imported the API;
    # import it here so the test does not depend on an earlier test having done so.
    importlib.import_module("opentelemetry.trace")
    sc = tracing.span_context(GOOD)
    assert (sc.trace_id, sc.span_id, int(sc.trace_flags), sc.is_remote) == (
        0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1, True)
    assert tracing.span_context("00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01") \
        is None


def test_without_the_api_loaded_nothing_is_imported_and_tracing_is_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "TRACER", None)
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    assert tracing.resolve() is None
    assert "opentelemetry.trace" not in sys.modules
