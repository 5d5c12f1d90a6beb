"""The admission webhook: AdmissionReview in, AdmissionReview out (a JSON patch that,
applied, gives `policyd admit`'s pod), never a refusal; and the same over HTTPS with
the certificate of --tls-cert-file, reloaded when the files change."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.webhook import AdmissionProfile, Reviewer
from policyd.daemon.webhook_server import WebhookOptions, WebhookServer
from policyd.devcluster.ports import free_ports
from policyd.pki import self_signed_serving_cert
from policyd.policy import load_policies

ROOT = Path(__file__).resolve().parents[3]

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def reviewer() -> Reviewer:
    policies, problems = load_policies([ROOT / "policies" / "hw-encrypt.yaml"])
    assert problems == []
    return Reviewer({"secure": AdmissionProfile("secure", tuple(policies))})


def _review(obj: Obj | None, *, operation: str = "CREATE", kind: str = "Pod") -> Obj:
    request: Obj = {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind},
                    "operation": operation, "namespace": "shop"}
    if obj is not None:
        request["object"] = obj
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": request}


POD: Obj = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "payments-",
                         "annotations": {"myorg.io/require-hw-encrypt": "true"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _patched(obj: Obj, response: Obj) -> Obj:
    """Apply the response's patch (only `add` of whole members, what the webhook sends)."""
    out: Obj = copy.deepcopy(obj)
    for op in json.loads(base64.b64decode(response["patch"])):
        assert op["op"] == "add"
        *parents, last = op["path"].strip("/").split("/")
        target = out
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = op["value"]
    return out


def test_a_pod_create_is_patched_and_told(reviewer: Reviewer) -> None:
    answer = reviewer.review("secure", _review(POD))
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    response = answer["response"]
    assert response["uid"] == "u-1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    admitted = _patched(POD, response)
    assert admitted["spec"]["schedulerName"] == "secure"
    [term] = admitted["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["key"] == "node.kubernetes.io/hw-encrypt"
    assert "policyd: spec.schedulerName set to secure" in response["warnings"]
    # The API server reinvokes webhooks after later ones changed the pod: the admitted
    # pod comes back, and nothing changes.
    again = reviewer.review("secure", _review(admitted))["response"]
    assert "patch" not in again and "warnings" not in again


@pytest.mark.parametrize("review", [
    _review(POD, operation="UPDATE"),
    _review(POD, kind="Deployment"),
    _review(None),
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
])
def test_what_is_not_a_pod_create_is_allowed_unchanged(reviewer: Reviewer, review: Obj
                                                       ) -> None:
    response = reviewer.review("secure", review)["response"]
    assert response["allowed"] is True and "patch" not in response


def test_never_a_refusal(reviewer: Reviewer) -> None:
    unknown = reviewer.review("nope", _review(POD))["response"]
    assert unknown["allowed"] is True and "patch" not in unknown
    assert unknown["warnings"] == ["policyd: no profile 'nope' here; pod admitted unchanged"]
    broken = {**POD, "spec": {"containers": "not a list"}}
    response = reviewer.review("secure", _review(broken))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert response["warnings"][0].startswith("policyd: cannot read this pod")
    code, body, _ = reviewer.review_route("/mutate/secure", b"{not json")
    assert code == 400 and body == b"not JSON"


def _post(port: int, ca: Path, body: bytes) -> Obj:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(f"https://127.0.0.1:{port}/mutate/secure", data=body,
                                 headers={"Content-Type": "application/json"},
                                 method="POST")
    with urllib.request.urlopen(req, context=ctx, timeout=10) as reply:
        answer: Obj = json.loads(reply.read())
        return answer


def _healthz(port: int, ca: Path) -> bytes:
    ctx = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx,
                                timeout=10) as reply:
        return reply.read()  # type: ignore[no-any-return]


def test_serves_reviews_over_https_and_picks_up_a_rotated_certificate(
        reviewer: Reviewer, tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = self_signed_serving_cert(("127.0.0.1",))
    cert.write_bytes(first[0])
    key.write_bytes(first[1])
    server = WebhookServer(WebhookOptions("127.0.0.1", free_ports(1)[0], cert, key),
                           reviewer)
    server.start()
    try:
        answer = _post(server.port, cert, json.dumps(_review(POD)).encode())
        assert answer["response"]["patchType"] == "JSONPatch"
        assert _healthz(server.port, cert) == b"ok"
        # Rotated files: the next handshake presents the new certificate.
        second = self_signed_serving_cert(("127.0.0.1",))
        cert.write_bytes(second[0])
        key.write_bytes(second[1])
        assert server.cert is not None and server.cert.check()
        old_ca = tmp_path / "old.crt"
        old_ca.write_bytes(first[0])
        with pytest.raises(OSError):  # the old certificate no longer verifies
            _post(server.port, old_ca, json.dumps(_review(POD)).encode())
        assert _post(server.port, cert, json.dumps(_review(POD)).encode())["response"][
            "allowed"] is True
    finally:
        server.stop()

