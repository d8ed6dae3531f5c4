"""bench.scheduler's split of a reader's idle time, on made-up spans (no JVM, no clock)."""

from __future__ import annotations

import pytest

from bench.scheduler import _Spans


def _spans(spans: list[tuple[int, float, float]]) -> _Spans:
    s = _Spans(None)  # type: ignore[arg-type]  # idle() never touches the runner
    s.spans = list(spans)
    return s


def test_idle_splits_the_wait_before_the_first_task_from_the_rest() -> None:
    # A round from 0 to 10 s; reader 1 starts at once, reader 2 after the ramp (4 s).
    s = _spans([(1, 0.0, 3.0), (1, 4.0, 10.0), (2, 4.0, 9.0)])
    before, later = s.idle(0.0, 10.0, readers=2)
    assert before == pytest.approx((0.0 + 4.0) / 2)
    assert later == pytest.approx((1.0 + 1.0) / 2)  # reader 1's gap, reader 2's tail
    assert s.spans == []  # taken: the next round starts from nothing


def test_a_reader_that_ran_nothing_waited_the_whole_round_and_other_rounds_do_not_count() -> None:
    s = _spans([(1, 0.5, 2.0), (1, 20.0, 21.0)])  # the second span is another round's
    before, later = s.idle(0.0, 2.0, readers=2)
    assert before == pytest.approx((0.5 + 2.0) / 2)
    assert later == pytest.approx(0.0)
