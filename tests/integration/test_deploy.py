"""deploy/ and the Dockerfile, proven against a real API server with RBAC on.

Static checks keep the manifests in step with the code: the generated ConfigMap and
single-file bundle match their sources (`hack/render-deploy.py`), the bundle is the
kustomize base, the Deployment's command is the Dockerfile's ENTRYPOINT and its flags
are ones `policyd run --help` lists, the image pins every runtime dependency.

Cluster checks run on a control plane of their own, started with an audit log of the
ServiceAccount's requests (the session's shared one has none) and owning the
cluster-scoped names policyd installs (Namespace policyd-system, ClusterRole policyd)
so no other test sees them:

- `kubectl apply --server-side` of deploy/policyd.yaml and of `-k deploy/`;
- `kubectl auth can-i`, impersonating the ServiceAccount and with its own token;
- two `policyd run` replicas, started with the Deployment's exact command and flags,
  in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT, the token from TokenRequest,
  the CA) and the ConfigMap's data laid out as the kubelet mounts it. They elect a
  leader, place the example workload on the hw-encrypt node, place a pod with two
  claims there (VolumeBinding writes a PV's claimRef and a claim's selected node; the
  control plane's PV controller binds both; the test provisions the second volume, as
  an external provisioner would), explain an unschedulable
  pod, reload a changed policy, and serve /metrics over HTTPS only to a token bound to
  ClusterRole policyd-metrics-reader (TokenReview and SubjectAccessReview through
  `system:auth-delegator`); the audit log then shows no refused request and every
  granted permission in use.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.devcluster import ControlPlane
from policyd.devcluster.ports import free_ports
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from tests.builders import make_node
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
HELPERS = Path(__file__).resolve().parent / "deploy"
NAMESPACE = "policyd-system"
SA = "policyd"
SA_USER = f"system:serviceaccount:{NAMESPACE}:{SA}"
MOUNT = "/etc/policyd"  # the Deployment's mountPath of the ConfigMap
HW_LABEL = "node.kubernetes.io/hw-encrypt"
HW_ANNOTATION = "myorg.io/require-hw-encrypt"

Obj = dict[str, Any]


# -- reading the files ----------------------------------------------------------------

def _render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_deploy", REPO / "hack" /
                                                  "render-deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docs(text: str) -> list[Obj]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def _by_key(objs: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for o in objs}


def bundle() -> dict[tuple[str, str, str], Obj]:
    return _by_key(_docs((DEPLOY / "policyd.yaml").read_text()))


def deployment() -> Obj:
    return bundle()[("Deployment", NAMESPACE, "policyd")]


def container() -> Obj:
    containers = deployment()["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def configmap() -> Obj:
    return bundle()[("ConfigMap", NAMESPACE, "policyd-config")]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines()
                                          if not line.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            instr, _, args = line.strip().partition(" ")
            out.append((instr.upper(), args.strip()))
    return out


def kubectl_binary() -> Path:
    from policyd.devcluster.build import resolve_binaries

    # The dev control plane builds kubectl with the rest: without it the deploy checks
    # did not run, a failure to see, not a skip to miss (as test_crd.py's kubectl).
    kubectl = resolve_binaries().kubectl
    assert kubectl is not None, "no kubectl binary (TEST_ASSET_KUBECTL / KUBEBUILDER_ASSETS)"
    return kubectl


def write_kubelet_volume(target: Path, data: dict[str, str]) -> None:
    """A ConfigMap's data laid out as the kubelet's atomic writer does: the files in a
    hidden timestamped directory, `..data` pointing at it, and one symlink per key.
    Called again, it swaps `..data` to a new directory (how a change reaches a pod)."""
    target.mkdir(parents=True, exist_ok=True)
    stamp = target / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{uuid.uuid4().hex[:6]}"
    stamp.mkdir()
    for key, value in data.items():
        (stamp / key).write_text(value)
    tmp_link = target / "..data_tmp"
    tmp_link.symlink_to(stamp.name)
    old = os.readlink(target / "..data") if (target / "..data").is_symlink() else None
    os.replace(tmp_link, target / "..data")
    for key in data:
        link = target / key
        if not link.is_symlink():
            link.symlink_to(f"..data/{key}")
    if old is not None:
        shutil.rmtree(target / old)


# -- static: generated files, manifests, Dockerfile -------------------------------------

def test_generated_files_match_their_sources() -> None:
    render = _render_module()
    assert render.stale(REPO) == [], (
        "deploy/ is out of date with policies/ or deploy/config/profile.yaml: run "
        "`python hack/render-deploy.py`")


def test_configmap_holds_the_profile_and_every_policy(tmp_path: Path) -> None:
    data = configmap()["data"]
    policies = {p.name: p.read_text() for p in sorted((REPO / "policies").glob("*.yaml"))}
    assert data == {"profile.yaml": (DEPLOY / "config" / "profile.yaml").read_text(),
                    **policies}
    # As the pod sees it: the profile loads every policy beside it and nothing else.
    write_kubelet_volume(tmp_path / "etc-policyd", data)
    result = subprocess.run(
        [sys.executable, "-m", "policyd", "check-config", "--format", "json",
         str(tmp_path / "etc-policyd" / "profile.yaml")],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    from policyd.daemon.loaded_profile import load

    loaded = load(tmp_path / "etc-policyd" / "profile.yaml")
    assert list(loaded.frameworks) == ["policyd"]
    assert loaded.settings.lease_namespace == NAMESPACE
    assert loaded.settings.lease_name == "policyd"
    assert loaded.settings.leader_elect


def test_bundle_is_the_kustomize_base() -> None:
    kubectl = kubectl_binary()
    built = subprocess.run([str(kubectl), "kustomize", str(DEPLOY)], capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert _by_key(_docs(built)) == bundle()
    assert sorted(k[0] for k in bundle()) == sorted([
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service",
        # Secure serving: the auth-delegator binding, the scrapers' ClusterRole.
        "ClusterRoleBinding", "ClusterRole",
        # SchedulingPolicy objects (deploy/crd.yaml, generated from the policy schema).
        "CustomResourceDefinition",
        # policyd-explain, for people (deploy/explain-clusterrole.yaml), bound to no one.
        "ClusterRole"])
    assert all(ns in ("", NAMESPACE) for _, ns, _ in bundle())


def test_deployment_flags_are_accepted_by_policyd_run(tmp_path: Path) -> None:
    c = container()
    assert c["command"] == ["policyd", "run"]
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    policyd = Path(sys.executable).parent / "policyd"
    help_text = subprocess.run([str(policyd), "run", "--help"], capture_output=True,
                               text=True, env=env, timeout=60, check=True).stdout
    listed = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))
    flags = {a.split("=", 1)[0] for a in c["args"] if a.startswith("--")}
    assert flags, c["args"]
    assert flags <= listed, f"not in `policyd run --help`: {sorted(flags - listed)}"
    # And click parses them as given (values included), with the config file present.
    import typer

    from policyd.cli import run_cmd

    profile = tmp_path / "profile.yaml"
    profile.write_text("{}\n")
    args = [a.replace(f"{MOUNT}/profile.yaml", str(profile)) for a in c["args"]]
    single = typer.Typer()
    single.command("run")(run_cmd.run)
    command: Any = typer.main.get_command(single)  # one command: the command itself
    ctx = command.make_context("run", list(args))
    assert ctx.params["config"] == profile
    assert ctx.params["log_format"] == "json"


def test_dockerfile_runs_the_deployment_command() -> None:
    instructions = dockerfile_instructions()
    froms = [a for i, a in instructions if i == "FROM"]
    assert len(froms) == 2, "multi-stage: a build stage and a runtime stage"
    arg = next(a for i, a in instructions if i == "ARG" and a.startswith("PYTHON_IMAGE="))
    image = arg.split("=", 1)[1]
    m = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image)
    assert m, f"base image must be a slim Python with a full version: {image}"
    # The image's Python is the one the tests run on: deploy/requirements.txt pins what
    # was installed (and resolved, markers included) for this interpreter.
    assert (int(m[1]), int(m[2])) == sys.version_info[:2], (
        f"Dockerfile's {image} vs the tests' Python {sys.version_info[:2]}: update the "
        "image and `python hack/render-deploy.py --pin`")
    entrypoint = json.loads(next(a for i, a in instructions if i == "ENTRYPOINT"))
    assert entrypoint == container()["command"]
    cmd = json.loads(next(a for i, a in instructions if i == "CMD"))
    config_arg = next(a for a in container()["args"] if a.startswith("--config="))
    assert cmd == [config_arg]
    # The final stage runs as the Deployment's non-root user.
    user = [a for i, a in instructions if i == "USER"][-1]
    pod_sc = deployment()["spec"]["template"]["spec"]["securityContext"]
    assert user == f"{pod_sc['runAsUser']}:{pod_sc['runAsGroup']}"
    # Only the build stage installs anything; the runtime stage copies the venv.
    final = instructions[max(n for n, (i, _) in enumerate(instructions) if i == "FROM"):]
    assert not any("pip install" in a for _, a in final)
    # It exposes exactly the secure ports the Deployments serve on (the scheduler's
    # and the webhook's), nothing it does not serve.
    exposed = {int(p) for i, a in instructions if i == "EXPOSE" for p in a.split()}
    served = {int(a.split("=", 1)[1]) for a in [*container()["args"],
                                                *_webhook_container()["args"]]
              if a.startswith("--secure-port=")}
    assert exposed == served == {10259, 9443}, (exposed, served)
    # Every COPY source exists and is inside the build context .dockerignore leaves.
    allowed = [line[1:].rstrip("/") for line in (REPO / ".dockerignore").read_text()
               .splitlines() if line.startswith("!")]
    for instr, a in instructions:
        if instr != "COPY" or a.startswith("--from"):
            continue
        *sources, _dest = a.split()
        for src in sources:
            assert (REPO / src).exists(), src
            assert any(src == p or src.startswith(p + "/") for p in allowed), src


def _webhook_container() -> Obj:
    doc = YAML(typ="safe").load((DEPLOY / "webhook" / "deployment.yaml").read_text())
    [c] = doc["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_image_installs_only_wheels_whose_hashes_are_pinned() -> None:
    """Each pip install of the image reads a requirements file with --require-hashes,
    and every pin there names at least one wheel's sha256 (hack/render-deploy.py --pin
    asks PyPI for them)."""
    render = _render_module()
    installs = [a for i, a in dockerfile_instructions() if i == "RUN"
                for a in a.split("&&") if "pip install" in a and " -r " in a]
    assert len(installs) == 2, installs
    for install in installs:
        assert "--require-hashes" in install and "--only-binary=:all:" in install, install
        name = install.split(" -r ")[1].split()[0].rsplit("/", 1)[1]
        pins = render.read_pins((DEPLOY / name).read_text())
        assert pins, name
        for dist, (version, hashes) in pins.items():
            assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), (
                f"{name}: {dist}=={version} has no sha256")
    # policyd itself is the only thing installed without a hash: it is built here.
    other = [a for i, a in dockerfile_instructions() if i == "RUN"
             for a in a.split("&&") if "pip install" in a and " -r " not in a]
    assert [a.split()[-1] for a in other] == ["."], other


def test_image_pins_every_runtime_dependency() -> None:
    from importlib import metadata

    from packaging.requirements import Requirement

    render = _render_module()
    hashed = render.read_pins((DEPLOY / "requirements.txt").read_text())
    pins = {name: version for name, (version, _) in hashed.items()}
    roots = render.runtime_roots()
    needed = set(render.runtime_closure(roots)) - {"policyd"}
    assert needed <= set(pins), f"unpinned: {sorted(needed - set(pins))}"
    for r in metadata.requires("policyd") or []:
        req = Requirement(r)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        assert req.specifier.contains(pins[_norm(req.name)], prereleases=True), (
            f"{pins[_norm(req.name)]} does not satisfy pyproject.toml's {r}")


def test_deployment_is_hardened_and_wired() -> None:
    d = deployment()
    spec = d["spec"]
    pod = spec["template"]["spec"]
    c = container()
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == SA
    assert pod.get("schedulerName") is None  # placed by the default scheduler
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    # Secure serving only: the probes on the HTTPS port, no plain HTTP anywhere.
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["https"]
    assert f"--secure-port={port}" in c["args"] and port == 10259
    assert not any(a.startswith("--metrics-bind-address") for a in c["args"])
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https",
                                             "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https",
                                              "scheme": "HTTPS"}
    shutdown = next(a for a in c["args"] if a.startswith("--shutdown-grace-period="))
    assert pod["terminationGracePeriodSeconds"] > float(shutdown.split("=")[1])
    # The ConfigMap is mounted whole (no subPath: updates must reach the pod).
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == MOUNT)
    assert "subPath" not in mount and mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == configmap()["metadata"]["name"]
    labels = spec["template"]["metadata"]["labels"]
    objs = bundle()
    svc = objs[("Service", NAMESPACE, "policyd-metrics")]["spec"]
    assert svc["selector"].items() <= labels.items()
    assert svc["ports"][0]["targetPort"] == "https"
    # The auth-delegator binding of policyd's ServiceAccount, and a role for scrapers.
    delegator = objs[("ClusterRoleBinding", "", "policyd:auth-delegator")]
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert delegator["subjects"] == [{"kind": "ServiceAccount", "name": SA,
                                      "namespace": NAMESPACE}]
    reader = objs[("ClusterRole", "", "policyd-metrics-reader")]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    pdb = objs[("PodDisruptionBudget", NAMESPACE, "policyd")]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["minAvailable"] == 1 < spec["replicas"]
    # The image tag is the package's version.
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert c["image"].endswith(f":{version}")


def test_example_workload_uses_policyd_and_hw_encrypt() -> None:
    (workload,) = _docs((DEPLOY / "examples" / "hw-encrypt-workload.yaml").read_text())
    template = workload["spec"]["template"]
    assert template["spec"]["schedulerName"] == "policyd"
    assert template["metadata"]["annotations"][HW_ANNOTATION] == "true"
    profile = YAML(typ="safe").load(configmap()["data"]["profile.yaml"])
    assert [p["schedulerName"] for p in profile["profiles"]] == ["policyd"]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- the cluster ----------------------------------------------------------------------

AUDIT_POLICY = f"""\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["{SA_USER}"]
  - level: None
"""


class Kube:
    """The test's handles on its control plane: kubectl as admin, raw calls as admin."""

    def __init__(self, cp: ControlPlane, kubectl: Path, audit_log: Path) -> None:
        self.cp = cp
        self.kubectl_path = kubectl
        self.audit_log = audit_log
        self.admin = KubeClient.connect(ConnectionSettings(
            kubeconfig=str(cp.kubeconfig_path), qps=-1))

    def kubectl(self, *args: str, kubeconfig: Path | None = None, check: bool = True,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.kubectl_path), f"--kubeconfig={kubeconfig or self.cp.kubeconfig_path}",
             *args], input=stdin, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def get(self, path: str) -> Obj | None:
        try:
            return self.admin.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    kubectl = kubectl_binary()
    d = tmp_path_factory.mktemp("deploy-cp")
    (d / "audit-policy.yaml").write_text(AUDIT_POLICY)
    cp = ControlPlane(extra_apiserver_args=[
        f"--audit-policy-file={d / 'audit-policy.yaml'}",
        f"--audit-log-path={d / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
    ])
    cp.start()
    k = Kube(cp, kubectl, d / "audit.log")
    try:
        yield k
    finally:
        k.admin.close()
        cp.stop()


@pytest.fixture(scope="module")
def installed(kube: Kube) -> Kube:
    """deploy/ applied server-side, both ways (same field manager: no conflicts)."""
    for how in (["-f", str(DEPLOY / "policyd.yaml")], ["-k", str(DEPLOY)]):
        result = kube.kubectl("apply", "--server-side", *how)
        # PodSecurity `warn: restricted` on the namespace checks the Deployment's template
        # and would print a warning here.
        assert "Warning" not in result.stderr, result.stderr
    return kube


def test_apply_server_side_creates_every_object(installed: Kube) -> None:
    for kind, ns, name in bundle():
        args = ["get", kind.lower(), name, "-o", "json", "--show-managed-fields"] + (
            ["-n", ns] if ns else [])
        obj = json.loads(installed.kubectl(*args).stdout)
        assert any(f["operation"] == "Apply" for f in obj["metadata"]["managedFields"])
    # Nothing left to change: the kustomize base and the bundle are the same state.
    diff = installed.kubectl("diff", "--server-side", "-k", str(DEPLOY), check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    # The example workload is accepted too.
    installed.kubectl("apply", "--server-side", "-f",
                      str(DEPLOY / "examples" / "hw-encrypt-workload.yaml"))


def test_pod_template_passes_restricted_pod_security(installed: Kube) -> None:
    """The namespace enforces the restricted Pod Security Standard: a pod made from the
    Deployment's template is admitted (server-side dry run, nothing is created)."""
    template = deployment()["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "policyd-dry-run", "namespace": NAMESPACE,
                        "labels": template["metadata"]["labels"]},
           "spec": template["spec"]}
    result = installed.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-",
                               stdin=json.dumps(pod))
    assert "Warning" not in result.stderr, result.stderr
    # And a privileged one is not: the label really enforces.
    bad = json.loads(json.dumps(pod))
    bad["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    refused = installed.kubectl("create", "--dry-run=server", "-f", "-",
                                stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0 and "PodSecurity" in refused.stderr


def _token(kube: Kube, seconds: int = 3600) -> str:
    return kube.kubectl("create", "token", SA, "-n", NAMESPACE,
                        f"--duration={seconds}s").stdout.strip()


# (verb, resource, extra kubectl args): what the daemon needs...
CAN = [
    ("list", "pods", ["-A"]),
    ("watch", "pods", ["-A"]),
    ("get", "pods", ["-n", "default"]),
    ("list", "nodes", []),
    ("watch", "nodes", []),
    ("list", "namespaces", []),
    ("watch", "namespaces", []),
    ("list", "services", ["-A"]),
    ("watch", "replicationcontrollers", ["-A"]),
    ("list", "replicasets.apps", ["-A"]),
    ("watch", "statefulsets.apps", ["-A"]),
    ("list", "persistentvolumes", []),
    ("watch", "persistentvolumes", []),
    ("list", "persistentvolumeclaims", ["-A"]),
    ("watch", "persistentvolumeclaims", ["-A"]),
    ("list", "storageclasses.storage.k8s.io", []),
    ("watch", "csinodes.storage.k8s.io", []),
    ("list", "csidrivers.storage.k8s.io", []),
    ("watch", "csistoragecapacities.storage.k8s.io", ["-A"]),
    ("list", "volumeattachments.storage.k8s.io", []),
    ("watch", "volumeattachments.storage.k8s.io", []),
    # Preemption: what it reads, and its victims deleted.
    ("list", "poddisruptionbudgets.policy", ["-A"]),
    ("watch", "poddisruptionbudgets.policy", ["-A"]),
    ("list", "priorityclasses.scheduling.k8s.io", []),
    ("watch", "priorityclasses.scheduling.k8s.io", []),
    ("delete", "pods", ["-n", "default"]),
    # DRA, as kube-scheduler's role grants it: the three kinds read, claims written.
    ("list", "deviceclasses.resource.k8s.io", []),
    ("watch", "resourceslices.resource.k8s.io", []),
    ("get", "resourceclaims.resource.k8s.io", ["-n", "default"]),
    ("watch", "resourceclaims.resource.k8s.io", ["-A"]),
    ("update", "resourceclaims.resource.k8s.io", ["--subresource=status", "-n", "default"]),
    ("patch", "resourceclaims.resource.k8s.io", ["--subresource=binding", "-n", "default"]),
    ("create", "resourceclaims.resource.k8s.io", ["-n", "default"]),
    ("update", "pods", ["--subresource=finalizers", "-n", "default"]),
    # Cluster policies: the SchedulingPolicy objects read, their status written.
    ("get", "schedulingpolicies.policyd.io", []),
    ("list", "schedulingpolicies.policyd.io", []),
    ("watch", "schedulingpolicies.policyd.io", []),
    ("update", "schedulingpolicies.policyd.io", ["--subresource=status"]),
    # VolumeBinding's PreBind: a PV's claimRef, a claim's selected-node annotation.
    ("update", "persistentvolumes", []),
    ("update", "persistentvolumeclaims", ["-n", "default"]),
    ("create", "pods", ["--subresource=binding", "-n", "default"]),
    ("patch", "pods", ["--subresource=status", "-n", "default"]),
    ("create", "events", ["-n", "default"]),
    ("create", "events", ["-n", NAMESPACE]),
    ("create", "leases.coordination.k8s.io", ["-n", NAMESPACE]),
    ("get", "leases.coordination.k8s.io/policyd", ["-n", NAMESPACE]),
    ("update", "leases.coordination.k8s.io/policyd", ["-n", NAMESPACE]),
    ("get", "configmaps/policyd-config", ["-n", NAMESPACE]),
    # Secure serving: who presents a token, and may they read this path?
    ("create", "tokenreviews.authentication.k8s.io", []),
    ("create", "subjectaccessreviews.authorization.k8s.io", []),
]
# ...and what it must never do.
CANNOT = [
    ("get", "secrets", ["-n", NAMESPACE]),
    ("list", "secrets", ["-A"]),
    ("watch", "secrets", ["-n", "default"]),
    ("create", "pods", ["-n", "default"]),
    ("update", "pods", ["-n", "default"]),
    ("patch", "pods", ["-n", "default"]),
    ("patch", "nodes", []),
    ("update", "nodes", []),
    ("delete", "nodes", []),
    ("patch", "nodes", ["--subresource=status"]),
    ("get", "nodes", ["--subresource=proxy"]),
    ("get", "configmaps", ["-n", "default"]),
    ("get", "configmaps", ["-n", "kube-system"]),
    ("list", "configmaps", ["-A"]),
    ("list", "configmaps", ["-n", NAMESPACE]),
    ("get", "configmaps/other", ["-n", NAMESPACE]),
    ("update", "configmaps/policyd-config", ["-n", NAMESPACE]),
    ("patch", "configmaps/policyd-config", ["-n", NAMESPACE]),
    ("delete", "configmaps/policyd-config", ["-n", NAMESPACE]),
    ("create", "configmaps", ["-n", NAMESPACE]),
    ("create", "configmaps", ["-n", "default"]),
    ("create", "leases.coordination.k8s.io", ["-n", "kube-system"]),
    ("update", "leases.coordination.k8s.io/kube-scheduler", ["-n", "kube-system"]),
    ("update", "leases.coordination.k8s.io/other", ["-n", NAMESPACE]),
    ("delete", "leases.coordination.k8s.io/policyd", ["-n", NAMESPACE]),
    ("patch", "events", ["-n", "default"]),
    ("delete", "events", ["-n", "default"]),
    ("create", "serviceaccounts", ["--subresource=token", "-n", NAMESPACE]),
    ("impersonate", "serviceaccounts", ["-n", NAMESPACE]),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", []),
    ("bind", "clusterroles.rbac.authorization.k8s.io", []),
    ("create", "pods", ["--subresource=eviction", "-n", "default"]),
    ("get", "deployments.apps", ["-n", NAMESPACE]),
    ("list", "deployments.apps", ["-A"]),
    ("get", "services", ["-n", "default"]),
    ("update", "namespaces", []),
    ("create", "namespaces", []),
    ("patch", "replicasets.apps", ["-n", "default"]),
    # Volumes: read through informers, written only by a full update of a binding.
    ("get", "persistentvolumes", []),
    ("patch", "persistentvolumes", []),
    ("create", "persistentvolumes", []),
    ("delete", "persistentvolumes", []),
    ("patch", "persistentvolumeclaims", ["-n", "default"]),
    ("create", "persistentvolumeclaims", ["-n", "default"]),
    ("delete", "persistentvolumeclaims", ["-n", "default"]),
    ("update", "persistentvolumes", ["--subresource=status"]),
    ("update", "storageclasses.storage.k8s.io", []),
    ("update", "csinodes.storage.k8s.io", []),
    ("update", "volumeattachments.storage.k8s.io", []),
    ("get", "volumeattachments.storage.k8s.io", []),
    # Preemption reads budgets and classes through informers and changes neither.
    ("get", "poddisruptionbudgets.policy", ["-n", "default"]),
    ("update", "poddisruptionbudgets.policy", ["-n", "default"]),
    ("update", "poddisruptionbudgets.policy", ["--subresource=status", "-n", "default"]),
    ("create", "priorityclasses.scheduling.k8s.io", []),
    ("delete", "priorityclasses.scheduling.k8s.io", []),
    ("deletecollection", "pods", ["-n", "default"]),
    # A SchedulingPolicy is the platform team's: policyd writes only its status.
    ("create", "schedulingpolicies.policyd.io", []),
    ("update", "schedulingpolicies.policyd.io", []),
    ("patch", "schedulingpolicies.policyd.io", []),
    ("delete", "schedulingpolicies.policyd.io", []),
    ("patch", "schedulingpolicies.policyd.io", ["--subresource=status"]),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", []),
    # DRA: nothing beyond kube-scheduler's rules (no writes to classes or slices, no
    # device taint rules: DRADeviceTaintRules is off by default, no templates).
    ("create", "deviceclasses.resource.k8s.io", []),
    ("update", "resourceslices.resource.k8s.io", []),
    ("deletecollection", "resourceclaims.resource.k8s.io", ["-n", "default"]),
    ("list", "devicetaintrules.resource.k8s.io", []),
    ("list", "resourceclaimtemplates.resource.k8s.io", ["-A"]),
    # Its own /metrics is for scrapers, not for policyd.
    ("get", "/metrics", []),
    ("get", "/debug/queue", []),
]


@pytest.fixture(scope="module")
def token_kubeconfig(installed: Kube, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    return installed.cp.write_token_kubeconfig(path, _token(installed), user=SA_USER)


@pytest.mark.parametrize("how", ["impersonated", "own-token"])
def test_service_account_can_do_exactly_what_it_needs(
        installed: Kube, token_kubeconfig: Path, how: str) -> None:
    """`kubectl auth can-i`: impersonating (SubjectAccessReview as admin) and with the
    ServiceAccount's own token (SelfSubjectAccessReview: its real groups count too)."""
    def can_i(verb: str, resource: str, extra: list[str]) -> bool:
        if how == "impersonated":
            r = installed.kubectl("auth", "can-i", verb, resource, *extra,
                                  f"--as={SA_USER}", check=False)
        else:
            r = installed.kubectl("auth", "can-i", verb, resource, *extra,
                                  kubeconfig=token_kubeconfig, check=False)
        answer = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        assert answer in ("yes", "no"), r.stdout + r.stderr
        return answer == "yes"

    refused = [(v, r, e) for v, r, e in CAN if not can_i(v, r, e)]
    allowed = [(v, r, e) for v, r, e in CANNOT if can_i(v, r, e)]
    assert not refused, f"needed but not granted: {refused}"
    assert not allowed, f"granted but must not be: {allowed}"


# -- the daemon in the cluster -----------------------------------------------------------

def _node(name: str, labels: dict[str, str]) -> Obj:
    return (make_node(name).labels(labels).capacity(cpu="4", memory="8Gi", pods="110")
            .ready().raw())


def _pod_from_template(workload: Obj, name: str, node_selector: dict[str, str] | None = None
                       ) -> Obj:
    """What the ReplicaSet controller would create (this control plane runs none)."""
    template = json.loads(json.dumps(workload["spec"]["template"]))
    if node_selector:
        template["spec"]["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": workload["metadata"]["namespace"],
                         "labels": template["metadata"].get("labels", {}),
                         "annotations": template["metadata"].get("annotations", {})},
            "spec": template["spec"]}


def _https(url: str, token: str | None) -> tuple[int, str]:
    """GET over HTTPS (the daemon's self-signed certificate accepted), with a token."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                 if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), ""
    except OSError:
        return 0, ""


def _metric(text: str, family: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.fullmatch(rf"{family}(?:\{{(.*)\}})? (\S+)", line)
        if m and (m[1] or "") == want:
            return float(m[2])
    return 0.0


class Replica:
    """One `policyd run` process as the Deployment would start it; `get` reads its
    secure port with `token` (a scraper's)."""

    def __init__(self, identity: str, argv: list[str], env: dict[str, str], port: int,
                 log: Path, token: str) -> None:
        self.identity = identity
        self.port = port
        self.token = token
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def get(self, path: str, token: str | None = "scraper") -> tuple[int, str]:
        return _https(f"https://127.0.0.1:{self.port}{path}",
                      self.token if token == "scraper" else token)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 45.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return int(self.proc.returncode)


def _ready_or_exited(r: Replica) -> bool:
    return r.proc.poll() is not None or r.get("/readyz")[0] == 200


def _reloaded(r: Replica) -> bool:
    return _metric(r.get("/metrics")[1], "policyd_config_reloads_total",
                   result="applied") >= 1


def _build_context(dest: Path) -> Path:
    """What the Dockerfile's `pip install .` installs: the policyd package directory
    alone (no schemas/, policies/ or tests/ beside it)."""
    shutil.copytree(REPO / "policyd", dest / "policyd",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def test_daemon_schedules_with_its_service_account(installed: Kube, tmp_path: Path) -> None:
    kube = installed
    cp = kube.cp
    assert cp.certs is not None and cp.apiserver_port is not None
    # Nodes: only one offers hardware encryption.
    kube.admin.request("POST", "/api/v1/nodes",
                       body=_node("hw-node", {HW_LABEL: "true"}))
    kube.admin.request("POST", "/api/v1/nodes", body=_node("plain-node", {}))

    # The pod's view: the ServiceAccount mount (TokenRequest token, CA) and the ConfigMap
    # as the API server holds it, laid out as the kubelet mounts it.
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(_token(kube))
    shutil.copy(cp.certs.ca_cert, sa_dir / "ca.crt")
    (sa_dir / "namespace").write_text(NAMESPACE)
    served = kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/policyd-config")
    assert served is not None
    etc = tmp_path / "etc-policyd"
    write_kubelet_volume(etc, served["data"])
    context = _build_context(tmp_path / "image")
    # A scraper as deploy/rbac.yaml suggests: a ServiceAccount bound to
    # policyd-metrics-reader (in policyd-system: the audit only records policyd's).
    kube.admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", body={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "scraper"}})
    kube.kubectl("create", "clusterrolebinding", "scraper-policyd-metrics",
                 "--clusterrole=policyd-metrics-reader",
                 f"--serviceaccount={NAMESPACE}:scraper")
    scraper = kube.kubectl("create", "token", "scraper", "-n", NAMESPACE).stdout.strip()

    c = container()
    replicas: list[Replica] = []
    ports = free_ports(2)

    def logs() -> str:
        return "\n".join(f"--- {r.identity}\n{r.log()[-4000:]}" for r in replicas)

    try:
        for n, port in enumerate(ports):
            args = [a.replace(MOUNT, str(etc)) for a in c["args"]]
            args = [f"--secure-port={port}" if a.startswith("--secure-port=") else
                    "--bind-address=127.0.0.1" if a.startswith("--bind-address=") else a
                    for a in args]
            # The pod's name; the daemon's Lease identity is its host name plus a uuid.
            identity = f"policyd-{n}-{uuid.uuid4().hex[:5]}"
            env = {
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
                "HOSTNAME": identity,
                "HOME": str(tmp_path),
                "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(cp.apiserver_port),
                "PYTHONPATH": f"{HELPERS}{os.pathsep}{context}",
                "PYTHONDONTWRITEBYTECODE": "1",
                "POLICYD_TEST_SERVICEACCOUNT_DIR": str(sa_dir),
                "POLICYD_TEST_MODULES_OUT": str(tmp_path / f"modules-{n}.json"),
            }
            # The Deployment's command, resolved on PATH as in the image.
            argv = [*c["command"], *args]
            replicas.append(Replica(identity, argv, env, port, tmp_path / f"policyd-{n}.log",
                                    scraper))

        for r in replicas:
            wait_for(partial(_ready_or_exited, r), 30, f"{r.identity} ready")
            assert r.proc.poll() is None, logs()
            assert r.get("/healthz")[0] == 200

        lease_path = (f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/"
                      "policyd")
        wait_for(lambda: (kube.get(lease_path) or {}).get("spec", {}).get("holderIdentity"),
                 30, "a leader")

        def leaders() -> list[str]:
            return [r.identity for r in replicas
                    if _metric(r.get("/metrics")[1], "leader_election_master_status",
                                           name="policyd") == 1]

        wait_for(lambda: len(leaders()) == 1, 30, "exactly one replica leading")
        # Secure serving: health open; /metrics for the scraper only; policyd's own
        # ServiceAccount is authenticated but not authorized; /debug/* not granted.
        for r in replicas:
            assert r.get("/readyz", token=None) == (200, "ok")
            assert r.get("/metrics", token=None)[0] == 401
            assert r.get("/metrics", token="not-a-token")[0] == 401
            assert r.get("/metrics", token=(sa_dir / "token").read_text())[0] == 403
            assert r.get("/debug/queue")[0] == 403

        # The example workload's pod lands on the hw-encrypt node.
        (workload,) = _docs((DEPLOY / "examples" / "hw-encrypt-workload.yaml").read_text())
        ns = workload["metadata"]["namespace"]
        pods = f"/api/v1/namespaces/{ns}/pods"
        kube.admin.request("POST", pods, body=_pod_from_template(workload, "payments-1"))
        node = wait_for(lambda: (kube.get(f"{pods}/payments-1") or {}).get("spec", {})
                        .get("nodeName"), 30, "payments-1 bound")
        assert node == "hw-node", logs()
        scheduled = wait_for(lambda: kube.admin.request("GET", f"/api/v1/namespaces/{ns}/events",
                                                        query={"fieldSelector":
                                                               "involvedObject.name=payments-1,"
                                                               "reason=Scheduled"})["items"],
                             30, "Scheduled event")
        assert scheduled[0]["source"]["component"] == "policyd"
        assert scheduled[0]["message"] == f"Successfully assigned {ns}/payments-1 to hw-node"

        # A SchedulingPolicy applied while the replicas run (deploy/config/profile.yaml:
        # clusterPolicies: true): listed at start-up, watched, read fresh and its
        # status written by the leader: every permission deploy/rbac.yaml grants on it.
        _apply_cluster_policy(kube, logs)

        # A pod with volumes lands where they are; the daemon's writes of the bindings
        # (`update` on PVs and claims) are what the audit below wants to see used.
        _place_pod_with_volumes(kube, workload, logs)

        # A high-priority pod preempts a low-priority one: the audit below wants the
        # victim's deletion (and its DisruptionTarget status patch) seen.
        _preempt_for_a_high_priority_pod(kube, workload, logs)

        # One that fits nowhere (it also insists on the plain node): a FailedScheduling
        # event and the PodScheduled condition.
        plain_only = {"kubernetes.io/hostname": "plain-node"}
        kube.admin.request("POST", pods, body=_pod_from_template(workload, "payments-big",
                                                                 plain_only))

        def condition() -> Obj | None:
            pod = kube.get(f"{pods}/payments-big") or {}
            return next((c for c in pod.get("status", {}).get("conditions") or []
                         if c["type"] == "PodScheduled"), None)

        cond = wait_for(condition, 30, "PodScheduled condition of payments-big")
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
        assert cond["message"].startswith("0/2 nodes are available"), cond
        failed = wait_for(lambda: kube.admin.request(
            "GET", f"/api/v1/namespaces/{ns}/events",
            query={"fieldSelector": "involvedObject.name=payments-big,"
                                    "reason=FailedScheduling"})["items"], 30, "FailedScheduling")
        assert "1 node(s) didn't offer hardware encryption" in failed[0]["message"], failed

        # Change a policy: the ConfigMap is updated through the API server and reaches the
        # pods' volume by the kubelet's atomic swap; every replica reloads it.
        changed = dict(served["data"])
        changed["hw-encrypt.yaml"] = changed["hw-encrypt.yaml"].replace(
            "node(s) didn't offer hardware encryption",
            "node(s) lack hardware encryption")
        assert changed != served["data"]
        cm = configmap()
        cm["data"] = changed
        kube.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(cm))
        updated = kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/policyd-config")
        assert updated is not None and updated["data"] == changed
        write_kubelet_volume(etc, updated["data"])
        for r in replicas:
            wait_for(partial(_reloaded, r), 30, f"{r.identity} reloaded")
        kube.admin.request("POST", pods, body=_pod_from_template(workload, "payments-big-2",
                                                                 plain_only))
        failed2 = wait_for(lambda: kube.admin.request(
            "GET", f"/api/v1/namespaces/{ns}/events",
            query={"fieldSelector": "involvedObject.name=payments-big-2,"
                                    "reason=FailedScheduling"})["items"], 30, "FailedScheduling")
        assert "1 node(s) lack hardware encryption" in failed2[0]["message"], failed2

        # Lease renewals happen every retryPeriod (2s): let at least one go by.
        time.sleep(3)
        for r in replicas:
            assert r.stop() == 0, logs()
        assert "Forbidden" not in logs() and " 403" not in logs(), logs()
        released = kube.get(lease_path) or {}
        assert not released.get("spec", {}).get("holderIdentity"), released
    except AssertionError as exc:
        # A refused request shows in the daemons' logs (e.g. "403 Forbidden").
        for r in replicas:
            r.stop(5)
        raise AssertionError(f"{exc}\n{logs()}") from exc
    finally:
        for r in replicas:
            r.stop(5)
        # Restore the rendered ConfigMap for the tests after this one.
        kube.kubectl("apply", "--server-side", "-f", str(DEPLOY / "configmap.yaml"))

    _check_audit(kube)
    for n in range(len(replicas)):
        _check_modules(tmp_path / f"modules-{n}.json", context)


def _apply_cluster_policy(kube: Kube, logs: Callable[[], str]) -> None:
    """A SchedulingPolicy for pods annotated example.io/gpu (none here: it changes no
    placement below), accepted by the leader in its status."""
    path = "/apis/policyd.io/v1alpha1/schedulingpolicies"
    kube.admin.request("POST", path, body={
        "apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
        "metadata": {"name": "gpu-nodes"},
        "spec": {"pluginName": "GpuNodes",
                 "appliesTo": {"annotationSelector": {
                     "matchAnnotations": {"example.io/gpu": "true"}}},
                 "filters": [{"id": "gpu", "message": "node(s) had no gpu",
                              "nodeLabels": {"matchLabels": {"example.io/gpu": "true"}}}]}})

    def accepted() -> Obj | None:
        obj = kube.get(f"{path}/gpu-nodes") or {}
        return next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c["type"] == "Accepted" and c["status"] == "True"), None)

    cond = wait_for(accepted, 30, "gpu-nodes Accepted")
    assert cond["observedGeneration"] == 1, logs()


def _place_pod_with_volumes(kube: Kube, workload: Obj, logs: Callable[[], str]) -> None:
    """A pod of the example workload with two WaitForFirstConsumer claims: `data`,
    which only a local PV on hw-node matches (VolumeBinding's PreBind writes that PV's
    claimRef), and `scratch`, which is provisioned (PreBind writes the claim's
    selected-node annotation; the test then creates the volume on that node, as an
    external provisioner does). The control plane's PV controller binds both claims,
    PreBind sees them bound, and the pod is bound to hw-node."""
    ns = workload["metadata"]["namespace"]
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    hw_node = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["hw-node"]}]}]}}
    for name, provisioner in (("hw-local", "kubernetes.io/no-provisioner"),
                              ("hw-provisioned", "hw-disk.example.com")):
        kube.admin.request("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer"})
    kube.admin.request("POST", "/api/v1/persistentvolumes", body={
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "hw-data"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "hw-local", "local": {"path": "/mnt/data"},
                 "nodeAffinity": hw_node}})
    for claim, sc in (("payments-data", "hw-local"), ("payments-scratch", "hw-provisioned")):
        kube.admin.request("POST", claims, body={
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                     "resources": {"requests": {"storage": "1Gi"}}}})
    pod = _pod_from_template(workload, "payments-vol")
    pod["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "payments-data"}},
        {"name": "scratch", "persistentVolumeClaim": {"claimName": "payments-scratch"}}]
    kube.admin.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod)

    # The provisioner's part: a volume on the node the scheduler selected.
    selected = "volume.kubernetes.io/selected-node"
    scratch = wait_for(lambda: ((kube.get(f"{claims}/payments-scratch") or {})
                                .get("metadata", {}).get("annotations") or {}).get(selected)
                       and kube.get(f"{claims}/payments-scratch"),
                       60, f"payments-scratch annotated {selected}\n{logs()}")
    node = scratch["metadata"]["annotations"][selected]
    assert node == "hw-node", scratch
    kube.admin.request("POST", "/api/v1/persistentvolumes", body={
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "hw-scratch"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "hw-provisioned", "local": {"path": "/mnt/scratch"},
                 "nodeAffinity": hw_node,
                 "claimRef": {"namespace": ns, "name": "payments-scratch",
                              "uid": scratch["metadata"]["uid"]}}})

    bound = wait_for(lambda: (kube.get(f"/api/v1/namespaces/{ns}/pods/payments-vol") or {})
                     .get("spec", {}).get("nodeName"), 90, f"payments-vol bound\n{logs()}")
    assert bound == "hw-node", logs()
    for claim, volume in (("payments-data", "hw-data"), ("payments-scratch", "hw-scratch")):
        got = kube.get(f"{claims}/{claim}") or {}
        assert got.get("status", {}).get("phase") == "Bound", got
        assert got["spec"]["volumeName"] == volume, got


def _preempt_for_a_high_priority_pod(kube: Kube, workload: Obj, logs: Callable[[], str]
                                     ) -> None:
    """Needs DefaultPreemption in the default profile. A low-priority pod takes most of
    hw-node (the only node the example workload may use); a high-priority one that
    needs the same room preempts it: the daemon patches the victim's DisruptionTarget
    condition, deletes it (its grace period is 0: this control plane has no kubelet to
    finish a graceful deletion), nominates the preemptor and binds it there."""
    ns = workload["metadata"]["namespace"]
    pods = f"/api/v1/namespaces/{ns}/pods"
    for name, value in (("payments-low", 10), ("payments-high", 1000)):
        kube.admin.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})

    def big(name: str, priority_class: str) -> Obj:
        pod = _pod_from_template(workload, name)
        pod["spec"]["priorityClassName"] = priority_class
        pod["spec"]["terminationGracePeriodSeconds"] = 0
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        return pod

    kube.admin.request("POST", pods, body=big("payments-filler", "payments-low"))
    wait_for(lambda: (kube.get(f"{pods}/payments-filler") or {}).get("spec", {})
             .get("nodeName"), 30, f"payments-filler bound\n{logs()}")
    kube.admin.request("POST", pods, body=big("payments-urgent", "payments-high"))
    node = wait_for(lambda: (kube.get(f"{pods}/payments-urgent") or {}).get("spec", {})
                    .get("nodeName"), 60, f"payments-urgent bound by preemption\n{logs()}")
    assert node == "hw-node", logs()
    assert kube.get(f"{pods}/payments-filler") is None, "the victim is still there"


def _granted(kube: Kube) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of every rule of every role deploy/ binds to policyd's
    ServiceAccount, built-in ones (system:auth-delegator) as the API server has them."""
    granted: set[tuple[str, str, str]] = set()
    subject = {"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}
    for (kind, ns, _), obj in bundle().items():
        if kind not in ("ClusterRoleBinding", "RoleBinding") or \
                subject not in obj["subjects"]:
            continue
        ref = obj["roleRef"]
        where = f"namespaces/{ns}/" if ref["kind"] == "Role" else ""
        role = kube.get(f"/apis/rbac.authorization.k8s.io/v1/{where}"
                        f"{ref['kind'].lower()}s/{ref['name']}")
        assert role is not None, ref
        for rule in role["rules"]:
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule["verbs"]:
                        granted.add((group, resource, verb))
    return granted


# The DRA permissions of deploy/rbac.yaml that the informers do not use.
DRA_BEYOND_INFORMERS = {
    *(("resource.k8s.io", r, "get") for r in ("deviceclasses", "resourceslices",
                                              "resourceclaims", "resourceclaims/status")),
    *(("resource.k8s.io", "resourceclaims/status", v) for v in ("list", "watch")),
    *(("resource.k8s.io", r, v) for r in ("resourceclaims", "resourceclaims/status",
                                         "resourceclaims/binding")
      for v in ("update", "patch")),
    ("resource.k8s.io", "resourceclaims", "create"),
    ("resource.k8s.io", "resourceclaims", "delete"),
    ("", "pods/finalizers", "update"),
}


def _check_audit(kube: Kube) -> None:
    """Every request the daemon sent was allowed, and every permission granted in
    deploy/rbac.yaml was used (or is one of the documented rare paths)."""
    used: set[tuple[str, str, str]] = set()
    refused = []
    for line in kube.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event["user"]["username"] != SA_USER or \
                not event.get("userAgent", "").startswith("policyd"):
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}"
                                              if ref.get("subresource") else "")
        code = (event.get("responseStatus") or {}).get("code", 0)
        if code == 403:
            refused.append((event["verb"], event["requestURI"]))
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
    assert used, "no requests of the daemon in the audit log"
    assert not refused, f"refused requests: {refused}"

    granted = _granted(kube)
    assert ("authentication.k8s.io", "tokenreviews", "create") in granted
    # Granted, but not on the paths this test drives: each needs a fault to happen.
    rare = {
        ("", "pods", "get"),  # a bind answered 409 after an earlier attempt timed out
        ("", "configmaps", "get"),  # for people, not the daemon (it reads the mount)
        # DRA beyond the informers: kube-scheduler's rules for its DynamicResources
        # plugin (PreBind's claim writes, the extended-resource claim), granted as
        # upstream grants them; this test binds no pod with a claim.
        *DRA_BEYOND_INFORMERS,
        # PodGroups: this API server serves neither API (the informers' list gets a
        # 404 and never watches); tests/e2e/test_gang_scheduling.py uses them.
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        # OpenReports: listed every round once the first interval passed (a 404 here:
        # no CRD), written only where served (tests/e2e/test_openreports.py).
        ("openreports.io", "reports", "list"),
        ("openreports.io", "clusterreports", "list"),
        ("openreports.io", "reports", "create"),
        ("openreports.io", "reports", "update"),
        ("openreports.io", "reports", "delete"),
        ("openreports.io", "clusterreports", "create"),
        ("openreports.io", "clusterreports", "update"),
        ("openreports.io", "clusterreports", "delete"),
    }
    assert granted - used - rare == set(), f"granted but never used: {granted - used - rare}"
    assert used <= granted, f"used but not granted: {used - granted}"


def _check_modules(path: Path, context: Path) -> None:
    """Each module the daemon imported comes from the standard library, from policyd
    (as the image installs it), or from a distribution deploy/requirements.txt pins."""
    from importlib import metadata

    modules: dict[str, str | None] = json.loads(path.read_text())
    assert modules["policyd"] is not None and \
        Path(modules["policyd"]).is_relative_to(context), modules["policyd"]
    pins = set(_render_module().read_pins((DEPLOY / "requirements.txt").read_text()))
    stdlib = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}
    owners = metadata.packages_distributions()
    missing = {}
    for name, file in modules.items():
        top = name.split(".")[0]
        if top in ("policyd", "sitecustomize", "__main__", "__mp_main__") or file is None \
                or top in sys.stdlib_module_names:
            continue
        resolved = Path(file).resolve()
        if any(resolved.is_relative_to(s) for s in stdlib) and \
                "site-packages" not in resolved.parts:
            continue
        dists = {_norm(d) for d in owners.get(top, [])}
        if not dists & pins:
            missing[top] = sorted(dists) or file
    assert not missing, f"imported by the daemon, not pinned for the image: {missing}"


def test_uninstall_deletes_everything(installed: Kube) -> None:
    """Last in this module: `kubectl delete -f deploy/policyd.yaml` as docs/deploy.md says.
    This control plane runs no namespace controller, so the Namespace stays Terminating
    instead of disappearing (`--wait=false`); everything else is gone."""
    installed.kubectl("delete", "-f", str(DEPLOY / "policyd.yaml"), "--wait=false")
    for kind, ns, name in bundle():
        args = ["get", kind.lower(), name, "-o", "json", "--ignore-not-found"] + (
            ["-n", ns] if ns else [])
        out = installed.kubectl(*args).stdout.strip()
        if kind == "Namespace":
            assert not out or json.loads(out)["status"]["phase"] == "Terminating", out
        elif ns:
            # Deleted by kubectl itself; the namespace's own deletion would also take them.
            assert not out or json.loads(out)["metadata"].get("deletionTimestamp"), out
        else:
            assert not out, f"{kind}/{name} still there"
