"""The endpoint state machine, checked as a table: every (state, event) pair."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sbroker import ConversationStateError
from sbroker.core.conversation import (
    SENDABLE,
    TRANSITIONS,
    Effect,
    Event,
    State,
    transition,
)


@given(st.sampled_from(list(State)), st.sampled_from(list(Event)))
def test_every_pair_is_either_in_the_table_or_an_error(state: State, event: Event) -> None:
    if (state, event) in TRANSITIONS:
        next_state, effects = transition(state, event)
        assert isinstance(next_state, State)
        assert all(isinstance(e, Effect) for e in effects)
    else:
        with pytest.raises(ConversationStateError) as info:
            transition(state, event)
        assert info.value.number == 8429
        assert state.value in str(info.value)


@pytest.mark.parametrize("state", [State.DI, State.DO, State.ER, State.CD])
def test_send_is_refused_once_either_side_ended(state: State) -> None:
    assert state not in SENDABLE
    with pytest.raises(ConversationStateError):
        transition(state, Event.SEND)


def test_first_send_moves_started_outbound_to_conversing() -> None:
    assert transition(State.SO, Event.SEND) == (State.CO, ())


def test_ending_first_waits_for_the_peer_and_ending_second_closes() -> None:
    assert transition(State.CO, Event.END) == (State.DO, (Effect.SEND_END_DIALOG,))
    assert transition(State.CO, Event.PEER_END)[0] == State.DI
    assert transition(State.DI, Event.END) == (State.CD, (Effect.CLOSE,))


def test_end_with_error_sends_an_error_instead_of_end_dialog() -> None:
    assert transition(State.CO, Event.END_WITH_ERROR) == (State.DO, (Effect.SEND_ERROR,))


def test_lifetime_expiry_moves_live_endpoints_to_error() -> None:
    for state in (State.SO, State.SI, State.CO, State.DI):
        assert transition(state, Event.LIFETIME_EXPIRED) == (
            State.ER, (Effect.ENQUEUE_LIFETIME_ERROR,))


def test_messages_arriving_after_we_ended_are_dropped() -> None:
    assert Effect.DROP in transition(State.DO, Event.MESSAGE_IN)[1]
    assert Effect.DROP in transition(State.CD, Event.MESSAGE_IN)[1]


def test_closed_endpoint_cannot_be_ended_again() -> None:
    with pytest.raises(ConversationStateError):
        transition(State.CD, Event.END)
