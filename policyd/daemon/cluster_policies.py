"""The daemon's cluster policies: SchedulingPolicy objects, what runs of them, and
what each object's status should say.

`clusterPolicies: true` makes `policyd run` run the cluster's SchedulingPolicy objects
beside its policy files. This module is the bookkeeping, with no I/O (the informer,
the profile loader and the status writer are the daemon's, `run.py` and
`policy_status.py`):

- per object, its **current version** (the latest the watch delivered) and its
  **running version** (the compiled policy the frameworks run, and its generation);
- a `Plan`: every current version checked together with the file policies
  (`policyd.policy.objects.check_objects`, exactly as files are checked), and the
  version of each object that should run. A current version that is refused leaves
  the running one in place (the last good version keeps scheduling); a deleted object
  has no version; a running version whose name or pluginName a file policy (or an
  older object's running version) now uses is dropped: files were there first, and
  two plugins never share a name;
- whether the plan ran: the daemon rebuilds its frameworks from the files plus the
  plan's policies through the profile's validation, then says `applied(plan)` or
  `refused(plan, why)` (the running versions stay);
- the `Accepted` condition each object's status should carry (`conditions()`) and the
  status write that gets it there (`status_update`: only when something changed,
  lastTransitionTime moved only when the status flips).

Status-only updates (ours, or another writer's) do not change an object's generation
and are not a new version: they never cause a rebuild, so writing status cannot loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.policy import policy_schema
from policyd.policy.metric_refs import MetricCheck
from policyd.policy.objects import (
    OBJECT_PREFIX,
    check_objects,
    describe,
    object_generation,
    object_name,
)
from policyd.problems import ERROR, WARNING
from policyd.sourcefile import SourceDocument

if TYPE_CHECKING:
    from policyd.policy.compiler import CompiledPolicy

log = logging.getLogger("policyd.daemon.cluster_policies")

Obj = dict[str, Any]


ACCEPTED = "Accepted"
# The Accepted condition's reasons (metav1.Condition: CamelCase).
COMPILED = "Compiled"  # True: this generation runs
INVALID = "Invalid"  # False: the policy has errors (schema, JMESPath, ...)
CONFLICT = "Conflict"  # False: its name or pluginName is a file's or another object's
NOT_APPLIED = "NotApplied"  # False: valid alone, but the profile could not be built with it
# The rules of `check_objects` problems that are collisions rather than mistakes.
CONFLICT_RULES = frozenset({"duplicate-name", "duplicate-plugin-name"})
# The Warning event posted on an object when a version of it is refused, by reason.
EVENT_REASONS = {INVALID: "InvalidPolicy", CONFLICT: "PolicyConflict",
                 NOT_APPLIED: "PolicyNotApplied"}


def object_uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) else ""


def as_policy(obj: Mapping[str, Any]) -> Obj:
    """`obj` with its kind and apiVersion: list items come without them, and the
    policy schema requires both."""
    out = dict(obj)
    out["kind"] = out.get("kind") or policy_schema.KIND
    out["apiVersion"] = out.get("apiVersion") or policy_schema.API_VERSION
    return out


@dataclass(frozen=True, slots=True)
class Version:
    """One version of an object, compiled: what the frameworks run."""

    uid: str
    generation: int | None
    compiled: CompiledPolicy

    @property
    def plugin(self) -> str:
        return self.compiled.name


@dataclass(frozen=True, slots=True)
class Verdict:
    """What checking an object's current version found."""

    name: str
    uid: str
    generation: int | None
    reason: str  # COMPILED, INVALID or CONFLICT
    messages: tuple[str, ...]  # the errors (refused) or warnings (accepted), described
    compiled: CompiledPolicy | None = None

    @property
    def accepted(self) -> bool:
        return self.compiled is not None


@dataclass(frozen=True, slots=True)
class Plan:
    """The cluster policies to run beside `file_documents` and the profile's metrics."""

    file_documents: tuple[SourceDocument, ...]
    verdicts: dict[str, Verdict]
    versions: dict[str, Version]  # by object name, oldest object first
    metrics: MetricCheck | None = None

    def policies(self) -> dict[str, CompiledPolicy]:
        """The compiled policies, by pluginName (what the profile validation adds)."""
        return {v.plugin: v.compiled for v in self.versions.values()}


@dataclass(frozen=True, slots=True)
class Condition:
    """What an object's `Accepted` condition should say (for the object `uid`)."""

    uid: str
    generation: int | None
    accepted: bool
    reason: str
    message: str


def _order(obj: Mapping[str, Any]) -> tuple[str, str]:
    """Oldest first (then by name): of two objects claiming one pluginName, the one
    that had it first keeps it."""
    meta = obj.get("metadata")
    created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    return (created if isinstance(created, str) else "", object_name(obj))


def _file_claims(documents: Sequence[SourceDocument]) -> tuple[dict[str, str], set[str]]:
    """The pluginNames (-> the file using each) and policy names of the files."""
    plugins: dict[str, str] = {}
    names: set[str] = set()
    for doc in documents:
        data = doc.data if isinstance(doc.data, Mapping) else {}
        meta, spec = data.get("metadata"), data.get("spec")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        plugin = spec.get("pluginName") if isinstance(spec, Mapping) else None
        if isinstance(name, str):
            names.add(name)
        if isinstance(plugin, str):
            plugins.setdefault(plugin, doc.file)
    return plugins, names


class ClusterPolicies:
    """Current and running versions of every SchedulingPolicy object. Thread-safe: the
    informer feeds it, the daemon's rebuild reads and commits plans."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.objects: dict[str, Obj] = {}  # current versions, by name
        self.running: dict[str, Version] = {}
        self.file_documents: tuple[SourceDocument, ...] = ()
        self.metrics: MetricCheck | None = None  # the running profile's
        self.failure: str | None = None  # why the last plan could not run
        self.last_plan: Plan | None = None
        # The plan the running rebuild asked for (`__call__`), for `applied`/`refused`.
        self.proposed: Plan | None = None

    # -- what the watch delivers ------------------------------------------------------

    def replace_all(self, objects: Sequence[Mapping[str, Any]]) -> bool:
        """The objects of a list (start-up); True if any version changed."""
        fresh = {object_name(o): as_policy(o) for o in objects if object_name(o)}
        with self._lock:
            changed = _versions(fresh) != _versions(self.objects)
            self.objects = fresh
        return changed

    def upsert(self, obj: Mapping[str, Any]) -> bool:
        """An object added or updated; True if it is a new version (a new uid or
        generation), False for a status or metadata update of the same version."""
        name = object_name(obj)
        if not name:
            return False
        with self._lock:
            old = self.objects.get(name)
            self.objects[name] = as_policy(obj)
        return old is None or _version_key(old) != _version_key(obj)

    def remove(self, obj: Mapping[str, Any]) -> bool:
        """An object deleted; True if it was known (by name and uid)."""
        name = object_name(obj)
        with self._lock:
            old = self.objects.get(name)
            if old is None or (object_uid(obj) and object_uid(old) != object_uid(obj)):
                return False
            del self.objects[name]
        return True

    # -- plans ------------------------------------------------------------------------

    def plan(self, file_documents: Sequence[SourceDocument] | None = None,
             metrics: MetricCheck | None = None) -> Plan:
        """Check every current version beside the file policies and the profile's
        metrics (the committed ones when None) and choose each object's version to
        run."""
        with self._lock:
            objects = sorted(self.objects.values(), key=_order)
            running = dict(self.running)
            docs = tuple(self.file_documents if file_documents is None else file_documents)
            metrics = self.metrics if metrics is None else metrics
        file_plugins, file_names = _file_claims(docs)
        # pluginName -> who has it: the files, then each object's chosen version.
        taken = {p: f for p, f in file_plugins.items()}
        verdicts: dict[str, Verdict] = {}
        versions: dict[str, Version] = {}
        for obj, checked in zip(objects, check_objects(objects, docs, metrics), strict=True):
            name, uid, gen = checked.name, object_uid(obj), checked.generation
            verdict = _verdict(name, uid, gen, checked.problems, checked.compiled)
            if verdict.compiled is not None and verdict.compiled.name in taken:
                # Held by an older object's retained version (check_objects saw only
                # current versions): first come, first served.
                plugin = verdict.compiled.name
                verdict = Verdict(name, uid, gen, CONFLICT, (
                    f"spec.pluginName: pluginName {plugin!r} is already used by "
                    f"{taken[plugin]}",))
            verdicts[name] = verdict
            chosen: Version | None = None
            if verdict.compiled is not None:
                chosen = Version(uid, gen, verdict.compiled)
            else:
                last = running.get(name)
                if last is not None and last.uid == uid and last.plugin not in taken \
                        and name not in file_names:
                    chosen = last
            if chosen is not None:
                versions[name] = chosen
                taken[chosen.plugin] = f"{OBJECT_PREFIX}{name}"
        return Plan(docs, verdicts, versions, metrics)

    def __call__(self, file_documents: Sequence[SourceDocument], metrics: MetricCheck
                 ) -> dict[str, Any]:
        """The profile validation's source of cluster policies
        (`policyd.config.validate.ClusterPolicies`): plans beside `file_documents` and
        `metrics` and remembers the plan for `applied`/`refused`."""
        plan = self.plan(file_documents, metrics)
        with self._lock:
            self.proposed = plan
        return plan.policies()

    def applied(self, plan: Plan | None = None) -> None:
        """The frameworks now run `plan` (default: the last proposed)."""
        with self._lock:
            plan = plan or self.proposed
            if plan is None:
                return
            self.running = dict(plan.versions)
            self.file_documents = plan.file_documents
            self.metrics = plan.metrics
            self.failure = None
            self.last_plan = plan

    def refused(self, why: str, plan: Plan | None = None) -> None:
        """`plan` (default: the last proposed, else a plan beside the running files)
        could not run: the running versions stay, and the objects it would have
        changed say why."""
        plan = plan or self.proposed or self.plan()
        with self._lock:
            self.failure = why
            self.last_plan = plan

    # -- status -----------------------------------------------------------------------

    def conditions(self) -> dict[str, Condition]:
        """The `Accepted` condition each current object should show, by name (none
        for an object no plan has judged yet)."""
        with self._lock:
            plan, running, failure = self.last_plan, dict(self.running), self.failure
            current = {n: object_uid(o) for n, o in self.objects.items()}
        if plan is None:
            return {}
        out: dict[str, Condition] = {}
        for name, v in plan.verdicts.items():
            if current.get(name) != v.uid:
                continue  # deleted (or re-created) since the plan
            runs = running.get(name)
            if runs is not None and runs.uid != v.uid:
                runs = None
            out[name] = condition_for(v, runs, failure)
        return out

    def object(self, name: str) -> Obj | None:
        with self._lock:
            return self.objects.get(name)


def _version_key(obj: Mapping[str, Any]) -> tuple[str, int | None]:
    return object_uid(obj), object_generation(obj)


def _versions(objects: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, int | None]]:
    return {n: _version_key(o) for n, o in objects.items()}


def _verdict(name: str, uid: str, generation: int | None, problems: Sequence[Any],
             compiled: CompiledPolicy | None) -> Verdict:
    errors = [p for p in problems if p.level == ERROR]
    if not errors and compiled is not None:
        warnings = tuple(describe(p) for p in problems if p.level == WARNING)
        return Verdict(name, uid, generation, COMPILED, warnings, compiled)
    reason = CONFLICT if errors and all(p.rule in CONFLICT_RULES for p in errors) \
        else INVALID
    messages = tuple(describe(p) for p in errors) or ("the policy could not be compiled",)
    return Verdict(name, uid, generation, reason, messages)


def condition_for(verdict: Verdict, running: Version | None, failure: str | None
                  ) -> Condition:
    """The Accepted condition for an object's current version `verdict`, given the
    version of it that runs (same uid) and why the last rebuild failed, if it did."""
    gen = verdict.generation
    if running is not None and running.generation == gen and verdict.accepted:
        message = f"in effect as plugin {running.plugin!r}"
        if verdict.messages:
            message += "; warnings: " + "; ".join(verdict.messages)
        return Condition(verdict.uid, gen, True, COMPILED, message)
    still = (f"generation {running.generation} still in effect" if running is not None
             else "no version of it is in effect")
    if verdict.accepted:
        why = failure or "waiting for the scheduler to apply it"
        return Condition(verdict.uid, gen, False, NOT_APPLIED,
                         f"valid, but the profile could not run it: {why}; {still}")
    return Condition(verdict.uid, gen, False, verdict.reason,
                     "; ".join(verdict.messages) + f"; {still}")


# -- the status subresource --------------------------------------------------------------

def accepted_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == ACCEPTED:
            return c
    return None


def status_update(obj: Mapping[str, Any], want: Condition, now: str) -> Obj | None:
    """The status `obj` should get for `want`, or None when it already says so.
    lastTransitionTime is `now` only when the condition is new or its status flips
    (metav1.Condition's rule); other conditions, if any, are kept."""
    status = obj.get("status")
    status = dict(status) if isinstance(status, Mapping) else {}
    old = accepted_condition(obj)
    flag = "True" if want.accepted else "False"
    since = now if old is None or old.get("status") != flag \
        else old.get("lastTransitionTime", now)
    cond: Obj = {"type": ACCEPTED, "status": flag, "reason": want.reason,
                 "message": want.message, "lastTransitionTime": since}
    if want.generation is not None:
        cond["observedGeneration"] = want.generation
    if old is not None and dict(old) == cond \
            and status.get("observedGeneration") == want.generation:
        return None
    others = [c for c in status.get("conditions") or []
              if isinstance(c, Mapping) and c.get("type") != ACCEPTED]
    status["conditions"] = [*others, cond]
    if want.generation is not None:
        status["observedGeneration"] = want.generation
    return status


def refusal_news(obj: Mapping[str, Any], want: Condition) -> bool:
    """Whether writing `want` over `obj`'s status reports a refusal the object did not
    show yet (a Warning event is due): a refused generation, or a new reason."""
    if want.accepted:
        return False
    old = accepted_condition(obj)
    return old is None or old.get("status") != "False" \
        or old.get("observedGeneration") != want.generation \
        or old.get("reason") != want.reason


def writes_due(model: ClusterPolicies, *, leader: bool) -> dict[str, Condition]:
    """The conditions to write now: only the leader writes, and only where the
    object, as last seen, does not already show it."""
    if not leader:
        return {}
    out = {}
    for name, want in model.conditions().items():
        obj = model.object(name)
        if obj is not None and status_update(obj, want, "") is not None:
            out[name] = want
    return out


class PolicySync:
    """The SchedulingPolicy informer's handler, and the loop that turns new versions
    into a rebuild (`recombine`, after `settle` seconds of quiet so a burst of
    changes, such as a `kubectl apply` of ten objects, rebuilds once) and wanted
    conditions into status writes (`submit`; checked every `resync` seconds too, so a
    new leader, or a file reload that changed a verdict, writes what is due)."""

    def __init__(self, model: ClusterPolicies, *, recombine: Callable[[str], bool],
                 submit: Callable[[dict[str, Condition]], None],
                 is_leader: Callable[[], bool], clock: Clock = REAL_CLOCK,
                 settle: float = 0.2, resync: float = 1.0) -> None:
        self.model = model
        self.recombine = recombine
        self.submit = submit
        self.is_leader = is_leader
        self.clock = clock
        self.settle = settle
        self.resync = resync
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._changes: list[str] = []
        self.rebuilds = 0

    # -- the informer's handler ---------------------------------------------------------

    def on_add(self, obj: Obj) -> None:
        self._note(self.model.upsert(obj), obj, "added")

    def on_update(self, old: Obj, new: Obj) -> None:
        self._note(self.model.upsert(new), new,
                   f"changed (generation {object_generation(new)})")

    def on_delete(self, obj: Obj) -> None:
        self._note(self.model.remove(obj), obj, "deleted")

    def _note(self, new_version: bool, obj: Obj, what: str) -> None:
        if new_version:
            with self._lock:
                self._changes.append(f"{OBJECT_PREFIX}{object_name(obj)} {what}")
        self._wake.set()

    # -- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.clock.wait(self._wake, self.resync)
            if stop.is_set():
                return
            try:
                self.step()
            except Exception:  # a bug must not end the loop
                log.exception("applying cluster policy changes failed")

    def step(self) -> None:
        """Rebuild if versions changed (after the settle time), then submit the
        status writes due."""
        if self._wake.is_set():
            self._wake.clear()
            if self._changes:
                self.clock.sleep(self.settle)  # coalesce a burst
                self._wake.clear()
            with self._lock:
                changes, self._changes = self._changes, []
            if changes:
                self.rebuilds += 1
                self.recombine("; ".join(dict.fromkeys(changes)))
        self.submit(writes_due(self.model, leader=self.is_leader()))
