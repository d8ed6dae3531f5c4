"""``python -m sbroker.cli``: the same as the ``sbroker`` command."""

from __future__ import annotations

from sbroker.cli.main import main

main()
