"""Views printed as tables that fit the terminal (80 columns when it is not one), with
times as local ISO date-times."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from sbroker.cli.common import Broker, json_default

#: Columns that hold a time (epoch seconds in the broker's views, ISO text in the scheduler's).
TIME_COLUMNS = frozenset({"lifetime", "dialog_timer", "created_at", "enqueue_time",
                          "expires_at", "opened_at", "acquired_at", "removed_at",
                          "parked_until", "recorded_at", "due_at"})
_TIME_NAME = re.compile(r"(_time|Time|_at)$")
_EPOCH_RANGE = (1e8, 1e11)  # 1973 .. 5138: a number in a time column out of it is no time


def is_time_column(name: str) -> bool:
    """True for the columns ``cell`` shows as date-times."""
    return name in TIME_COLUMNS or bool(_TIME_NAME.search(name))


def local_time(value: Any, *, sep: str = " ") -> str | None:
    """Epoch seconds or ISO text as a local ISO date-time to the second; None if it is not
    one. ``sep="T"`` with an offset (``+01:00``) for machine-readable output."""
    when: dt.datetime | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if _EPOCH_RANGE[0] <= value < _EPOCH_RANGE[1]:
            when = dt.datetime.fromtimestamp(value, dt.UTC)
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)  # the scheduler writes UTC
    if when is None:
        return None
    local = when.astimezone()
    if sep == "T":
        return local.isoformat(timespec="seconds")
    return local.replace(tzinfo=None).isoformat(sep=sep, timespec="seconds")


def cell(value: Any, column: str = "") -> str:
    """A value as table text: times as local date-times, bytes decoded and shortened."""
    if column and is_time_column(column):
        text = local_time(value)
        if text is not None:
            return text
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
        return text if len(text) <= 60 else text[:57] + "..."
    return "" if value is None else str(value)


def json_line(row: Mapping[str, Any]) -> str:
    """A view row as one JSON line: times as local ISO date-times with their offset, bytes
    as text."""
    out = {}
    for key, value in row.items():
        when = local_time(value, sep="T") if is_time_column(key) else None
        out[key] = when if when is not None else value
    return json.dumps(out, default=json_default)


def print_rows(console: Console, title: str, rows: Sequence[Mapping[str, Any]],
               columns: Sequence[str] | None = None) -> None:
    """Rows as a table when it fits the console's width, else one record per row."""
    if not rows:
        console.print(f"[bold]{title}[/bold]: (no rows)")
        return
    cols = list(columns or rows[0])
    texts = [[cell(row.get(c), c) for c in cols] for row in rows]
    widths = [max(len(col), *(len(line) for t in texts for line in t[i].splitlines() or [""]))
              for i, col in enumerate(cols)]
    if sum(widths) + 3 * len(cols) + 1 <= console.width:  # each column: 2 padding, 1 border
        table = Table(title=f"{title} ({len(rows)} rows)", title_justify="left")
        for col in cols:
            table.add_column(col, no_wrap=True)
        for text in texts:
            table.add_row(*text)
        console.print(table)
        return
    console.print(f"[bold]{title}[/bold] ({len(rows)} rows)")
    for i, row in enumerate(rows, 1):
        record = Table(show_header=False, box=None, padding=(0, 1))
        record.add_column(style="dim", no_wrap=True)
        record.add_column(overflow="fold")
        for col in cols:
            record.add_row(col, cell(row.get(col), col))
        console.print(f"-- row {i}")
        console.print(record)


def print_views(broker: Broker, names: list[str], console: Console | None = None,
                columns: dict[str, list[str]] | None = None) -> None:
    """Print views as tables; ``columns`` picks columns per view."""
    console = console or Console()
    for name in names:
        print_rows(console, name, broker.view(name), (columns or {}).get(name))
