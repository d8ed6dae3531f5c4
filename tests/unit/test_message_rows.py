"""A queue row becomes a :class:`Message` through ``message_from_row``, the fast path of
RECEIVE and peek: the same message ``Message(*row)`` makes, field for field."""

from __future__ import annotations

import dataclasses

import pytest

from sbroker.core.messages import Message, message_from_row

# Every column a different value, so a field set from the wrong column shows.
ROW = (1, 5, 123, "GROUP", "HANDLE", 7, "svc", "contract", "type", "NONE", b"body", "ID", 1.5,
       "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")


def test_a_full_row_gives_every_field_from_its_own_column() -> None:
    made = message_from_row(ROW)
    assert type(made) is Message
    assert [getattr(made, f.name) for f in dataclasses.fields(Message)] == list(ROW)
    assert made == Message(*ROW) and hash(made) == hash(Message(*ROW))


def test_the_message_stays_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        message_from_row(ROW).priority = 9  # type: ignore[misc]


def test_a_row_without_the_enqueue_time_takes_the_default() -> None:
    assert message_from_row(ROW[:12]) == Message(*ROW[:12])
    assert message_from_row(ROW[:12]).message_enqueue_time == 0.0


def test_a_row_without_a_trace_context_has_none() -> None:
    assert message_from_row(ROW[:13]) == Message(*ROW[:13])
    assert message_from_row(ROW[:13]).trace_context is None
