"""Key material for the handshake: proofs of the shared secret and per-session keys.

Built only from stdlib HMAC-SHA256 (RFC 2104) and HKDF (RFC 5869) expressed with it; the
transcript binds both instance ids, both nonces, the mode and an optional TLS channel binding.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from uuid import UUID

__all__ = ["HANDSHAKE_KEY", "SessionKeys", "derive_keys", "hkdf_sha256", "prove", "transcript"]

# Handshake frames are sealed with this public key: their MAC detects corruption only;
# authenticity comes from the challenge-response proofs inside them.
HANDSHAKE_KEY = b"sbroker/handshake/v1"


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869) extract-then-expand."""
    prk = hmac.digest(salt or b"\x00" * 32, ikm, "sha256")
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.digest(prk, block + info + bytes([counter]), "sha256")
        out += block
        counter += 1
    return out[:length]


def transcript(
    initiator: UUID,
    responder: UUID,
    nonce_i: bytes,
    nonce_r: bytes,
    mode: int,
    channel_binding: bytes,
) -> bytes:
    """Everything both proofs and the session keys are bound to."""
    return b"".join(
        [
            b"sbroker/v1",
            initiator.bytes,
            responder.bytes,
            nonce_i,
            nonce_r,
            bytes([mode]),
            hashlib.sha256(channel_binding).digest(),
        ]
    )


def prove(secret: bytes, role: bytes, script: bytes) -> bytes:
    """Proof that the holder of `secret` took part in `script` as `role`."""
    return hmac.digest(secret, b"proof/" + role + script, "sha256")


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """One MAC key per direction, so a frame cannot be reflected back to its sender."""

    initiator_to_responder: bytes
    responder_to_initiator: bytes


def derive_keys(secret: bytes, nonce_i: bytes, nonce_r: bytes, script: bytes) -> SessionKeys:
    """Session keys from the secret and both nonces (fresh per connection)."""
    okm = hkdf_sha256(secret, nonce_i + nonce_r, b"sbroker/session-keys" + script, 64)
    return SessionKeys(okm[:32], okm[32:])
