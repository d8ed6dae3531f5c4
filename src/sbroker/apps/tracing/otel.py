"""OpenTelemetry's implementation of the broker's instrumentation hooks: every span sbroker
emits (docs/tracing.md), following OpenTelemetry's messaging conventions —
``messaging.system`` is ``sbroker``, ``messaging.operation.name`` / ``.type`` name the
operation, the destination is the far service (send) or the queue (receive, process);
conversation and group are attributes.

Imported only once tracing is on (the application imported the API and set a provider, or
gave this instrumentation to ``Broker.open``)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, TracerProvider

from sbroker.apps.scheduler.hooks import TaskHooks
from sbroker.apps.tracing.spans import SYSTEM, fail, span_context, under
from sbroker.apps.tracing.tasks import TaskSpans
from sbroker.core.instrumentation import H, Instrumentation
from sbroker.core.messages import Message

_PRODUCER, _CONSUMER = SpanKind.PRODUCER, SpanKind.CONSUMER
_HANDLE = "messaging.sbroker.conversation_handle"
_GROUP = "messaging.sbroker.conversation_group_id"
_COUNT = "messaging.batch.message_count"


def _links(messages: Sequence[Message]) -> list[Link]:
    """A link to the send span of each traced message."""
    out = []
    for msg in messages:
        tp = msg.trace_context
        if tp is not None:
            sc = span_context(tp)
            if sc is not None:
                out.append(Link(sc))
    return out


def _attrs(operation: str, destination: str) -> dict[str, Any]:
    return {"messaging.system": SYSTEM, "messaging.operation.name": operation,
            "messaging.operation.type": operation, "messaging.destination.name": destination}


class _PerThread(threading.local):
    """What a thread running an activated procedure is doing, for its ``process`` spans."""

    activated: str | None = None  # the queue, while the thread runs an activated procedure
    span: Span | None = None  # the open process span, current in this thread
    token: object = None


class OpenTelemetry(Instrumentation):
    """Spans for SEND, RECEIVE, an activated procedure's work and scheduler tasks, made with
    ``tracer_provider`` (the application's global provider when None)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("sbroker")
        self._local = _PerThread()

    # -- SEND, RECEIVE, process -------------------------------------------------------------
    def send(self, message_type: str, far_service: str, conversation_id: str,
             group_id: str, handles: Sequence[str]) -> str | None:
        """A ``send`` span (producer), child of the current span; its ``traceparent``."""
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.name": "send",
            "messaging.operation.type": "send", "messaging.destination.name": far_service,
            "messaging.message.conversation_id": conversation_id,
            "messaging.sbroker.message_type": message_type, _GROUP: group_id}
        if len(handles) == 1:
            attrs[_HANDLE] = handles[0]
        else:
            attrs[_COUNT] = len(handles)
            attrs["messaging.sbroker.conversation_handles"] = list(handles)
        span = self.tracer.start_span("send", kind=_PRODUCER, attributes=attrs)
        sc = span.get_span_context()
        span.end()
        if not sc.is_valid:
            return None
        return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"  # W3C

    def before_receive(self, queue: str) -> object:
        """The work on the last batch of an activated procedure is over (its ``process``
        span ends); the start of the ``receive`` span, in OpenTelemetry's time base."""
        if self._local.span is not None:
            self._end_process()
        return time.time_ns()

    def after_receive(self, queue: str, messages: Sequence[Message], before: object) -> None:
        """A ``receive`` span (consumer), linked to each traced message's send span; under
        the current span, else under the first message's."""
        links = _links(messages)
        local = self._local
        if local.span is not None:
            self._end_process()
        first = messages[0]
        parent = None
        if links and not trace.get_current_span().get_span_context().is_valid:
            parent = under(links[0].context)
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.name": "receive",
            "messaging.operation.type": "receive", "messaging.destination.name": queue,
            _COUNT: len(messages), _HANDLE: first.conversation_handle,
            _GROUP: first.conversation_group_id}
        self.tracer.start_span("receive", context=parent, kind=_CONSUMER, links=links,
                               start_time=before if isinstance(before, int) else None,
                               attributes=attrs).end()
        if local.activated is not None:
            self._begin_process(local.activated, links, first)

    def _begin_process(self, queue: str, links: list[Link], first: Message) -> None:
        """The work on a received batch: a ``process`` span under the first message's trace,
        current in this thread until the next RECEIVE or the procedure's return."""
        attrs = _attrs("process", queue)
        attrs[_HANDLE] = first.conversation_handle
        attrs[_GROUP] = first.conversation_group_id
        span = self.tracer.start_span(
            "process", context=under(links[0].context) if links else None, kind=_CONSUMER,
            links=links[1:], attributes=attrs)
        local = self._local
        local.span = span
        local.token = otel_context.attach(trace.set_span_in_context(span))

    def _end_process(self, error: BaseException | None = None) -> None:
        local = self._local
        span, token = local.span, local.token
        local.span = local.token = None
        if token is not None:
            otel_context.detach(token)  # type: ignore[arg-type]
        if span is not None:
            if error is not None:
                span.record_exception(error)
                fail(span, str(error))
            span.end()

    def before_procedure(self, queue: str) -> None:
        """Each RECEIVE that returns messages in the procedure opens a ``process`` span for
        the work that follows."""
        self._local.activated = queue

    def after_procedure(self, queue: str, error: BaseException | None) -> None:
        self._end_process(error)
        self._local.activated = None

    # -- the apps' hooks -----------------------------------------------------------------
    def hooks(self, kind: type[H]) -> H | None:
        """The scheduler's task spans; a pipeline run's spans (a run listener)."""
        if kind is TaskHooks:
            return cast(H, TaskSpans(self.tracer))
        pipeline = sys.modules.get("sbroker.apps.pipeline.listeners")  # loaded if it asks
        if pipeline is not None and kind is pipeline.RunListener:
            from sbroker.apps.tracing.runs import RunSpans

            return cast(H, RunSpans(self.tracer))
        return None


