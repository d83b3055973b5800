"""Throwaway TLS for the test servers: a CA and a server certificate it signs, made with ``cryptography``.

The certificate names ``localhost`` only, so a client that connects to 127.0.0.1 and checks the name is refused:
the tests connect to ``localhost`` and see host-name checking at work.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAME = "localhost"


@dataclass(frozen=True)
class Authority:
    """A CA's certificate, and the server certificate and key it signed, as PEM files."""

    ca: Path
    cert: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_authority(folder: Path, label: str, owner: tuple[int, int] | None = None) -> Authority:
    """A new CA named ``label`` and a certificate for ``localhost`` in ``folder``; the key readable by its owner
    only (PostgreSQL refuses a key others can read), ``owner`` (uid, gid) when the server runs as another user."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(label))
        .issuer_name(_name(label))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # certificate and CRL signing only
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(SERVER_NAME))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    authority = Authority(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    authority.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    authority.cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    authority.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    authority.key.chmod(0o600)
    if owner is not None:
        for path in (folder, authority.ca, authority.cert, authority.key):
            os.chown(path, *owner)
    return authority
