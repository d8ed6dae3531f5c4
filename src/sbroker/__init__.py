"""sbroker: SQL Server Service Broker rebuilt for Python."""

from __future__ import annotations

from .activation import ActivationContext
from .broker import Broker
from .catalog import Activation
from .clock import Clock, FakeClock, SystemClock
from .conversation import State
from .errors import (
    BrokerError,
    CommitConflictError,
    ContractViolationError,
    ConversationNotFoundError,
    ConversationStateError,
    DatabaseError,
    DuplicateError,
    InvalidArgumentError,
    NotFoundError,
    QueueDisabledError,
    TransactionStateError,
)
from .messages import DIALOG_TIMER, END_DIALOG, ERROR, Message, error_body, parse_error_body
from .scheduler import Scheduler
from .spark import PythonTask, SparkConfig, SparkSQL, TaskCancelled, TaskFailed, TaskResult
from .transaction import Transaction

__all__ = [
    "DIALOG_TIMER",
    "END_DIALOG",
    "ERROR",
    "Activation",
    "ActivationContext",
    "Broker",
    "BrokerError",
    "Clock",
    "CommitConflictError",
    "ContractViolationError",
    "ConversationNotFoundError",
    "ConversationStateError",
    "DatabaseError",
    "DuplicateError",
    "FakeClock",
    "InvalidArgumentError",
    "Message",
    "NotFoundError",
    "PythonTask",
    "QueueDisabledError",
    "Scheduler",
    "SparkConfig",
    "SparkSQL",
    "State",
    "SystemClock",
    "TaskCancelled",
    "TaskFailed",
    "TaskResult",
    "Transaction",
    "TransactionStateError",
    "error_body",
    "parse_error_body",
]
