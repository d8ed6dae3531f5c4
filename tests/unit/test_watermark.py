"""The transmitter's watermark: in order on SQLite; on PostgreSQL a hole below a row already
read is held for a while, as a commit that may still come (services/network/watermark.py)."""

from __future__ import annotations

from sbroker.storage import watermark
from sbroker.storage.watermark import GAP_SECONDS, Watermark


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_in_order_the_watermark_is_the_highest_id_dealt_with() -> None:
    mark = Watermark(in_order=True)
    assert mark.advance([1, 2, 4], []) == 4
    assert mark.advance([7, 9], []) == 9  # holes are rows deleted, never commits to come


def test_a_row_left_for_lack_of_room_stops_the_watermark_below_it() -> None:
    for in_order in (True, False):
        mark = Watermark(in_order=in_order, clock=Clock())
        assert mark.advance([1, 2, 3, 4], [3]) == 2
        assert mark.advance([3, 4, 5], []) == 5


def test_a_hole_below_a_row_read_holds_the_watermark_until_its_row_commits() -> None:
    clock = Clock()
    mark = Watermark(in_order=False, clock=clock)
    assert mark.advance([1, 2], []) == 2  # the first pass reads every row
    assert mark.advance([3, 5], []) == 3  # 4: a transaction not committed yet
    clock.now += GAP_SECONDS / 2
    # 5 was acknowledged and deleted, 6 and 7 came; 4 is still young
    assert mark.advance([6, 7], []) == 3
    assert mark.advance([4, 6, 7], []) == 7


def test_a_hole_that_never_fills_is_passed_over_after_the_gap_time() -> None:
    clock = Clock()
    mark = Watermark(in_order=False, clock=clock)
    mark.advance([1], [])
    assert mark.advance([3], []) == 1  # 2 rolled back: nobody can tell yet
    clock.now += GAP_SECONDS * 0.99
    assert mark.advance([4], []) == 1
    clock.now += GAP_SECONDS * 0.02
    assert mark.advance([4], []) == 4
    clock.now += GAP_SECONDS * 10
    assert mark.advance([6], []) == 4  # a new hole (5) is young again


def test_ids_skipped_in_bulk_are_not_held_for() -> None:
    mark = Watermark(in_order=False, clock=Clock())
    mark.advance([1], [])
    far = 2 + watermark.MAX_HOLES + 10
    assert mark.advance([far], []) == far


def test_a_full_pass_that_leaves_rows_for_lack_of_room_puts_the_watermark_back() -> None:
    """Rows with no route are passed over; once a route comes, a full pass reads them all but
    hands over only what it has room for: the next passes must start below the rest."""
    for in_order in (True, False):
        mark = Watermark(in_order=in_order, clock=Clock())
        mark.advance([1, 2, 3], [])
        assert mark.advance([4, 5, 6], []) == 6  # no route: passed over
        assert mark.advance([1, 2, 3, 4, 5, 6], [3, 4, 5, 6]) == 2  # the full pass, room for 2
        assert mark.advance([3, 4, 5, 6], []) == 6
