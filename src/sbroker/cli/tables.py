"""Views printed as tables on a terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from sbroker.cli.common import Broker


def print_views(broker: Broker, names: list[str], console: Console | None = None,
                columns: dict[str, list[str]] | None = None) -> None:
    """Print views as tables (long values shortened); ``columns`` picks columns per view."""
    console = console or Console()
    for name in names:
        rows = broker.view(name)
        if not rows:
            console.print(f"[bold]{name}[/bold]: (no rows)")
            continue
        cols = (columns or {}).get(name) or list(rows[0])
        if len(cols) > 7:  # too wide for a terminal: one record per row
            console.print(f"[bold]{name}[/bold] ({len(rows)} rows)")
            for i, row in enumerate(rows, 1):
                record = Table(show_header=False, box=None, padding=(0, 1))
                record.add_column(style="dim")
                record.add_column(overflow="fold")
                for col in cols:
                    record.add_row(col, cell(row[col]))
                console.print(f"-- row {i}")
                console.print(record)
            continue
        table = Table(title=f"{name} ({len(rows)} rows)", title_justify="left")
        for col in cols:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(cell(row[c]) for c in cols))
        console.print(table)


def cell(value: Any) -> str:
    """A value as table text: bytes decoded and shortened, None as empty."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
        return text if len(text) <= 60 else text[:57] + "..."
    return "" if value is None else str(value)
