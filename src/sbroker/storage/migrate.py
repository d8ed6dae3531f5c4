"""Numbered migrations: every table, index and view of a backend comes from its
``migrations/NNNN_name.sql`` files, applied in order, each exactly once.

A backend records how far a database got (SQLite: ``PRAGMA user_version``; PostgreSQL: a
table) and applies the rest inside one transaction.  A database at a newer version than this
sbroker knows is refused.  ``tests/unit/test_migrations.py`` checks that the migrations add up
to the backend's ``schema.sql``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    text: str


@functools.cache
def migrations(package: str) -> tuple[Migration, ...]:
    """The migrations shipped in ``package``/migrations, numbered 1, 2, ... without a gap."""
    folder = resources.files(package).joinpath("migrations")
    found = sorted(
        (int(m.group(1)), entry.name)
        for entry in folder.iterdir() if (m := _FILE.match(entry.name))
    )
    numbers = [number for number, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{package}/migrations must be numbered 1..n without gaps: {numbers}")
    return tuple(Migration(number, name, folder.joinpath(name).read_text("utf-8"))
                 for number, name in found)


def statements(text: str, complete: Callable[[str], bool]) -> list[str]:
    """The statements of a migration script: each ends with ';' at the end of a line and is
    ``complete`` by the backend's rules (a trigger's body holds ';'s of its own)."""
    out: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("--") and not current:
            continue
        current.append(line)
        if line.rstrip().endswith(";") and complete("\n".join(current)):
            out.append("\n".join(current))
            current = []
    if "".join(current).strip():
        out.append("\n".join(current))
    return out
