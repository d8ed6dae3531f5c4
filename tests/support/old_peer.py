"""A broker built before a message's optional fields (main at a07cbfb), as far as its peers
can tell: its fragment decoder raised RemoteProtocolError on any flag above the two it
knew, and its session then closed without a Close frame (`receive_data` → `_fail`)."""

from __future__ import annotations

from sbroker.protocol import Session
from sbroker.protocol.errors import RemoteProtocolError
from sbroker.protocol.frames import FrameType, _acks_at
from sbroker.protocol.framing import RawFrame


class OldSession(Session):
    """A `Session` that refuses a fragment with a flag bit above 3, as a07cbfb's did."""

    def _on_raw(self, raw: RawFrame, now: float) -> None:
        key = self._receive_key(raw.ftype)
        if raw.ftype == FrameType.FRAGMENT and key is not None and raw.verify(key):
            _, pos = _acks_at(raw.body, 0)  # decoded after the MAC check, as it was
            if raw.body[pos + 16] > 3:  # a07cbfb frames._read_fragment: `if flags > 3`
                raise RemoteProtocolError("bad fragment flags")
        super()._on_raw(raw, now)
