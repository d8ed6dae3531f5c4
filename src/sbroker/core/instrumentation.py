"""The hooks cross-cutting concerns (tracing, metrics) watch a broker by.

A broker is given one :class:`Instrumentation` when it opens (``Broker.open(...,
instrumentation=)``; OpenTelemetry's by itself when the application set a tracer provider:
docs/tracing.md) and hands it down: the engine calls it at each SEND and RECEIVE, the
activation service around each activated procedure; an app asks it for hooks of the app's
own kind (the scheduler's executor for its task hooks, the pipeline runner for a run
listener).  This class is the default and does nothing; an implementation overrides the
hooks it needs, in the manner of dramatiq's middleware.  A hook must not touch the database
and must not raise: it runs inside the statement it watches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from sbroker.core.messages import Message

H = TypeVar("H")


class Instrumentation:
    """Every hook of a broker; here each does nothing (the broker's default)."""

    def send(self, message_type: str, far_service: str, conversation_id: str,
             group_id: str, handles: Sequence[str]) -> str | None:
        """A SEND statement on ``handles`` (the first one's conversation, group and far
        service given): the trace context its messages carry (a W3C ``traceparent``,
        ``msg.trace_context`` on the other side), or None."""
        return None

    def before_receive(self, queue: str) -> object:
        """A RECEIVE on ``queue`` starts; what it returns is given to :meth:`after_receive`."""
        return None

    def after_receive(self, queue: str, messages: Sequence[Message], before: object) -> None:
        """The RECEIVE returned ``messages`` (not called when it returned none)."""

    def before_procedure(self, queue: str) -> None:
        """An activated procedure of ``queue`` starts, in this thread."""

    def after_procedure(self, queue: str, error: BaseException | None) -> None:
        """The activated procedure returned (``error``: what it raised)."""

    def hooks(self, kind: type[H]) -> H | None:
        """Hooks of an app's own ``kind`` (a class the app declares with hooks that do
        nothing, e.g. the pipeline's ``RunListener``), when this instrumentation has some:
        a new object for each call.  None here: the app uses its own no-op."""
        return None


NO_INSTRUMENTATION = Instrumentation()
