"""``sbroker.poison``: poison-message detection (docs/poison.md) as a helper for activated
procedures (the public name of :mod:`sbroker.apps.poison`)."""

from __future__ import annotations

from sbroker.apps.poison import *  # noqa: F403
from sbroker.apps.poison import __all__ as __all__
