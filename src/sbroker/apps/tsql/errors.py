"""T-SQL errors: a number, a severity and a state as SQL Server gives them, plus where the
statement stood (batch, line, column) so that a message points at the script."""

from __future__ import annotations

from sbroker.core.errors import BrokerError

SYNTAX = 102          # Incorrect syntax near ...
UNSUPPORTED = 40517   # Keyword or statement option ... is not supported
USER = 50000          # RAISERROR / THROW without a number
UNDECLARED = 137      # Must declare the scalar variable
NO_PROCEDURE = 2812   # Could not find stored procedure
REFUSED = 15281       # SQL Server blocked access to a component (xp_cmdshell, OPENROWSET...)


class TSqlError(BrokerError):
    """An error raised by a T-SQL statement; severity >= 11 stops the batch."""

    def __init__(self, message: str, number: int = USER, severity: int = 16, state: int = 1,
                 *, line: int | None = None, column: int | None = None,
                 procedure: str | None = None) -> None:
        super().__init__(message, number)
        self.message = message
        self.severity = severity
        self.state = state
        self.line = line
        self.column = column
        self.procedure = procedure
        self.batch: int | None = None

    def where(self) -> str:
        """``batch 2, line 5, column 3`` (the parts that are known)."""
        parts = []
        if self.batch is not None:
            parts.append(f"batch {self.batch}")
        if self.procedure:
            parts.append(f"procedure {self.procedure}")
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.column is not None:
            parts.append(f"column {self.column}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        head = f"Msg {self.number}, Level {self.severity}, State {self.state}"
        return f"{head}, {where}: {self.message}" if where else f"{head}: {self.message}"


class TSqlSyntaxError(TSqlError):
    """Text that does not parse, or syntax sbroker does not support (named in the message)."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 number: int = SYNTAX) -> None:
        super().__init__(message, number, 15, 1, line=line, column=column)
