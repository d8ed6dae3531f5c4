"""Between instances (docs/network.md): the broker endpoint, route resolution, the transmitter
and the receiver around the sans-IO protocol core in :mod:`sbroker.protocol`.

Conventions (where SQL Server gives no rule to follow):
- One endpoint per database (``create_endpoint`` has no name); the first live process that
  starts the broker runs it, other processes opening the same file leave it alone.
- ``port=0`` picks a free port: ``broker.network.address`` tells it (and ``sbroker serve``
  prints it).
- A secret-only endpoint with ``encryption="required"`` runs mutual TLS with certificates
  signed by a CA derived from the secret (needs ``cryptography``; without it, a warning and
  an authenticated, integrity-checked connection without TLS). ``"supported"`` and
  ``"disabled"`` with a secret only: no TLS.
- ``TRANSPORT`` routes: a service named ``tcp://host:port/anything`` is reached at host:port.
- Partial messages stay in the protocol core until complete (view
  ``dm_broker_partial_messages``, status 2); queues only ever hold whole messages.
- A message for a disabled queue arriving from another instance is enqueued (RECEIVE refuses
  it with 9617 until the queue is enabled) rather than held back, so that it never stalls the
  other conversations sharing the connection.
- ``honor_broker_priority`` is read when the endpoint starts.
"""

from __future__ import annotations

from sbroker.services.network.config import EndpointConfig
from sbroker.services.network.routing import Resolution, resolve
from sbroker.services.network.service import NetworkService

__all__ = ["EndpointConfig", "NetworkService", "Resolution", "resolve"]
