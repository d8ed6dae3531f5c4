"""Write ``src/sbroker/storage/sqlite/schema.sql``: the schema the numbered migrations make,
as SQLite stores it (``tests/unit/test_migrations.py`` checks that they agree).

Run: ``python -m tools.schema`` after adding a migration.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import sbroker
from sbroker.storage.sqlite.connector import schema_of

TARGET = Path(__file__).resolve().parent.parent / "src/sbroker/storage/sqlite/schema.sql"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "schema.db"
        sbroker.Broker.open(path).close()
        TARGET.write_text("\n\n".join(schema_of(path)) + "\n", "utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
