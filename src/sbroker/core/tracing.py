"""OpenTelemetry tracing (SPEC §15): every span sbroker emits, and the W3C trace context
that travels with each message.

Tracing is on only when the ``otel`` extra is installed AND the application has set a tracer
provider before opening the broker: :func:`resolve` decides once per ``Broker.open``, without
importing anything of OpenTelemetry (an application that set a provider has imported its API
already), and leaves the answer in :data:`TRACER`. Every hook below is called only after a
caller has checked ``tracing.TRACER is not None`` (or takes a span that is None when off), so
an untraced broker pays one attribute read per statement and nothing else.

Spans follow OpenTelemetry's messaging conventions: ``messaging.system`` is ``sbroker``,
``messaging.operation.name`` / ``.type`` name the operation, the destination is the far
service (send) or the queue (receive, process); conversation and group are attributes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

SYSTEM = "sbroker"
TRACER: Any = None  # the sbroker tracer while tracing is on, else None (read on hot paths)
_explicit = False  # set by use(): Broker.open then keeps the choice

_API = "opentelemetry.trace"
_CONTEXT = "opentelemetry.context"


def resolve() -> Any:
    """Decide whether sbroker traces (called by ``Broker.open``): on when OpenTelemetry's API
    is loaded and a real tracer provider is set; else off, with nothing imported."""
    global TRACER
    if _explicit or TRACER is not None:
        return TRACER  # a provider once set cannot be unset (the API's rule)
    api = sys.modules.get(_API)
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    TRACER = provider.get_tracer("sbroker")
    return TRACER


def use(provider: Any) -> None:
    """Trace with ``provider`` (a TracerProvider), or stop tracing (None), whatever the
    global provider is: for tests and benchmarks that compare both in one process."""
    global TRACER, _explicit
    _explicit = provider is not None
    TRACER = None if provider is None else provider.get_tracer("sbroker")
    if provider is None:
        _explicit = False


def _api() -> Any:
    return sys.modules[_API]


# -- the W3C trace context of a message ------------------------------------------------------

def traceparent_of(span: Any) -> str | None:
    """The ``traceparent`` header of ``span`` (None for an invalid span)."""
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def trace_id(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) of a ``traceparent``, or None when there is none or it is
    malformed. Needs no OpenTelemetry: the dashboard shows it untraced."""
    parts = (traceparent or "").split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return None if parts[1] == "0" * 32 else parts[1]


def span_context(traceparent: str | None) -> Any:
    """The remote SpanContext a ``traceparent`` names, or None (absent or malformed)."""
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
    api = _api()
    return api.SpanContext(int(tid, 16), span_id, is_remote=True,
                           trace_flags=api.TraceFlags(flags & 0xFF))


def _parent(sc: Any) -> Any:
    """A context whose current span is the (remote) span ``sc``."""
    api = _api()
    return api.set_span_in_context(api.NonRecordingSpan(sc))


def _has_current_span() -> bool:
    return bool(_api().get_current_span().get_span_context().is_valid)


def _attrs(operation: str, kind: str, destination: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": kind,
        "messaging.destination.name": destination,
    }
    out.update((k, v) for k, v in extra.items() if v is not None)
    return out


# -- SEND, RECEIVE, process ------------------------------------------------------------------

def send(tracer: Any, destination: str, handles: Sequence[str], conversation_id: str | None,
         group: str | None, message_type: str) -> str | None:
    """A ``send`` span (producer) for one SEND statement, child of the current span; the
    ``traceparent`` every message of the statement carries."""
    extra: dict[str, Any] = {"messaging.message.conversation_id": conversation_id,
                             "messaging.sbroker.message_type": message_type,
                             "messaging.sbroker.conversation_group_id": group}
    if len(handles) == 1:
        extra["messaging.sbroker.conversation_handle"] = handles[0]
    else:
        extra["messaging.batch.message_count"] = len(handles)
        extra["messaging.sbroker.conversation_handles"] = list(handles)
    span = tracer.start_span("send", kind=_api().SpanKind.PRODUCER,
                             attributes=_attrs("send", "send", destination, **extra))
    parent = traceparent_of(span)
    span.end()
    return parent


def before_receive() -> int:
    """A RECEIVE starts: the work on the last batch of an activated procedure is over (its
    ``process`` span ends); the wall-clock start of the ``receive`` span, in nanoseconds
    (OpenTelemetry's time base, not the broker's clock)."""
    local = _Local.get()
    if local.span is not None:
        _end_process(local)
    return time.time_ns()


def receive(tracer: Any, queue: str, messages: Sequence[Any], start_ns: int) -> None:
    """A ``receive`` span (consumer) for a RECEIVE that returned ``messages``, linked to each
    traced message's send span; under the current span, else under the first message's."""
    api = _api()
    contexts = [sc for sc in (span_context(msg.trace_context) for msg in messages) if sc]
    local = _Local.get()
    if local.activated is not None:
        _end_process(local)
    first = messages[0]
    parent = None if not contexts or _has_current_span() else _parent(contexts[0])
    span = tracer.start_span(
        "receive", context=parent, kind=api.SpanKind.CONSUMER, start_time=start_ns,
        links=[api.Link(sc) for sc in contexts],
        attributes=_attrs("receive", "receive", queue,
                          **{"messaging.batch.message_count": len(messages),
                             "messaging.sbroker.conversation_handle": first.conversation_handle,
                             "messaging.sbroker.conversation_group_id":
                                 first.conversation_group_id}))
    span.end()
    if local.activated is not None:
        _begin_process(tracer, local, contexts, first)


class _Local(threading.local):
    """What a thread running an activated procedure is doing, for its ``process`` spans."""

    activated: str | None = None  # the queue, while the thread runs an activated procedure
    span: Any = None  # the open process span, current in this thread
    token: Any = None

    @classmethod
    def get(cls) -> _Local:
        return _LOCAL


_LOCAL = _Local()


def _begin_process(tracer: Any, local: _Local, contexts: list[Any], first: Any) -> None:
    """The work on a received batch: a ``process`` span under the first message's trace,
    current in this thread until the next RECEIVE or the procedure's return."""
    api = _api()
    parent = _parent(contexts[0]) if contexts else None
    assert local.activated is not None
    span = tracer.start_span(
        "process", context=parent, kind=api.SpanKind.CONSUMER,
        links=[api.Link(sc) for sc in contexts[1:]],
        attributes=_attrs("process", "process", local.activated,
                          **{"messaging.sbroker.conversation_handle": first.conversation_handle,
                             "messaging.sbroker.conversation_group_id":
                                 first.conversation_group_id}))
    local.span = span
    local.token = sys.modules[_CONTEXT].attach(api.set_span_in_context(span))


def _end_process(local: _Local, error: BaseException | None = None) -> None:
    span, token = local.span, local.token
    local.span = local.token = None
    if token is not None:
        sys.modules[_CONTEXT].detach(token)
    if span is not None:
        if error is not None:
            span.record_exception(error)
            span.set_status(_api().Status(_api().StatusCode.ERROR, str(error)))
        span.end()


@contextmanager
def activated(queue: str) -> Iterator[None]:
    """Around an activated procedure (only while tracing is on): each RECEIVE that returns
    messages in it opens a ``process`` span for the work that follows."""
    local = _Local.get()
    outer = local.activated
    local.activated = queue
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        _end_process(local, error)
        local.activated = outer


# -- scheduler tasks and pipeline runs -------------------------------------------------------

def start_task(tracer: Any, traceparent: str | None, log_id: int, task: object) -> Any:
    """A span around one scheduler task's execution (``task``: its JSON form): under the
    current span (the executor's ``process``), else in the trace of the ``exec_async`` that
    sent it."""
    parent = None
    if not _has_current_span():
        sc = span_context(traceparent)
        parent = _parent(sc) if sc is not None else None
    kind = task.get("type") if isinstance(task, dict) else None
    return tracer.start_span("task", context=parent, attributes={
        "messaging.system": SYSTEM, "sbroker.task.log_id": log_id,
        "sbroker.task.type": str(kind or "unknown")})


def end_task(span: Any, status: str, error: str | None, job_ids: Iterable[int],
             operation_ids: Iterable[str] = ()) -> None:
    """Close a task span: its outcome, and one event per Spark job (or Spark Connect
    operation) it started, carrying the job's id."""
    for job in job_ids:
        span.add_event("spark.job", {"spark.job.id": int(job)})
    for op in operation_ids:
        span.add_event("spark.operation", {"spark.connect.operation_id": str(op)})
    span.set_attribute("sbroker.task.status", status)
    if status == "failed":
        api = _api()
        span.set_status(api.Status(api.StatusCode.ERROR, error or status))
    span.end()


def start_span(tracer: Any, name: str, parent: Any, attributes: dict[str, Any], *,
               root: bool = False) -> Any:
    """An internal span under ``parent`` (a span), the current span, or none (``root``)."""
    api = _api()
    ctx = api.set_span_in_context(parent) if parent is not None else (
        sys.modules[_CONTEXT].Context() if root else None)
    attrs: dict[str, Any] = {"messaging.system": SYSTEM}
    attrs.update((k, v) for k, v in attributes.items() if v is not None)
    return tracer.start_span(name, context=ctx, attributes=attrs)


@contextmanager
def current(span: Any) -> Iterator[None]:
    """Make ``span`` the current span in this thread (None: nothing)."""
    if span is None:
        yield
        return
    token = sys.modules[_CONTEXT].attach(_api().set_span_in_context(span))
    try:
        yield
    finally:
        sys.modules[_CONTEXT].detach(token)


def end(span: Any, *, error: str | None = None, **attributes: Any) -> None:
    """End ``span`` (None: nothing), with attributes and an error status when given."""
    if span is None:
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)
    if error is not None:
        api = _api()
        span.set_status(api.Status(api.StatusCode.ERROR, error))
    span.end()


class RunTrace:
    """The spans of one pipeline run (SPEC §13): the run is a root span, each task a child
    of it, each attempt a child of its task (current while the attempt is sent, so the
    executor's spans join it), and the wait before a retry a ``pipeline.retry_delay`` span
    between two attempts."""

    def __init__(self, tracer: Any, run_id: int, pipeline: str, *, resumed: bool) -> None:
        self.tracer = tracer
        self.run = start_span(tracer, "pipeline.run", None, {
            "sbroker.run.id": run_id, "sbroker.pipeline.name": pipeline,
            "sbroker.run.resumed": resumed}, root=True)
        self.tasks: dict[str, Any] = {}
        self.attempts: dict[int, Any] = {}  # log id -> open attempt span
        self.delays: dict[str, Any] = {}  # task -> open retry delay span

    def start_attempt(self, task: str, attempt: int) -> Any:
        """An attempt of ``task`` is about to be sent: its span (make it current for the
        send, then give it the log id with :meth:`sent`)."""
        parent = self.tasks.get(task)
        if parent is None:
            parent = self.tasks[task] = start_span(self.tracer, "pipeline.task", self.run,
                                                   {"sbroker.task.name": task})
        end(self.delays.pop(task, None))
        return start_span(self.tracer, "pipeline.attempt", parent,
                          {"sbroker.task.name": task, "sbroker.task.attempt": attempt})

    def sent(self, span: Any, log_id: int) -> None:
        span.set_attribute("sbroker.task.log_id", log_id)
        self.attempts[log_id] = span

    def attempt_ended(self, task: str, log_id: int, status: str, error: str | None,
                      retry_in: float | None) -> None:
        """An attempt's outcome was recorded; ``retry_in``: seconds until the next one."""
        end(self.attempts.pop(log_id, None), error=None if status == "succeeded" else error,
            **{"sbroker.task.status": status})
        if retry_in is not None and task in self.tasks:
            self.delays[task] = start_span(self.tracer, "pipeline.retry_delay",
                                           self.tasks[task],
                                           {"sbroker.retry.delay_seconds": retry_in})

    def task_ended(self, task: str, status: str, error: str | None) -> None:
        """``task`` ended for good (a task skipped without an attempt gets its span now)."""
        end(self.delays.pop(task, None))
        span = self.tasks.pop(task, None)
        if span is None:
            span = start_span(self.tracer, "pipeline.task", self.run,
                              {"sbroker.task.name": task})
        end(span, error=error if status in ("failed", "cancelled") else None,
            **{"sbroker.task.status": status})

    def finish(self, status: str, tasks: dict[str, tuple[str, str | None]]) -> None:
        """The run ended with ``status``: every span still open ends (``tasks``: each
        task's (status, error))."""
        for span in self.attempts.values():
            end(span)
        self.attempts.clear()
        for name in list(self.tasks) + [t for t in self.delays if t not in self.tasks]:
            self.task_ended(name, *tasks.get(name, ("unknown", None)))
        end(self.run, error=None if status == "succeeded" else status,
            **{"sbroker.run.status": status})
