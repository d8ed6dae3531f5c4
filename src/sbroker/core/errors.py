"""One exception tree for sbroker; SQL Server error numbers travel on ``.number``."""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every sbroker error; ``number`` is the SQL Server error number (50000 if none)."""

    number: int = 50000

    def __init__(self, message: str, number: int | None = None) -> None:
        super().__init__(message)
        if number is not None:
            self.number = number


class InvalidArgumentError(BrokerError, ValueError):
    """A statement was given a value of the wrong type or out of range."""

    number = 8116


class NotFoundError(BrokerError, LookupError):
    """A named object (queue, service, contract, ...) does not exist."""

    number = 15151


class DuplicateError(BrokerError):
    """An object with that name already exists."""

    number = 15025


class ConversationNotFoundError(BrokerError):
    """The conversation handle is unknown (or was ended and cleaned up)."""

    number = 8426


class ConversationStateError(BrokerError):
    """The endpoint's state does not allow this statement (SEND after END, ...)."""

    number = 8429


class ContractViolationError(BrokerError):
    """The message type is not in the contract or is sent in the wrong direction."""

    number = 8431


class QueueDisabledError(BrokerError):
    """RECEIVE or GET CONVERSATION GROUP on a queue whose status is off."""

    number = 9617


class QueueStreamedError(BrokerError):
    """RECEIVE or GET CONVERSATION GROUP on a queue a Spark stream reads, or a second stream
    on it (docs/stream.md): a streamed queue has one reader."""


class TransactionStateError(BrokerError):
    """A statement on a transaction that already committed or rolled back."""

    number = 3902


class DatabaseError(BrokerError):
    """The database file is corrupt, foreign, too new, or could not be opened."""

    number = 5120


class CommitConflictError(BrokerError):
    """The state changed under the transaction between a statement and COMMIT."""

    number = 1205
