"""A throwaway certificate authority and certificates for TLS on loopback (tests, local runs).

``python -m kbus_dev certs --out DIR`` writes ``ca.pem``, ``server.pem`` / ``server-key.pem``
(for 127.0.0.1 and localhost) and ``client.pem`` / ``client-key.pem`` (for a server that asks
for client certificates). Real installations use their own CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certificates:
    """Where the files are."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = path.with_name(path.stem + "-key.pem")
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return key_path


def _issue(
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], common: str, *, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(ca[1].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca[0], hashes.SHA256())


def make_certificates(out: Path) -> Certificates:
    """A CA, a server certificate for loopback and a client certificate, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kbus test CA"))
        .issuer_name(_name("kbus test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(out / "ca.pem", ca_key, ca_cert)
    server_key = _write(out / "server.pem", *_issue((ca_key, ca_cert), "nats", server=True))
    client_key = _write(out / "client.pem", *_issue((ca_key, ca_cert), "kbus", server=False))
    return Certificates(
        out / "ca.pem", out / "server.pem", server_key, out / "client.pem", client_key
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kbus_dev certs", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    certs = make_certificates(parser.parse_args(argv).out)
    print(f"wrote a CA and certificates to {certs.ca.parent}")
    return 0
