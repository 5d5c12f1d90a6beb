"""Seeded volume cases for the differential test: `tests.gen.differential`'s cases
(a few nodes, pods bound to them, one pod to place) with storage around them.

A volume case adds StorageClasses, PersistentVolumes, claims and CSINodes, and gives
the pod under test zero to three claims. The scene is built for the real PV controller
(kube-controller-manager) and a dynamic provisioner to act on, as in a cluster:

- three classes per case: `<prefix>-local` (no provisioner, WaitForFirstConsumer:
  static local PVs, node or zone affinity), `<prefix>-imm` (no provisioner, Immediate:
  the PV controller binds its claims before anything is scheduled) and `<prefix>-dyn`
  (DRIVER's provisioner, WaitForFirstConsumer, sometimes with allowedTopologies);
- claims the PV controller is to bind before the pod is created (`Case.bind_first`):
  Immediate claims with a PV of their own (pre-bound through claimRef or not), and
  WaitForFirstConsumer claims a PV is pre-bound to (the PV controller binds those at
  once too, whatever the binding mode);
- an Immediate claim no PV can take (`unbound-immediate`), claims in the
  WaitForFirstConsumer classes (`static`, `dynamic`), ReadWriteOncePod claims, some
  used by a pod already on a node (`rwop`);
- CSINodes giving DRIVER an allocatable count (`limits`): CSI volumes of pods on the
  node count against it, as do the pod's own (bound CSI PVs, or dynamic claims, which
  NodeVolumeLimits counts through the class's provisioner);
- PVs labelled with a zone or with zone node affinity, and classes whose
  allowedTopologies name zones (`zone`);
- PV node affinities of the shapes kube-scheduler's CheckNodeAffinity reads by labels
  alone (`affinity-shapes`: matchFields alone or beside a label expression, several
  ORed terms, NotIn/Exists beside the pin);
- Released and Failed PVs that would suit a claim but for a stale claimRef
  (`released`), claims naming their PV in spec.volumeName (`volume-name`), Lost claims
  (`lost`), claims being deleted (`terminating`), inline GCE PD / AWS EBS disks, some
  shared with pods on nodes (`inline-disk`), and an ephemeral volume whose claim name
  another claim has taken (`ephemeral-taken`). The PV controller's phase for those
  that are neither Available/Bound nor bound first is their SETTLES_TO label.

Isolation from other cases on the same API server, beyond what `tests.gen.differential`
does: cluster-scoped objects (classes, PVs, CSINodes) carry the prefix in their names
(CSINodes are named after the case's nodes) and the CASE_LABEL, so clean-up finds them
by label; a claim can only match PVs of its own class. DRIVER and its CSIDriver object
are shared by every case: one provisioner serves them all, and a CSIDriver is named
after its driver.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from tests.gen.clusters import HOSTNAME, ZONE, Mix, Names, gen_node, gen_pod_dict
from tests.gen.differential import (
    CASE_LABEL,
    HOLD_FINALIZER,
    SCHEDULER_NAME,
    UNDER_TEST_LABEL,
    Case,
    isolated,
)

# The CSI driver of every case: its provisioner (tests/e2e/provisioner.py, run by the
# test) provisions the `-dyn` classes, and CSINodes limit how many of its volumes a
# node takes.
DRIVER = "csi.diff.policyd.io"
NO_PROVISIONER = "kubernetes.io/no-provisioner"

# What a volume case exercises (`Case.volume_kinds`), by what the pod under test uses.
STATIC = "static"  # an unbound claim of the static WaitForFirstConsumer class
DYNAMIC = "dynamic"  # a claim of the provisioned class
ZONE_KIND = "zone"  # a PV with a zone label or zone affinity, or zone allowedTopologies
LIMITS = "limits"  # a CSI volume, with CSINodes giving the driver a count
RWOP = "rwop"  # a ReadWriteOncePod claim (sometimes in use by a pod on a node)
BOUND = "bound"  # a claim the PV controller bound before the pod was created
UNBOUND_IMMEDIATE = "unbound-immediate"  # an Immediate claim no PV matches
# A PV of the claim's class whose node affinity uses matchFields (alone or beside a
# label expression), several ORed terms, or NotIn/Exists beside the pin (issue 33).
AFFINITY_SHAPES = "affinity-shapes"
RELEASED = "released"  # a Released or Failed PV that would otherwise suit the claim
PINNED = "volume-name"  # a claim naming its PV in spec.volumeName, bound or not
LOST = "lost"  # a claim whose PV is gone (phase Lost)
TERMINATING = "terminating"  # a claim being deleted (held by a finalizer)
INLINE = "inline-disk"  # an inline in-tree disk, also used by pods on nodes
EPHEMERAL_TAKEN = "ephemeral-taken"  # an ephemeral volume whose claim another made
VOLUME_KINDS = (STATIC, DYNAMIC, ZONE_KIND, LIMITS, RWOP, BOUND, UNBOUND_IMMEDIATE,
                AFFINITY_SHAPES, RELEASED, PINNED, LOST, TERMINATING, INLINE,
                EPHEMERAL_TAKEN)

# The phase the PV controller is to leave a PV or claim in before the pod under test
# is created, when it is neither Available/Bound (PVs) nor in `Case.bind_first`
# (claims): `differential.volumes.settle` waits for it.
SETTLES_TO = "diff.policyd.io/phase"
# The UID a Released PV's claimRef names: no claim ever has it (the claim of that name,
# if any, is another, so the PV controller releases the PV).
STALE_UID = "00000000-0000-4000-8000-00000000dead"

# Clean, roomy nodes and few constraints besides the volumes: a pod every node rejects
# for a taint never reaches the volume filters.
# No RestartAllContainers rules: a pod only 30% of the nodes can take would leave
# fewer of the volume kinds' outcomes to compare (NodeDeclaredFeatures has cases of its
# own in the scheduling mixes).
VOLUME_MIX = Mix("volumes", taints=0.05, roomy=True, spread=0.2, affinity=0.1,
                 existing_per_node=1, apps=2, same_namespace=0.5, restart_all_rule=0.0)

RWO, RWX, RWOP_MODE = "ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"
# No PV is ever this big: an Immediate claim asking for it stays unbound.
TOO_BIG = "50Gi"
# Immediate claims and their PVs are 1Gi plus a MiB per pair before them, each claim
# asking for exactly its PV's size: the PV controller, which gives a claim the smallest
# PV that fits, then gives every claim its own PV, whichever claim it binds first. (The
# PVs differ in node affinity: a case and its twin must get the same pairs.)
IMMEDIATE_MIB = 1024
# One case in this many has an Immediate claim no PV can take.
UNBOUND_IMMEDIATE_EVERY = 9


def gen_volume_case(seed: int, index: int, prefix: str, scheduler: str = SCHEDULER_NAME,
                    twin: tuple[str, str] | None = None) -> Case:
    """The volume case number `index` of the run with `seed`; names start with
    `prefix` (a DNS label); its pod is for `scheduler`. `twin` = (prefix, scheduler)
    adds the same case under that prefix for that scheduler as `Case.twin`."""
    rng = random.Random(f"{seed}/volume/{index}")
    scene = _Scene(rng, prefix)
    scene.classes()
    scene.csi_nodes()
    scene.existing_claim_users()
    claims = scene.claims_of_pod_under_test()
    # Each of these fails the pod in PreFilter, whatever else it has: drawn by index,
    # so that a run has them but not too many.
    failing = {UNBOUND_IMMEDIATE_EVERY - 1: scene.unbound_immediate_claim,
               3: scene.lost_claim, 5: scene.terminating_claim}.get(
        index % UNBOUND_IMMEDIATE_EVERY)
    if failing is not None:
        claims.insert(rng.randint(0, len(claims)), failing())
    scene.ephemeral_taken = index % UNBOUND_IMMEDIATE_EVERY == 7
    pod = gen_pod_dict(rng, "under-test", scene.namespace, scene.names, VOLUME_MIX)
    if rng.random() < 0.7:
        # Mostly no node selection but the case's: the volumes choose the nodes.
        pod["spec"].pop("nodeSelector", None)
        pod["spec"].get("affinity", {}).pop("nodeAffinity", None)
    pod = isolated(pod, prefix, scheduler)
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
               for i, c in enumerate(claims)]
    volumes += scene.other_volumes_of_pod_under_test(pod["metadata"]["name"])
    if volumes:
        pod["spec"]["volumes"] = volumes
    pod["metadata"]["labels"][UNDER_TEST_LABEL] = "true"
    kinds = sorted(scene.kinds_of(claims) | scene.pod_kinds, key=VOLUME_KINDS.index)
    return Case(seed, index, prefix, scene.namespaces, scene.nodes, scene.pods, pod,
                notes=["volumes", *kinds, f"claims {claims}"],
                storage=scene.objects, bind_first=scene.bind_first,
                volume_kinds=tuple(kinds),
                twin=gen_volume_case(seed, index, *twin) if twin is not None else None)


class _Scene:
    """One volume case being drawn: its objects so far and what each claim is."""

    def __init__(self, rng: random.Random, prefix: str) -> None:
        self.rng = rng
        self.prefix = prefix
        self.namespaces = {f"{prefix}-a": {CASE_LABEL: prefix, "team": "a"},
                           f"{prefix}-b": {CASE_LABEL: prefix, "team": "b"}}
        self.namespace = f"{prefix}-a"
        zones = [f"{prefix}-z{z}" for z in "abc"][: rng.randint(1, 3)]
        names = Names(zones=zones, racks=[f"{prefix}-R1", f"{prefix}-R2"],
                      namespaces=list(self.namespaces),
                      namespace_labels={CASE_LABEL: prefix})
        self.nodes = [gen_node(rng, f"{prefix}-n{i}", names, VOLUME_MIX,
                               labels={HOSTNAME: f"{prefix}-n{i}", CASE_LABEL: prefix})
                      for i in range(rng.randint(3, 8))]
        self.names = replace(names, nodes=[n["metadata"]["name"] for n in self.nodes])
        self.zones = zones
        self.pods: list[dict[str, Any]] = []
        # Creation order: CSINodes, classes, PVs, claims (`tests.integration.
        # differential.volumes` creates them kind by kind in this order).
        self.objects: list[dict[str, Any]] = []
        self.bind_first: list[str] = []
        # claim name -> the kinds using it adds to the case
        self.claim_kinds: dict[str, set[str]] = {}
        self.csi_limited = False
        # what the pod under test's volumes other than claims exercise
        self.pod_kinds: set[str] = set()
        self.ephemeral_taken = False
        # inline disks of pods on nodes: (source kind, disk name)
        self.disks: list[tuple[str, str]] = []
        self._pvs = 0
        self._claims = 0

    # -- objects ------------------------------------------------------------------------

    def _meta(self, name: str, namespaced: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {CASE_LABEL: self.prefix}}
        if namespaced:
            meta["namespace"] = self.namespace
        return meta

    def _node_zone(self, node: dict[str, Any]) -> str | None:
        zone = node["metadata"]["labels"].get(ZONE)
        return str(zone) if zone is not None else None

    def classes(self) -> None:
        p = self.prefix
        dyn: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": self._meta(f"{p}-dyn"), "provisioner": DRIVER,
            "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"}
        self.dyn_topology = self.rng.random() < 0.4
        if self.dyn_topology:
            if self.rng.random() < 0.6:
                key, values = ZONE, self.rng.sample(self.zones,
                                                    self.rng.randint(1, len(self.zones)))
            else:
                key, values = HOSTNAME, self.rng.sample(
                    list(self.names.nodes), self.rng.randint(1, len(self.names.nodes)))
            dyn["allowedTopologies"] = [{"matchLabelExpressions": [
                {"key": key, "values": sorted(values)}]}]
            self.dyn_zone = key == ZONE
        else:
            self.dyn_zone = False
        self.objects += [
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": self._meta(f"{p}-local"), "provisioner": NO_PROVISIONER,
             "volumeBindingMode": "WaitForFirstConsumer"},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": self._meta(f"{p}-imm"), "provisioner": NO_PROVISIONER,
             "volumeBindingMode": "Immediate"},
            dyn]

    def csi_nodes(self) -> None:
        """CSINodes for some of the nodes, most giving DRIVER a small count."""
        if self.rng.random() < 0.45:
            return
        for node in self.nodes:
            name = node["metadata"]["name"]
            r = self.rng.random()
            if r < 0.15:
                continue  # no CSINode: no limit on this node
            drivers: list[dict[str, Any]] = []
            if r < 0.25:
                drivers = []  # a CSINode without the driver: no limit either
            else:
                driver: dict[str, Any] = {"name": DRIVER, "nodeID": name}
                if r < 0.9:
                    driver["allocatable"] = {"count": self.rng.choice([0, 1, 1, 2, 2, 3])}
                    self.csi_limited = True
                drivers = [driver]
            self.objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                 "metadata": self._meta(name), "spec": {"drivers": drivers}})

    def _source(self, csi: bool) -> dict[str, Any]:
        handle = f"{self.prefix}-h{self._pvs}"
        if csi:
            return {"csi": {"driver": DRIVER, "volumeHandle": handle}}
        return {"local": {"path": f"/mnt/disks/{handle}"}}

    def _pv(self, storage_class: str, size: str, modes: list[str], *, csi: bool,
            affinity: tuple[str, str] | None, zone_label: str | None = None,
            claim: str | None = None, kinds: set[str] | None = None,
            claim_uid: str | None = None, reclaim: str = "Retain") -> dict[str, Any]:
        """A PV of `storage_class`; what its affinity exercises goes into `kinds`."""
        kinds = set() if kinds is None else kinds
        meta = self._meta(f"{self.prefix}-pv{self._pvs}")
        if zone_label is not None:
            meta["labels"][ZONE] = zone_label
        spec: dict[str, Any] = {
            "capacity": {"storage": size}, "accessModes": modes,
            "storageClassName": storage_class, "persistentVolumeReclaimPolicy": reclaim,
            **self._source(csi)}
        if affinity is not None:
            terms = self._terms(*affinity)
            if len(terms) > 1 or set(terms[0]) != {"matchExpressions"} \
                    or len(terms[0]["matchExpressions"]) > 1:
                kinds.add(AFFINITY_SHAPES)
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
        if claim is not None:
            spec["claimRef"] = {"namespace": self.namespace, "name": claim}
            if claim_uid is not None:
                spec["claimRef"]["uid"] = claim_uid
        self._pvs += 1
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}
        self.objects.append(pv)
        return pv

    def _terms(self, key: str, value: str) -> list[dict[str, Any]]:
        """A PV's node selector terms pinning it to `key`=`value`: mostly that one
        requirement; else a shape CheckNodeAffinity reads differently from a pod's node
        affinity (matchFields are skipped: the Node it builds has labels only) or one
        of its neighbours (several ORed terms, NotIn and Exists beside the pin)."""
        rng = self.rng
        pin = {"key": key, "operator": "In", "values": [value]}
        other = rng.choice(self.names.nodes)
        by_name = {"key": "metadata.name", "operator": rng.choice(["In", "In", "NotIn"]),
                   "values": [rng.choice([other, value if key == HOSTNAME else other])]}
        r = rng.random()
        if r < 0.65:
            return [{"matchExpressions": [pin]}]
        shape = rng.choice(["fields", "fields-beside", "terms", "fields-term", "beside"])
        if shape == "fields" and key == HOSTNAME:
            return [{"matchFields": [by_name]}]  # admits every node
        if shape in ("fields", "fields-beside"):
            return [{"matchExpressions": [pin], "matchFields": [by_name]}]
        if shape == "terms":
            return [{"matchExpressions": [pin]},
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In",
                                           "values": [other]}]}]
        if shape == "fields-term":
            return [{"matchFields": [by_name]}, {"matchExpressions": [pin]}]
        beside = rng.choice([{"key": HOSTNAME, "operator": "NotIn", "values": [other]},
                             {"key": ZONE, "operator": "Exists"}])
        return [{"matchExpressions": [pin, beside]}]

    def _claim(self, storage_class: str, size: str, modes: list[str], kinds: set[str],
               name: str | None = None) -> dict[str, Any]:
        """A claim (named c<n> unless `name` says), added to the objects."""
        if name is None:
            name = f"c{self._claims}"
            self._claims += 1
        claim: dict[str, Any] = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": self._meta(name, namespaced=True),
            "spec": {"accessModes": modes, "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}
        self.objects.append(claim)
        self.claim_kinds[name] = set(kinds)
        return claim

    def _affinity(self) -> tuple[tuple[str, str] | None, str | None]:
        """A PV's node affinity (hostname or zone) and zone label, and whether either
        involves a zone."""
        node = self.rng.choice(self.nodes)
        zone = self._node_zone(node) or self.rng.choice(self.zones)
        r = self.rng.random()
        if r < 0.55:
            return (HOSTNAME, node["metadata"]["name"]), None
        if r < 0.8:
            return (ZONE, zone), zone
        return None, zone  # no affinity; VolumeZone reads the label

    def bound_claim(self, modes: list[str]) -> str:
        """An Immediate claim with a PV of its own, which the PV controller binds."""
        csi = self.rng.random() < 0.6
        affinity, zone = self._affinity()
        if affinity is None and not csi:
            affinity = (HOSTNAME, self.rng.choice(self.names.nodes))  # local needs one
        kinds = {BOUND}
        if zone is not None or (affinity is not None and affinity[0] == ZONE):
            kinds.add(ZONE_KIND)
        if csi:
            kinds.add("csi")
        if RWOP_MODE in modes:
            kinds.add(RWOP)
        size = f"{IMMEDIATE_MIB + len(self.bind_first)}Mi"
        name = str(self._claim(f"{self.prefix}-imm", size, modes, kinds)["metadata"]["name"])
        prebound = self.rng.random() < 0.4
        self._pv(f"{self.prefix}-imm", size, modes, csi=csi, affinity=affinity,
                 zone_label=zone if (zone and self.rng.random() < 0.7) else None,
                 claim=name if prebound else None, kinds=self.claim_kinds[name])
        self.bind_first.append(f"{self.namespace}/{name}")
        return name

    def existing_claim_users(self) -> None:
        """Pods already on nodes, some using bound claims (CSI volumes count against
        the node's limit; a ReadWriteOncePod claim in use blocks other users)."""
        self.shared_rwop: str | None = None
        for i in range(self.rng.randint(0, len(self.nodes))):
            pod = gen_pod_dict(self.rng, f"p{i}", self.namespace, self.names, VOLUME_MIX,
                               bound_to=self.rng.choice(self.names.nodes))
            # A claim user still running: finished and terminating pods are the
            # plain cases' business.
            pod["status"].pop("phase", None)
            pod["metadata"].pop("deletionTimestamp", None)
            if self.rng.random() < 0.6:
                modes = [RWOP_MODE] if self.rng.random() < 0.35 else [RWO]
                claim = self.bound_claim(modes)
                if modes == [RWOP_MODE] and self.shared_rwop is None:
                    self.shared_rwop = claim
                pod["spec"]["volumes"] = [{"name": "data",
                                           "persistentVolumeClaim": {"claimName": claim}}]
            if self.rng.random() < 0.3:
                pod["spec"].setdefault("volumes", []).append(
                    {"name": "disk", **self.inline_disk(reuse=0.5)})
            self.pods.append(pod)

    def claims_of_pod_under_test(self) -> list[str]:
        rng = self.rng
        claims: list[str] = []
        for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3])):
            r = rng.random()
            if r < 0.28:
                claims.append(self.static_claim())
            elif r < 0.48:
                claims.append(self.dynamic_claim())
            elif r < 0.7:
                claims.append(self.bound_claim(
                    [rng.choice([RWO, RWO, RWOP_MODE])]))
            elif r < 0.86:
                claims.append(self.pinned_claim())
            elif r < 0.93 and self.shared_rwop is not None and self.shared_rwop not in claims:
                claims.append(self.shared_rwop)
        return claims

    def unbound_immediate_claim(self) -> str:
        return str(self._claim(f"{self.prefix}-imm", TOO_BIG, [RWO],
                               {UNBOUND_IMMEDIATE})["metadata"]["name"])

    def static_claim(self) -> str:
        """A WaitForFirstConsumer claim and zero to three local PVs of its class on
        some nodes (any of them may suit it, or another claim of the pod); now and
        then a PV pre-bound to it, which the PV controller binds at once."""
        rng = self.rng
        modes = rng.choice([[RWO], [RWO], [RWX], [RWOP_MODE]])
        size = rng.choice(["1Gi", "2Gi", "3Gi"])
        kinds = {STATIC}
        if RWOP_MODE in modes:
            kinds.add(RWOP)
        prebind = rng.random() < 0.12
        if prebind:
            # A PV pre-bound to the claim, and able to take it: the PV controller binds
            # the two at once (before the pod exists), whatever the binding mode.
            kinds = {BOUND} | (kinds - {STATIC})
        name = str(self._claim(f"{self.prefix}-local", size, modes,
                               kinds)["metadata"]["name"])
        for i in range(int(prebind) + rng.randint(0, 3)):
            affinity, zone = self._affinity()
            if affinity is None:
                affinity = (HOSTNAME, rng.choice(self.names.nodes))
            if affinity[0] == ZONE:
                kinds.add(ZONE_KIND)
            csi = rng.random() < 0.3
            if csi:
                kinds.add("csi")
            first = prebind and i == 0
            pv_modes = modes if first else rng.choice(
                [[RWO], [RWO, RWX], [RWX], [RWOP_MODE], modes])
            self._pv(f"{self.prefix}-local", "5Gi" if first else rng.choice(
                ["1Gi", "2Gi", "5Gi"]), pv_modes, csi=csi, affinity=affinity,
                zone_label=zone, claim=name if first else None, kinds=kinds)
        if rng.random() < 0.45:
            self.released_pv(name, modes)
            kinds.add(RELEASED)
        if prebind:
            self.bind_first.append(f"{self.namespace}/{name}")
        self.claim_kinds[name] = kinds
        return name

    def released_pv(self, claim: str, modes: list[str]) -> None:
        """A local PV that would suit `claim` but for having been bound to an earlier
        claim of that name (its claimRef's UID is no claim's): the PV controller
        releases it, and with reclaim policy Delete, which no in-tree plugin can do
        for a local volume, fails it."""
        failed = self.rng.random() < 0.5
        pv = self._pv(f"{self.prefix}-local", "5Gi", modes, csi=False,
                      affinity=(HOSTNAME, self.rng.choice(self.names.nodes)), claim=claim,
                      claim_uid=STALE_UID, reclaim="Delete" if failed else "Retain")
        pv["metadata"]["labels"][SETTLES_TO] = "Failed" if failed else "Released"

    def pinned_claim(self) -> str:
        """A WaitForFirstConsumer claim naming its PV in spec.volumeName: a local PV
        that suits it (the PV controller binds the two at once, whatever the binding
        mode), one too small for it, or none (both stay Pending, and a scheduler takes
        such a claim as an unbound immediate one)."""
        rng = self.rng
        size = rng.choice(["1Gi", "2Gi"])
        which = rng.choice(["suits", "suits", "small", "missing"])
        kinds = {PINNED, BOUND} if which == "suits" else {PINNED}
        claim = self._claim(f"{self.prefix}-local", size, [RWO], kinds)
        name = str(claim["metadata"]["name"])
        if which == "missing":
            claim["spec"]["volumeName"] = f"{self.prefix}-gone-{name}"
            return name
        pv = self._pv(f"{self.prefix}-local", "3Gi" if which == "suits" else "512Mi", [RWO],
                      csi=False, affinity=(HOSTNAME, rng.choice(self.names.nodes)),
                      kinds=self.claim_kinds[name])
        claim["spec"]["volumeName"] = pv["metadata"]["name"]
        if which == "suits":
            self.bind_first.append(f"{self.namespace}/{name}")
        return name

    def lost_claim(self) -> str:
        """A claim bound (bind-completed) to a PV that does not exist: the PV controller
        marks it Lost."""
        claim = self._claim(f"{self.prefix}-local", "1Gi", [RWO], {LOST})
        name = str(claim["metadata"]["name"])
        claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        claim["metadata"]["labels"][SETTLES_TO] = "Lost"
        claim["spec"]["volumeName"] = f"{self.prefix}-gone-{name}"
        return name

    def terminating_claim(self) -> str:
        """A claim being deleted: HOLD_FINALIZER keeps it (`differential.volumes`
        deletes it once created, and releases it at clean-up)."""
        claim = self._claim(f"{self.prefix}-local", "1Gi", [RWO], {TERMINATING})
        claim["metadata"]["finalizers"] = [HOLD_FINALIZER]
        claim["metadata"]["labels"][SETTLES_TO] = "Terminating"
        return str(claim["metadata"]["name"])

    def inline_disk(self, reuse: float) -> dict[str, Any]:
        """An inline in-tree disk volume source (GCE PD or AWS EBS), one of those pods
        on nodes use already with probability `reuse`."""
        rng = self.rng
        if self.disks and rng.random() < reuse:
            source, disk = rng.choice(self.disks)
        else:
            source = rng.choice(["gcePersistentDisk", "awsElasticBlockStore"])
            disk = f"{self.prefix}-disk{len(self.disks)}"
            self.disks.append((source, disk))
        key = "pdName" if source == "gcePersistentDisk" else "volumeID"
        return {source: {key: disk, "fsType": "ext4", "readOnly": rng.random() < 0.4}}

    def other_volumes_of_pod_under_test(self, pod_name: str) -> list[dict[str, Any]]:
        """Volumes of the pod under test besides its claims: an inline disk now and
        then; for some indices (`gen_volume_case`) an ephemeral volume whose claim
        name a claim not made for the pod has taken."""
        out: list[dict[str, Any]] = []
        if self.rng.random() < 0.25:
            out.append({"name": "disk", **self.inline_disk(reuse=0.7)})
            self.pod_kinds.add(INLINE)
        if self.ephemeral_taken:
            self._claim(f"{self.prefix}-local", "1Gi", [RWO], {EPHEMERAL_TAKEN},
                        name=f"{pod_name}-scratch")
            out.append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": [RWO], "storageClassName": f"{self.prefix}-local",
                "resources": {"requests": {"storage": "1Gi"}}}}}})
            self.pod_kinds.add(EPHEMERAL_TAKEN)
        return out

    def dynamic_claim(self) -> str:
        kinds = {DYNAMIC, "csi"}
        if self.dyn_zone:
            kinds.add(ZONE_KIND)
        return str(self._claim(f"{self.prefix}-dyn", self.rng.choice(["1Gi", "4Gi"]),
                               [RWO], kinds)["metadata"]["name"])

    def kinds_of(self, claims: list[str]) -> set[str]:
        kinds: set[str] = set()
        for claim in claims:
            kinds |= self.claim_kinds[claim]
        if "csi" in kinds and self.csi_limited:
            kinds.add(LIMITS)
        kinds.discard("csi")
        return kinds
