"""mypy's proof that ``Broker`` satisfies each narrow interface the applications take instead
of it: the return below is checked (strict); nothing here runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sbroker.apps.dashboard.demo import DemoBroker
    from sbroker.apps.dashboard.reader import BrokerApi
    from sbroker.broker import Broker
    from sbroker.engine.api import BrokerAPI
    from sbroker.engine.streams import StreamBroker

    def _narrowed(broker: Broker) -> tuple[BrokerAPI, BrokerApi, DemoBroker, StreamBroker]:
        return broker, broker, broker, broker
