"""How far the transmitter has read the transmission queue: every row at or below the
watermark was handed to the protocol core or passed over, so a pass reads only the ids above.

Ids are given at INSERT and become visible at COMMIT. With one writer at a time (SQLite) they
become visible in order, and ids are never given twice (migration 11): the watermark is the
highest id dealt with. With many writers (PostgreSQL: hosts and threads commit at once) a
row can appear below one already read, when the transaction that took id 7 commits after the
one that took id 8 was read. Such a hole holds the watermark back for ``GAP_SECONDS``, then
is passed over (the id was rolled back, or its row deleted before it was read); the
transmitter's full scan, once a second, finds anything committed later still.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sbroker.core.clock import SYSTEM_CLOCK

GAP_SECONDS = 1.0  # how long a hole below a row already read may still be a commit under way
MAX_HOLES = 100_000  # ids skipped in bulk (not commits under way): not held for


class Watermark:
    """``advance(present, waiting)`` after each pass; ``value`` is where the next one reads
    from."""

    def __init__(self, *, in_order: bool,
                 clock: Callable[[], float] = SYSTEM_CLOCK.monotonic) -> None:
        self.value = 0
        self._in_order = in_order
        self._clock = clock
        self._top: int | None = None  # the highest id read; None before the first pass
        self._holes: dict[int, float] = {}  # ids above it not read yet: since when

    def advance(self, present: Collection[int], waiting: Collection[int]) -> int:
        """After a pass that read ``present`` (the ids above the watermark; every id on a
        full pass) and dealt with all but ``waiting`` of them (handed over, in flight, or
        passed over). A row left waiting (no room for it yet) puts the watermark below it,
        lower than it was if need be (a full pass finds rows passed over for want of a
        route)."""
        value = self.value
        stop = min(waiting) - 1 if waiting else None
        highest = max(present, default=value)
        if self._in_order or self._top is None:
            # The first pass reads every row: an older hole is the full scan's.
            top = max(value, highest)
            self.value = top if stop is None else min(top, stop)
            self._top = top
            return self.value
        now = self._clock()
        holes = self._holes
        if highest > self._top:
            seen = set(present)
            born = range(self._top + 1, highest + 1)
            if len(born) - len(seen) <= MAX_HOLES:
                holes.update((i, now) for i in born if i not in seen)
            self._top = highest
        if holes:
            for i in present:
                holes.pop(i, None)
        target = self._top if stop is None else min(self._top, stop)
        young = [i for i, since in holes.items() if now - since < GAP_SECONDS]
        if young:
            target = min(target, min(young) - 1)
        if target != value:
            # Every id up to the target was read and dealt with, or is an old hole.
            self._holes = {i: since for i, since in holes.items() if i > target}
            self.value = target
        return self.value
