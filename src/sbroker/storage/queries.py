"""Named SQL blocks: every statement lives in a ``.sql`` file, one file per dialect.

A file is a series of blocks, each opened by a comment line ``-- name: some_name`` and holding
one statement (comment lines inside a block are kept out of the statement)::

    -- name: message_by_id
    -- What RECEIVE returns for one message.
    SELECT ... FROM sb_messages WHERE message_id = ?

Files are read once per process (``functools.cache``).  Python never composes SQL from
fragments: a statement that needs a list takes it as one parameter (a JSON array on SQLite,
an array on PostgreSQL).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from importlib import resources

from sbroker.core.errors import BrokerError

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


class Queries(Mapping[str, str]):
    """The statements of one ``.sql`` file by name: ``queries.some_name`` (a plain attribute:
    as fast as a local lookup on the hot paths) or ``queries["some_name"]``; a missing name is
    a clear error."""

    def __init__(self, origin: str, statements: dict[str, str]) -> None:
        clash = sorted(set(statements) & _RESERVED)
        if clash:
            raise BrokerError(f"SQL block names in {origin} clash with Queries' own: {clash}")
        self.origin = origin
        self._statements = statements
        self.__dict__.update(statements)

    def __getitem__(self, name: str) -> str:
        try:
            return self._statements[name]
        except KeyError:
            raise BrokerError(f"no SQL block named {name!r} in {self.origin}") from None

    def __getattr__(self, name: str) -> str:
        """Only called for a name that is not a block: the clear error."""
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._statements)

    def __len__(self) -> int:
        return len(self._statements)


_RESERVED = frozenset(dir(Queries)) | {"origin"}


def parse(text: str, origin: str = "<sql>") -> Queries:
    """The named blocks of ``text``."""
    statements: dict[str, str] = {}
    name: str | None = None
    body: list[str] = []

    def close() -> None:
        if name is not None:
            sql = "\n".join(body).strip().rstrip(";").strip()
            if not sql:
                raise BrokerError(f"the SQL block {name!r} in {origin} is empty")
            statements[name] = sql

    for line in text.splitlines():
        match = _NAME.match(line.strip())
        if match:
            close()
            name, body = match.group(1), []
            if name in statements:
                raise BrokerError(f"the SQL block {name!r} appears twice in {origin}")
        elif name is not None and not line.strip().startswith("--"):
            body.append(line)
    close()
    return Queries(origin, statements)


@functools.cache
def load(package: str, filename: str) -> Queries:
    """The named blocks of ``filename`` shipped in ``package`` (read once)."""
    text = resources.files(package).joinpath(filename).read_text("utf-8")
    return parse(text, f"{package}/{filename}")
