"""The ``sbroker`` command line, one module per command group."""

from __future__ import annotations

from sbroker.cli.main import main

__all__ = ["main"]
