"""Pipeline tests run without a JVM: tasks go to a StubRunner (through the executor of a
broker on each backend)."""

from __future__ import annotations

import sys
from pathlib import Path

# `python = "pipeline_task_helpers:..."` targets of the tests import from this folder
sys.path.insert(0, str(Path(__file__).parent))
