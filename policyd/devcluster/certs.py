"""Certificates and keys of a throw-away control plane.

kube-apiserver only serves HTTPS, and its real authentication (client certificates,
ServiceAccount tokens) is what the tests must exercise, so each control plane gets its
own CA, a serving certificate for 127.0.0.1/localhost, an admin client certificate in
group ``system:masters``, a client certificate for kube-controller-manager (user
``system:kube-controller-manager``, no group: it gets only what RBAC grants it) and a
ServiceAccount token signing key. ECDSA P-256 keys are
used because generating them is instant (RSA would add seconds per start) and every
consumer (Go TLS, Python ssl, the ES256 token signer) accepts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from policyd.pki import builder as _builder
from policyd.pki import cert_pem, key_usage, new_key, subject_alt_names
from policyd.pki import key_pem as _key_pem


@dataclass(frozen=True)
class CertFiles:
    """PEM files written by `generate_certs`, all inside one directory."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # private: signs ServiceAccount tokens
    sa_pub: Path  # public: verifies them
    controller_manager_cert: Path
    controller_manager_key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> CertFiles:
        """The file names `generate_certs` writes into `directory` (for a cluster
        started by another process, whose files already exist)."""
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            admin_cert=directory / "admin.crt",
            admin_key=directory / "admin.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
            controller_manager_cert=directory / "controller-manager.crt",
            controller_manager_key=directory / "controller-manager.key",
        )


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def generate_certs(
    directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> CertFiles:
    """Write a fresh CA, serving and admin certificates and the SA key pair into `directory`.

    `hosts` become the serving certificate's subject alternative names (IPs or DNS
    names); the in-cluster names of the `kubernetes` Service are added because
    kube-apiserver advertises itself under them.
    """
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "policyd-dev-ca")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        cn: str, org: str | None, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> tuple[bytes, bytes]:
        key = new_key()
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org is not None:
            # Kubernetes maps the certificate's O= to the user's groups.
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        builder = (
            _builder(x509.Name(attrs), ca_cert.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(key_usage(), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert_pem(cert), _key_pem(key)

    sans = subject_alt_names(
        [*hosts, "kubernetes", "kubernetes.default", "kubernetes.default.svc"])
    serving_cert, serving_key = leaf("kube-apiserver", None, ExtendedKeyUsageOID.SERVER_AUTH, sans)
    admin_cert, admin_key = leaf(
        "policyd-admin", "system:masters", ExtendedKeyUsageOID.CLIENT_AUTH, []
    )

    # The user name the bootstrap RBAC policy knows; the controllers' own roles are
    # bound to it when the controller manager starts (see `controllermanager`).
    kcm_cert, kcm_key = leaf(
        "system:kube-controller-manager", None, ExtendedKeyUsageOID.CLIENT_AUTH, []
    )

    sa_key = new_key()
    sa_pub = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    files = CertFiles.in_directory(directory)
    _write(files.ca_cert, cert_pem(ca_cert))
    _write(files.ca_key, _key_pem(ca_key), private=True)
    _write(files.serving_cert, serving_cert)
    _write(files.serving_key, serving_key, private=True)
    _write(files.admin_cert, admin_cert)
    _write(files.admin_key, admin_key, private=True)
    _write(files.sa_key, _key_pem(sa_key), private=True)
    _write(files.sa_pub, sa_pub)
    _write(files.controller_manager_cert, kcm_cert)
    _write(files.controller_manager_key, kcm_key, private=True)
    return files
