"""The pieces of tracing that need no provider: reading a traceparent (the dashboard shows
trace ids of untraced processes), and the choice of instrumentation ``Broker.open`` makes,
taken without importing anything of OpenTelemetry when the application has not."""

from __future__ import annotations

import importlib
import sys

import pytest

from sbroker.apps.tracing import from_environment
from sbroker.core.instrumentation import NO_INSTRUMENTATION
from sbroker.core.traceparent import format_traceparent, parse, trace_id

GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_trace_id_of_a_traceparent() -> None:
    assert trace_id(GOOD) == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("bad", [None, "", "garbage", "00-xyz-b7ad6b7169203331-01",
                                 "00-" + "0" * 32 + "-b7ad6b7169203331-01",
                                 "00-0af7651916cd43dd8448eb211c80319c-b7ad-01",
                                 "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01",
                                 "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333x-01"])
def test_no_span_from_a_missing_or_malformed_traceparent(bad: str | None) -> None:
    assert parse(bad) is None


def test_a_traceparent_is_read_back_as_it_was_written() -> None:
    ids = parse(GOOD)
    assert ids == (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1)
    assert format_traceparent(*ids) == GOOD


def test_a_span_context_is_remote_with_the_ids_and_flags_of_the_traceparent() -> None:
    spans = importlib.import_module("sbroker.apps.tracing.spans")  # imports the API
    sc = spans.span_context(GOOD)
    assert (sc.trace_id, sc.span_id, int(sc.trace_flags), sc.is_remote) == (
        0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1, True)
    assert spans.span_context("garbage") is None


def test_without_the_api_loaded_nothing_is_imported_and_nothing_traced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    assert from_environment() is NO_INSTRUMENTATION
    assert "opentelemetry.trace" not in sys.modules
