"""Conversation endpoint states and their transitions, written as data.

Every ``(state, event)`` pair that is allowed appears in :data:`TRANSITIONS`; any other pair is an
error, raised by :func:`transition`.  The engine applies the effects; this module does no I/O.
"""

from __future__ import annotations

from enum import StrEnum

from sbroker.core.errors import ConversationStateError


class State(StrEnum):
    """The states of ``conversation_endpoints.state``."""

    SO = "SO"  # started outbound: BEGIN DIALOG ran, nothing sent yet
    SI = "SI"  # started inbound: the first message is arriving, not yet complete
    CO = "CO"  # conversing
    DI = "DI"  # disconnected inbound: the peer ended
    DO = "DO"  # disconnected outbound: we ended, waiting for the peer
    ER = "ER"  # error: an Error arrived or the lifetime expired
    CD = "CD"  # closed


class Event(StrEnum):
    SEND = "send"  # this side sends a message
    MESSAGE_IN = "message_in"  # a complete message from the peer arrives
    PARTIAL_IN = "partial_in"  # part of the peer's first message arrives
    END = "end"  # this side runs END CONVERSATION
    END_WITH_ERROR = "end_with_error"  # END CONVERSATION WITH ERROR
    PEER_END = "peer_end"  # an EndDialog arrives
    PEER_ERROR = "peer_error"  # an Error arrives
    LIFETIME_EXPIRED = "lifetime_expired"


class Effect(StrEnum):
    SEND_END_DIALOG = "send_end_dialog"  # tell the peer we ended (after pending messages)
    SEND_ERROR = "send_error"  # tell the peer with an Error, pending messages dropped
    ENQUEUE = "enqueue"  # put the arriving message in the local queue
    DROP = "drop"  # discard the arriving message
    ENQUEUE_LIFETIME_ERROR = "enqueue_lifetime_error"
    CLOSE = "close"  # both sides ended: the endpoint can be deleted


S, E, F = State, Event, Effect
_LIVE = (S.SO, S.SI, S.CO)

TRANSITIONS: dict[tuple[State, Event], tuple[State, tuple[Effect, ...]]] = {}
for _s in _LIVE:
    TRANSITIONS[(_s, E.SEND)] = (S.CO, ())
    TRANSITIONS[(_s, E.MESSAGE_IN)] = (S.CO, (F.ENQUEUE,))
    TRANSITIONS[(_s, E.END)] = (S.DO, (F.SEND_END_DIALOG,))
    TRANSITIONS[(_s, E.END_WITH_ERROR)] = (S.DO, (F.SEND_ERROR,))
    TRANSITIONS[(_s, E.PEER_END)] = (S.DI, (F.ENQUEUE,))
    TRANSITIONS[(_s, E.PEER_ERROR)] = (S.ER, (F.ENQUEUE,))
    TRANSITIONS[(_s, E.LIFETIME_EXPIRED)] = (S.ER, (F.ENQUEUE_LIFETIME_ERROR,))
TRANSITIONS[(S.SI, E.PARTIAL_IN)] = (S.SI, ())
TRANSITIONS[(S.CO, E.PARTIAL_IN)] = (S.CO, ())
# The peer ended: we may still end (which closes), and late traffic is dropped.
TRANSITIONS[(S.DI, E.END)] = (S.CD, (F.CLOSE,))
TRANSITIONS[(S.DI, E.END_WITH_ERROR)] = (S.CD, (F.CLOSE,))
TRANSITIONS[(S.DI, E.PEER_END)] = (S.DI, (F.DROP,))
TRANSITIONS[(S.DI, E.PEER_ERROR)] = (S.ER, (F.ENQUEUE,))
TRANSITIONS[(S.DI, E.LIFETIME_EXPIRED)] = (S.ER, (F.ENQUEUE_LIFETIME_ERROR,))
# We ended: whatever the peer says now only completes the close.
TRANSITIONS[(S.DO, E.MESSAGE_IN)] = (S.DO, (F.DROP,))
TRANSITIONS[(S.DO, E.PARTIAL_IN)] = (S.DO, (F.DROP,))
TRANSITIONS[(S.DO, E.PEER_END)] = (S.CD, (F.DROP, F.CLOSE))
TRANSITIONS[(S.DO, E.PEER_ERROR)] = (S.CD, (F.DROP, F.CLOSE))
TRANSITIONS[(S.DO, E.LIFETIME_EXPIRED)] = (S.CD, (F.CLOSE,))
TRANSITIONS[(S.DO, E.END)] = (S.DO, ())
# Error: the application must still end its side.
TRANSITIONS[(S.ER, E.END)] = (S.CD, (F.CLOSE,))
TRANSITIONS[(S.ER, E.END_WITH_ERROR)] = (S.CD, (F.CLOSE,))
TRANSITIONS[(S.ER, E.MESSAGE_IN)] = (S.ER, (F.DROP,))
TRANSITIONS[(S.ER, E.PARTIAL_IN)] = (S.ER, (F.DROP,))
TRANSITIONS[(S.ER, E.PEER_END)] = (S.ER, (F.DROP,))
TRANSITIONS[(S.ER, E.PEER_ERROR)] = (S.ER, (F.DROP,))
TRANSITIONS[(S.ER, E.LIFETIME_EXPIRED)] = (S.ER, ())
# Closed endpoints (kept only for anti-replay) ignore everything that arrives.
for _e in (E.MESSAGE_IN, E.PARTIAL_IN, E.PEER_END, E.PEER_ERROR, E.LIFETIME_EXPIRED):
    TRANSITIONS[(S.CD, _e)] = (S.CD, (F.DROP,))
del _s, _e

#: States in which SEND is allowed.
SENDABLE = frozenset(_LIVE)
#: The state SEND leaves each of them in, as the plain strings a row holds.
AFTER_SEND = {s.value: TRANSITIONS[(s, E.SEND)][0].value for s in _LIVE}


# The same table keyed by the state's plain string (what a row holds): a State member finds
# these keys too, since each state's name is its value (checked here), so its hash is the same.
assert all(s.name == s.value for s in State)
_BY_VALUE = {(s.value, e): found for (s, e), found in TRANSITIONS.items()}


def transition(state: State | str, event: Event) -> tuple[State, tuple[Effect, ...]]:
    """The next state and effects, or :class:`ConversationStateError` if not allowed."""
    found = _BY_VALUE.get((state, event))
    if found is not None:
        return found
    key = (State(state), event)  # ValueError for a state that does not exist
    raise ConversationStateError(
        f"the conversation endpoint is in state {key[0].value}, "
        f"which does not allow {event.value.replace('_', ' ')}"
    )
