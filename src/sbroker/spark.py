"""``sbroker.spark``: the public names of the Spark side (task types, runners, the data
source's ``register``), kept here so that user code does not depend on the package layout."""

from __future__ import annotations

from sbroker.apps.spark import *  # noqa: F403
from sbroker.apps.spark import __all__ as __all__
