"""Keys and X.509 certificates: the pieces the dev control plane's CA and the
daemon's self-signed serving certificate share.

ECDSA P-256 keys: generating one is instant (RSA would add a second or more) and every
consumer (Go TLS, Python ssl, curl, Prometheus) accepts them.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Valid from a little in the past (clock skew) ...
BACKDATE = datetime.timedelta(hours=1)
# ... for a year: longer than any dev cluster or daemon process lives.
VALIDITY = datetime.timedelta(days=365)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    """A certificate valid from BACKDATE ago for VALIDITY, with a random serial."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
    )


def key_usage(*, digital_signature: bool = True, cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def subject_alt_names(hosts: list[str] | tuple[str, ...]) -> list[x509.GeneralName]:
    """IP addresses as IP entries, anything else as DNS names, duplicates dropped."""
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):  # ordered de-duplication
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    return sans


def self_signed_serving_cert(extra_hosts: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a self-signed serving certificate for localhost,
    the loopback addresses, this host's name and `extra_hosts`: what kube-scheduler
    generates when it is given no --tls-cert-file. Clients either skip verification
    or pin it; it exists so that nothing travels in clear text."""
    key = new_key()
    hosts = ("localhost", "127.0.0.1", "::1", socket.gethostname(), *extra_hosts)
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"policyd@{now}")])
    cert = (
        builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName(
            subject_alt_names([h for h in hosts if h])), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert_pem(cert), key_pem(key)
