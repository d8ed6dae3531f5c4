"""``sbroker sql`` as a user runs it, in a process of its own (the T-SQL acceptance tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The T-SQL scripts of the seeds (examples/tsql).
SCRIPTS = Path(__file__).resolve().parents[2] / "examples" / "tsql"


class SqlRunner:
    """``sbroker --db DB sql ...`` in a process of its own."""

    def __init__(self, db: str) -> None:
        self.db = db

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "sbroker.cli", "--db", self.db, "sql", *args]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), capture_output=True, text=True,
                              timeout=timeout)

    def json(self, *args: str) -> list[dict[str, Any]]:
        """The result sets of ``sbroker sql --json ARGS`` (it must exit 0)."""
        done = self.run("--json", *args, timeout=120)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]
