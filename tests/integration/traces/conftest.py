"""Tracing tests run the pipeline tier's Python tasks (no JVM: a StubRunner)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "pipeline"))
