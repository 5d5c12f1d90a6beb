"""`policyd webhook`: the mutating admission webhook that makes policies visible to
autoscalers (policyd.admission), served over HTTPS beside `policyd run`.

One MutatingWebhookConfiguration entry per profile, each with its own path
(`/mutate/<schedulerName>`) and a namespaceSelector on the opt-in label
(`policyd.io/scheduler: <schedulerName>`), so the API server's own selection says which
profile a pod's namespace opted into and the webhook reads nothing from the cluster.

The webhook never refuses a pod: a pod it cannot read, a path naming no profile, a
request that is not a Pod CREATE are allowed unchanged (with a warning where
something is wrong). Its configuration in deploy/ says `failurePolicy: Ignore` for the
same reason: a webhook that is down must not stop pods from being created.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.admission.mutation import admit
from policyd.admission.projection import ProjectedPolicy, project_pod
from policyd.errors import InvalidObjectError
from policyd.model.records import pod_from_dict

log = logging.getLogger("policyd.webhook")

MUTATE_PREFIX = "/mutate/"
OPT_IN_LABEL = "policyd.io/scheduler"
REVIEW_API = "admission.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class AdmissionProfile:
    """What the webhook admits a profile's pods with."""

    scheduler_name: str
    policies: Sequence[ProjectedPolicy]


class Reviewer:
    """AdmissionReview in, AdmissionReview out (the HTTP side is `review_route`)."""

    def __init__(self, profiles: Mapping[str, AdmissionProfile], *,
                 override_scheduler: bool = False) -> None:
        self.profiles = dict(profiles)
        self.override_scheduler = override_scheduler

    def review(self, profile: str, document: Mapping[str, Any]) -> dict[str, Any]:
        """The response to one AdmissionReview request for `profile`."""
        request = document.get("request")
        request = request if isinstance(request, Mapping) else {}
        response: dict[str, Any] = {"uid": str(request.get("uid") or ""), "allowed": True}
        out = {"apiVersion": REVIEW_API, "kind": "AdmissionReview", "response": response}
        found = request.get("kind")
        kind: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if (kind.get("kind") != "Pod" or request.get("operation") != "CREATE"
                or request.get("subResource")):
            return out
        chosen = self.profiles.get(profile)
        if chosen is None:
            response["warnings"] = [f"policyd: no profile {profile!r} here; pod admitted "
                                    "unchanged"]
            return out
        obj = request.get("object")
        if not isinstance(obj, Mapping):
            return out
        pod_obj = dict(obj)
        # At CREATE the namespace may be only in the request, the name only a prefix.
        meta = dict(pod_obj.get("metadata") or {})
        meta.setdefault("namespace", request.get("namespace") or "default")
        readable = {**pod_obj, "metadata": {
            **meta, "name": meta.get("name") or f"{meta.get('generateName') or 'pod'}x"}}
        try:
            pod = pod_from_dict(readable)
        except InvalidObjectError as err:
            response["warnings"] = [f"policyd: cannot read this pod, admitted unchanged: "
                                    f"{err.message}"[:500]]
            return out
        admitted = admit(pod_obj, project_pod(pod, chosen.policies),
                         scheduler_name=chosen.scheduler_name,
                         override_scheduler=self.override_scheduler)
        if admitted.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(
                json.dumps(admitted.patch).encode()).decode()
        if admitted.warnings:
            response["warnings"] = admitted.warnings
        return out

    def review_route(self, path: str, body: bytes) -> tuple[int, bytes, str]:
        """HealthServer's POST handler for `/mutate/<profile>`."""
        profile = path[len(MUTATE_PREFIX):].strip("/")
        try:
            document = json.loads(body)
        except ValueError:
            return 400, b"not JSON", "text/plain"
        if not isinstance(document, Mapping) or document.get("kind") != "AdmissionReview":
            return 400, b"not an AdmissionReview", "text/plain"
        answer = self.review(profile, document)
        response = answer["response"]
        log.debug("admission review %s for profile %s: %s", response["uid"], profile,
                  "patched" if "patch" in response else "unchanged")
        return 200, json.dumps(answer).encode(), "application/json"
