"""sbroker: SQL Server Service Broker rebuilt for Python."""

from __future__ import annotations

from sbroker.apps.pipeline.parser import PipelineError
from sbroker.apps.pipeline.python import Cron, Every, Pipeline
from sbroker.apps.scheduler import Scheduler
from sbroker.apps.spark import (
    PythonTask,
    SparkConfig,
    SparkSQL,
    TaskCancelled,
    TaskFailed,
    TaskResult,
)
from sbroker.broker import Broker
from sbroker.core.clock import Clock, FakeClock, SystemClock
from sbroker.core.conversation import State
from sbroker.core.errors import (
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
    QueueStreamedError,
    TransactionStateError,
)
from sbroker.core.instrumentation import Instrumentation
from sbroker.core.messages import (
    DIALOG_TIMER,
    END_DIALOG,
    ERROR,
    Message,
    error_body,
    parse_error_body,
)
from sbroker.engine.catalog import Activation
from sbroker.engine.transaction import Transaction
from sbroker.services.activation import ActivationContext

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
    "Cron",
    "DatabaseError",
    "DuplicateError",
    "Every",
    "FakeClock",
    "Instrumentation",
    "InvalidArgumentError",
    "Message",
    "NotFoundError",
    "Pipeline",
    "PipelineError",
    "PythonTask",
    "QueueDisabledError",
    "QueueStreamedError",
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
