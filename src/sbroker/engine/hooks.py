"""Points where the engine tells background services what happened (activation monitors
listen here); the default does nothing, so a broker that is not started stays passive."""

from __future__ import annotations

from collections.abc import Iterable


class EngineHooks:
    """Called by transactions after the fact, outside any SQLite transaction."""

    def arrived(self, queue_ids: Iterable[int]) -> None:
        """Ready messages were committed into these queues."""

    def received(self, queue_id: int, *, empty: bool) -> None:
        """An unfiltered RECEIVE / GET CONVERSATION GROUP returned (``empty``: nothing)."""

    def waiting(self, queue_id: int, delta: int) -> None:
        """A session started (+1) or stopped (-1) waiting in an unfiltered RECEIVE."""

    def rolled_back(self, queue_ids: Iterable[int]) -> None:
        """A transaction that received from these queues rolled back."""

    def altered(self, queue_name: str) -> None:
        """ALTER QUEUE ran (or the queue was created or disabled)."""
