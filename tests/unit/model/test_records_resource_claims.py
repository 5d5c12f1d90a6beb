"""spec.resourceClaims decoded into Pod.resource_claims (issue 12, item 4)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.model.records import PodResourceClaim, pod_from_dict
from tests.builders import make_pod


def test_no_claims() -> None:
    assert make_pod().obj().resource_claims == ()


def test_claims_named_directly_and_from_templates() -> None:
    pod = (make_pod("job").resource_claim("a", claim="shared")
           .resource_claim("b", template="single-gpu")
           .resource_claim("c", template="two-gpus")
           .set("status.resourceClaimStatuses", [
               {"name": "c", "resourceClaimName": "job-c-9f2k"},
               {"name": "unrelated", "resourceClaimName": "x"}])
           .obj())
    assert pod.resource_claims == (
        PodResourceClaim("a", "shared", ""),
        PodResourceClaim("b", "", "single-gpu"),  # not created yet
        PodResourceClaim("c", "job-c-9f2k", "two-gpus"),
    )
    assert pod.pvc_names == ()  # claims are not volumes


@pytest.mark.parametrize(("claims", "status", "field", "message"), [
    ([{"resourceClaimName": "x"}], None, "spec.resourceClaims[0].name", "is required"),
    ([{"name": "a"}], None, "spec.resourceClaims[0]", "exactly one of"),
    ([{"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}], None,
     "spec.resourceClaims[0]", "exactly one of"),
    ([{"name": "a", "resourceClaimName": 3}], None,
     "spec.resourceClaims[0].resourceClaimName", "must be a string"),
    ([{"name": "a", "resourceClaimName": "x"}, "gpu"], None, "spec.resourceClaims[1]",
     "must be an object"),
    ({"name": "a"}, None, "spec.resourceClaims", "must be a list"),
    ([{"name": "a", "resourceClaimTemplateName": "t"}], [{"name": "a",
                                                          "resourceClaimName": 1}],
     "status.resourceClaimStatuses[0].resourceClaimName", "must be a string"),
])
def test_invalid_claims_name_the_pod_and_field(claims: Any, status: Any, field: str,
                                               message: str) -> None:
    raw = make_pod("bad", "ns").raw()
    raw["spec"]["resourceClaims"] = claims
    if status is not None:
        raw.setdefault("status", {})["resourceClaimStatuses"] = status
    with pytest.raises(InvalidObjectError) as e:
        pod_from_dict(raw)
    assert e.value.field == field and e.value.name == "ns/bad"
    assert message in str(e.value)
