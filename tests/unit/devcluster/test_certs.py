"""Generated certificates: who signs what, for which names and groups."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from policyd.devcluster.certs import generate_certs


def test_certificates(tmp_path: Path) -> None:
    files = generate_certs(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(files.serving_cert.read_bytes())
    admin = x509.load_pem_x509_certificate(files.admin_cert.read_bytes())

    for leaf in (serving, admin):
        leaf.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)

    orgs = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == ["system:masters"]
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage

    for key in (files.ca_key, files.serving_key, files.admin_key, files.sa_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PUBLIC KEY" in files.sa_pub.read_bytes()


def test_controller_manager_certificate_is_the_bootstrap_user_without_groups(
    tmp_path: Path,
) -> None:
    # RBAC's bootstrap policy names the user system:kube-controller-manager; no
    # system:masters group, so the controllers get only the roles bound to it.
    files = generate_certs(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    kcm = x509.load_pem_x509_certificate(files.controller_manager_cert.read_bytes())
    kcm.verify_directly_issued_by(ca)
    cn = kcm.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert [c.value for c in cn] == ["system:kube-controller-manager"]
    assert kcm.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []
    usage = kcm.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    assert stat.S_IMODE(files.controller_manager_key.stat().st_mode) == 0o600
