"""Kubeconfig writing: one cluster/user/context, embedded credentials, owner-only file."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from kubernetes import client, config

from policyd.devcluster.kubeconfig import kubeconfig_dict, write_kubeconfig

CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"


def test_certificate_kubeconfig_round_trips_through_the_client(tmp_path: Path) -> None:
    cfg = kubeconfig_dict(
        "https://127.0.0.1:6443", CA, client_cert_pem=b"cert", client_key_pem=b"key"
    )
    path = write_kubeconfig(tmp_path / "sub" / "kubeconfig", cfg)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    user = cfg["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == b"cert"
    assert base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]) == CA
    # The official client reads it (JSON is YAML) and targets the right server.
    loaded = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=loaded)  # type: ignore[no-untyped-call]
    assert loaded.host == "https://127.0.0.1:6443"


def test_token_kubeconfig(tmp_path: Path) -> None:
    cfg = kubeconfig_dict("https://127.0.0.1:1", CA, token="abc", user="sa")
    assert cfg["users"] == [{"name": "sa", "user": {"token": "abc"}}]
    assert cfg["current-context"] == cfg["contexts"][0]["name"]
    loaded = client.Configuration()
    path = write_kubeconfig(tmp_path / "k", cfg)
    config.load_kube_config(config_file=str(path), client_configuration=loaded)  # type: ignore[no-untyped-call]
    assert "Bearer abc" in loaded.api_key.values()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"token": "t", "client_cert_pem": b"c", "client_key_pem": b"k"},
        {"client_cert_pem": b"c"},
    ],
    ids=["none", "both", "cert-without-key"],
)
def test_exactly_one_credential(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        kubeconfig_dict("https://x", CA, **kwargs)  # type: ignore[arg-type]


def test_rewrite_keeps_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("old")
    path.chmod(0o644)
    write_kubeconfig(path, kubeconfig_dict("https://x", CA, token="t"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "old" not in path.read_text()
