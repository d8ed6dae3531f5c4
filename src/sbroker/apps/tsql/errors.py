"""T-SQL errors: a number, a severity and a state as SQL Server gives them, plus where the
statement stood (batch, line, column) so that a message points at the script.

Every error number T-SQL raises is named here, once (the broker's own errors carry theirs on
``BrokerError.number``)."""

from __future__ import annotations

from sbroker.core.errors import BrokerError

# -- the numbers, as SQL Server has them -----------------------------------------------------
SYNTAX = 102                  # Incorrect syntax near ...
BREAK_OUTSIDE_LOOP = 135      # Cannot use a BREAK statement outside the scope of a WHILE
UNDECLARED = 137              # Must declare the scalar variable
ASSIGN_AND_RETRIEVE = 141     # A SELECT that assigns a variable must not also return data
BAD_DELAY = 148               # Incorrect time syntax in WAITFOR
UNKNOWN_FUNCTION = 195        # '...' is not a recognized built-in function name
MISSING_PARAMETER = 201       # Procedure ... expects parameter ..., which was not supplied
INVALID_COLUMN = 207          # Invalid column name
INVALID_OBJECT = 208          # Invalid object name
QUEUE_NOT_UPDATABLE = 416     # The service queue ... cannot be directly updated
CONVERSION_FAILED = 245       # Conversion failed when converting ...
NULL_NOT_ALLOWED = 515        # Cannot insert the value NULL into column ...
UNDECLARED_TABLE = 1087       # Must declare the table variable
VARIABLE_IN_DDL = 1047        # Variables are not allowed in this statement
TYPE_NOT_FOUND = 2715         # Cannot find data type
OBJECT_EXISTS = 2714          # There is already an object named ... in the database
NO_PROCEDURE = 2812           # Could not find stored procedure
DUPLICATE_KEY = 2627          # Violation of a PRIMARY KEY / UNIQUE constraint
DROP_MISSING = 3701           # Cannot drop the ..., because it does not exist
DATABASE_IN_USE = 3702        # Cannot drop database ... because it is currently in use
NO_BEGIN_FOR_COMMIT = 3902    # The COMMIT TRANSACTION request has no corresponding BEGIN
NO_BEGIN_FOR_ROLLBACK = 3903  # The ROLLBACK TRANSACTION request has no corresponding BEGIN
SESSION_STOPPED = 3980        # The request failed to run because the session was stopped
DIVIDE_BY_ZERO = 8134         # Divide by zero error encountered
TOO_MANY_ARGUMENTS = 8144     # Procedure or function ... has too many arguments specified
NOT_A_PARAMETER = 8145        # ... is not a parameter for procedure ...
XML_PARSING = 9400            # XML parsing: ...
NOT_IN_CATCH = 10704          # THROW without parameters should be inside a CATCH block
NOT_FOUND = 15151             # Cannot alter/drop ..., because it does not exist
REFUSED = 15281               # SQL Server blocked access to a component (xp_cmdshell ...)
CURSOR_ALREADY_OPEN = 16905   # The cursor is already open
CURSOR_EXISTS = 16915         # A cursor with the name ... already exists
CURSOR_NOT_FOUND = 16916      # A cursor with the name ... does not exist
CURSOR_NOT_OPEN = 16917       # Cursor is not open
FETCH_INTO_COUNT = 16924      # The number of variables declared in the INTO list must match
THROW_NUMBER = 35100          # Error number ... in the THROW statement is outside the range
UNSUPPORTED = 40517           # Keyword or statement option ... is not supported
ENDPOINT_EXISTS = 7862        # An endpoint of the requested type already exists
USER = 50000                  # RAISERROR / THROW without a number


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


def unsupported(what: str) -> TSqlError:
    """``what`` (a statement, an option, a function) is T-SQL that sbroker does not run."""
    return TSqlError(f"{what} is not supported by sbroker", UNSUPPORTED, 15)


def bad_value(message: str) -> TSqlError:
    """An option's value is not one the statement takes (a syntax error, as SQL Server's)."""
    return TSqlError(message, SYNTAX, 15)
