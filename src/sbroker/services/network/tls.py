"""TLS for endpoints that authenticate with a shared secret only (encryption="required").

Every endpoint that knows the secret derives the same certificate authority key from it
(HKDF-SHA256 → a P-256 private key), and signs a fresh certificate of its own with it; so
two such endpoints run mutual TLS with each other, and a peer without the secret cannot
present an acceptable certificate. The secret is still proven in the protocol handshake.
"""

from __future__ import annotations

import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

_CA_NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sbroker shared-secret CA")])
_P256_ORDER = int("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551", 16)
_START = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
_END = datetime.datetime(2120, 1, 1, tzinfo=datetime.UTC)


def _ca_key(secret: bytes) -> ec.EllipticCurvePrivateKey:
    raw = HKDF(hashes.SHA256(), 48, b"sbroker endpoint CA", b"ca key").derive(secret)
    value = int.from_bytes(raw, "big") % (_P256_ORDER - 1) + 1
    return ec.derive_private_key(value, ec.SECP256R1())


def derived_certificates(secret: bytes, instance: str, folder: str) -> tuple[str, str, str]:
    """Write (certificate, private key, CA) PEM files for this instance into ``folder``."""
    ca_key = _ca_key(secret)
    ca = (
        x509.CertificateBuilder().subject_name(_CA_NAME).issuer_name(_CA_NAME)
        .public_key(ca_key.public_key()).serial_number(1)
        .not_valid_before(_START).not_valid_after(_END)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, instance)]))
        .issuer_name(_CA_NAME).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_START).not_valid_after(_END)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tuple(os.path.join(folder, n) for n in ("endpoint.pem", "endpoint.key", "ca.pem"))
    blobs = (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()),
        ca.public_bytes(serialization.Encoding.PEM),
    )
    for path, blob in zip(paths, blobs, strict=True):
        with open(path, "wb") as f:
            f.write(blob)
    os.chmod(paths[1], 0o600)
    return paths[0], paths[1], paths[2]
