"""A minimal dynamic volume provisioner for tests: what a CSI external-provisioner does
for a `WaitForFirstConsumer` StorageClass, against the real API server.

The hand-off it takes part in is upstream's, between three parties:

1. the scheduler (kube-scheduler's VolumeBinding PreBind, or policyd's) chooses a node
   and annotates the claim with ``volume.kubernetes.io/selected-node``;
2. the real PV controller (kube-controller-manager's persistentvolume-binder) sees an
   unbound claim of a class whose provisioner is not an in-tree plugin, and hands it to
   that provisioner by annotating it ``volume.kubernetes.io/storage-provisioner``
   (``provisionClaimOperationExternal`` in pkg/controller/volume/persistentvolume);
3. this provisioner creates a PV for the claim: capacity = the request, the claim's
   access modes and volume mode, the class's name and reclaim policy, a ``claimRef``
   with the claim's uid, node affinity ``kubernetes.io/hostname In [selected node]``,
   a ``csi`` source (or ``local``), annotated ``pv.kubernetes.io/provisioned-by``.
   The PV controller then binds the claim to it: a PV pre-bound to the claim by uid
   matches it whatever the binding mode (``FindMatchingVolume`` in component-helpers).

Like the external-provisioner, it acts only on claims the PV controller handed to it
(step 2), never on its own reading of the class: without kube-controller-manager
nothing is provisioned, as in a real cluster. It does not delete released volumes;
tests delete what they create.

Usage::

    with Provisioner(client, "csi.example.com") as prov:
        ...  # create the class, the claim, schedule the pod
        wait_for(lambda: prov.provisioned.get((namespace, claim)))
"""

from __future__ import annotations

import threading
from typing import Any

from policyd.kube.client import ApiError, KubeClient, WatchStream

Obj = dict[str, Any]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
# The PV controller sets both (the beta one for provisioners that still read it).
STORAGE_PROVISIONER = ("volume.kubernetes.io/storage-provisioner",
                       "volume.beta.kubernetes.io/storage-provisioner")
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
HOSTNAME = "kubernetes.io/hostname"


def volume_name(claim: Obj) -> str:
    """The PV name external-provisioner gives a claim's volume: ``pvc-<claim uid>``."""
    return f"pvc-{claim['metadata']['uid']}"


def wants_volume_from(claim: Obj, provisioner: str) -> str | None:
    """The selected node, if `claim` is unbound, has one, and the PV controller handed
    it to `provisioner`; else None."""
    meta = claim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if meta.get("deletionTimestamp") or (claim.get("spec") or {}).get("volumeName"):
        return None
    if not any(annotations.get(key) == provisioner for key in STORAGE_PROVISIONER):
        return None
    node = annotations.get(SELECTED_NODE)
    return str(node) if node else None


def volume_for(claim: Obj, storage_class: Obj, node: str, provisioner: str,
               source: str = "csi") -> Obj:
    """The PV a provisioner creates for `claim` on `node`."""
    meta, spec = claim["metadata"], claim["spec"]
    name = volume_name(claim)
    sources: dict[str, Obj] = {
        "csi": {"csi": {"driver": provisioner, "volumeHandle": name}},
        "local": {"local": {"path": f"/mnt/disks/{name}"}},
    }
    pv_spec: Obj = {
        "capacity": {"storage": spec["resources"]["requests"]["storage"]},
        "accessModes": list(spec.get("accessModes") or []),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "storageClassName": storage_class["metadata"]["name"],
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "namespace": meta["namespace"], "name": meta["name"],
                     "uid": meta["uid"]},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}},
        **sources[source],
    }
    if storage_class.get("mountOptions"):
        pv_spec["mountOptions"] = list(storage_class["mountOptions"])
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: provisioner}},
            "spec": pv_spec}


class Provisioner:
    """Watches every claim and creates a PV for each one handed to `name` (see the
    module docstring). Thread-based: `start()`/`stop()`, or a context manager.

    `provisioned` maps (namespace, claim name) to the PV created for it; `errors` keeps
    what failed (a test should assert it is empty)."""

    def __init__(self, client: KubeClient, name: str, *, source: str = "csi") -> None:
        self.client = client
        self.name = name
        self.source = source
        self.provisioned: dict[tuple[str, str], str] = {}
        self.errors: list[str] = []
        self._done_uids: set[str] = set()
        self._stopping = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Provisioner:
        if self._thread is not None:
            raise RuntimeError("provisioner already started")
        # The first list happens here, so that a claim created right after start() is
        # seen either in it or in the watch that resumes from its resourceVersion.
        version = self._list_and_handle()
        self._thread = threading.Thread(target=self._run, args=(version,),
                                        name=f"provisioner-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Provisioner:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- the loop ---------------------------------------------------------------------

    def _run(self, version: str) -> None:
        while not self._stopping.is_set():
            try:
                try:
                    version = self._watch(version)
                    continue
                except ApiError as exc:
                    if self._stopping.is_set():
                        return
                    # 410 Gone or a broken stream: list again (catches what was missed).
                    if exc.status not in (0, 410):
                        self.errors.append(f"watch: {exc}")
                self._stopping.wait(0.2)
                version = self._list_and_handle()
            except Exception as exc:  # a bug here must fail the test, not end the thread
                self.errors.append(f"provisioner: {exc!r}")
                self._stopping.wait(0.2)

    def _list_and_handle(self) -> str:
        listed = self.client.request("GET", "/api/v1/persistentvolumeclaims")
        for claim in listed.get("items") or []:
            self._handle(claim)
        return str(listed["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        stream = self.client.stream("/api/v1/persistentvolumeclaims", query={
            "watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"})
        self._stream = stream
        if self._stopping.is_set():  # stop() ran before the stream was published
            stream.close()
            return version
        for event in stream.events():
            obj = event.get("object") or {}
            if event["type"] == "ERROR":
                raise ApiError(int(obj.get("code") or 0), str(obj.get("reason") or ""),
                               str(obj.get("message") or ""))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event["type"] in ("ADDED", "MODIFIED"):
                self._handle(obj)
        return version

    def _handle(self, claim: Obj) -> None:
        node = wants_volume_from(claim, self.name)
        uid = claim["metadata"]["uid"]
        if node is None or uid in self._done_uids:
            return
        meta = claim["metadata"]
        try:
            # The class decides too: external-provisioner checks that the claim's class
            # is one of its own before provisioning.
            storage_class = self.client.request(
                "GET", f"/apis/storage.k8s.io/v1/storageclasses/"
                f"{claim['spec'].get('storageClassName') or ''}")
            if storage_class.get("provisioner") != self.name:
                return
            body = volume_for(claim, storage_class, node, self.name, self.source)
            self.client.request("POST", "/api/v1/persistentvolumes", body=body)
        except ApiError as exc:
            if exc.status != 409:  # 409: created before (a relist saw the claim again)
                self.errors.append(f"{meta['namespace']}/{meta['name']}: {exc}")
                return
        self._done_uids.add(uid)
        self.provisioned[(meta["namespace"], meta["name"])] = volume_name(claim)
