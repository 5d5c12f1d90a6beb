"""List-then-watch of one resource kind as raw JSON, never losing an event.

The reflector pattern (client-go's `Reflector`): list everything (paged), remember the
list's resourceVersion, watch from there; each event moves the resourceVersion on
(bookmarks too). A 410 Gone (the server compacted past our version) re-lists, and the
difference between the cached objects and the new list is delivered as
adds/updates/deletes, so a consumer sees the same stream it would have seen without
the gap. Any other failure reconnects after an exponential backoff with jitter.

A watch that goes silent (no byte, bookmark included, for the client's watch silence
bound) fails like a dropped one and resumes from the last resourceVersion on a new
connection. A healthy watch is never that quiet: each asks the server to end it
before the bound (`server_watch_timeout`), and bookmarks come meanwhile.
`request_relist()` makes the informer list again now (a consistent read), which is
how a new leader confirms its caches are fresh before it schedules.

The store is keyed by uid, not by name: an object deleted and re-created under the same
name (a StatefulSet pod, a re-registered node) is another object, delivered as a delete
of the old uid and an add of the new one — on a re-list and on the watch alike — never
as an update from one uid to the other, after which a consumer would still count the
old one.

Bad neighbours are skipped, not obeyed: a watch line that is not an event (garbage, a
truncated object) ends the stream, which reconnects from the last good resourceVersion
after a backoff; an object whose metadata is not an object's (no name, wrong types) or
whose labels no API server would accept, or too many of them (`object_problem`), is
left out with one log line and `on_skip(reason)`, keeping the version cached before,
so one bad object cannot stop the informer or the scheduling behind it. A watch that
ends at once without an event counts as a failure (client-go's "very short watch"), so
a server that hangs up on every watch is retried with backoff instead of in a spin.

An `optional` resource (an API group a server may have turned off, such as
resource.k8s.io) whose list answers 404 is taken as empty and synced, and listed again
after a backoff until it is served: client-go's reflector would retry with its
informer never synced, and a scheduler waiting for its caches would never start.

The official client's `SharedInformer` is not used: it decodes every object into
models (about 4x slower than json.loads) and reconnects a failing watch without any
backoff.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from policyd.kube.backoff import Backoff
from policyd.kube.client import (
    ApiError,
    BadWatchEvent,
    KubeClient,
    WatchStream,
    retry_after_of,
)

log = logging.getLogger("policyd.kube.informer")

Obj = dict[str, Any]

# Labels beyond any real object's: kubelet, cloud providers and operators set a few
# dozen on a node. More than this is a hostile or broken writer, and every selector and
# topology key would have to scan them on every scheduling cycle.
MAX_LABELS = 1000
# The API server's own limits (a qualified name: a DNS-subdomain prefix of 253, "/", a
# name of 63; values of 63): longer ones cannot come from a validating server.
MAX_LABEL_KEY = 253 + 1 + 63
MAX_LABEL_VALUE = 63
# A watch that ends sooner than this without an event is a failure (client-go's
# reflector): reconnecting at once would spin.
SHORT_WATCH = 1.0

# `on_skip` reasons (the `reason` label of policyd_objects_skipped_total).
SKIP_BAD_WATCH_LINE = "bad_watch_line"
SKIP_INVALID = "invalid"
SKIP_HOSTILE_LABELS = "hostile_labels"


def object_problem(obj: Any, *, check_labels: bool = True) -> tuple[str, str] | None:
    """Why an object from a list or watch must be skipped — (reason, what is wrong) —
    or None. Only what the informer and every consumer rely on is checked: metadata an
    object with a string name (and uid/namespace strings if set), and labels (unless
    `check_labels` is False: a delete needs only the identity) a string map within
    MAX_LABELS and the API server's key/value lengths. The kind's own fields are the
    decoders' business."""
    if not isinstance(obj, dict):
        return SKIP_INVALID, "the object is not a JSON object"
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return SKIP_INVALID, "metadata is not an object"
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return SKIP_INVALID, "metadata.name is missing or not a string"
    for field in ("namespace", "uid", "resourceVersion"):
        if meta.get(field) is not None and not isinstance(meta[field], str):
            return SKIP_INVALID, f"metadata.{field} is not a string"
    if not check_labels:
        return None
    labels = meta.get("labels")
    if labels is None:
        return None
    if not isinstance(labels, dict):
        return SKIP_INVALID, "metadata.labels is not a map"
    if len(labels) > MAX_LABELS:
        return SKIP_HOSTILE_LABELS, f"{len(labels)} labels (at most {MAX_LABELS} accepted)"
    for key, value in labels.items():
        if not isinstance(value, str):
            return SKIP_INVALID, f"label {key[:80]!r} has a value that is not a string"
        if len(key) > MAX_LABEL_KEY:
            return SKIP_HOSTILE_LABELS, f"label key {key[:40]!r}... is {len(key)} characters"
        if len(value) > MAX_LABEL_VALUE:
            return SKIP_HOSTILE_LABELS, (f"label {key[:80]!r} has a value of {len(value)} "
                                         f"characters (at most {MAX_LABEL_VALUE})")
    return None


def _describe(obj: Any) -> str:
    """`namespace/name (uid u)` as far as a possibly broken object allows."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "an object without metadata"
    name, ns, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    text = f"{ns}/{name}" if isinstance(ns, str) and ns else repr(name)
    return f"{text} (uid {uid})" if isinstance(uid, str) and uid else text


class Handler(Protocol):
    """`on_update` always gets two versions of the same uid."""

    def on_add(self, obj: Obj) -> None: ...
    def on_update(self, old: Obj, new: Obj) -> None: ...
    def on_delete(self, obj: Obj) -> None: ...


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def object_uid(obj: Obj) -> str:
    """The identity of one incarnation of an object: its uid (its key when it has none,
    as in hand-written test objects)."""
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid else object_key(obj)


def resource_version(obj: Obj) -> str:
    meta = obj.get("metadata")
    # Checked: it is read before `object_problem` has vetted the object.
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def diff_relist(cached: dict[str, Obj], listed: list[Obj]
                ) -> tuple[list[Obj], list[tuple[Obj, Obj]], list[Obj]]:
    """What changed between the cache (by uid) and a fresh list: (added, updated (old,
    new), deleted). Compared by uid: a uid that is gone was deleted, a new uid was
    added — also when the name is the same (deleted and re-created while the watch was
    down) — and only the same uid at another resourceVersion is an update."""
    fresh = {object_uid(o): o for o in listed}
    added, updated, deleted = [], [], []
    for uid, obj in fresh.items():
        old = cached.get(uid)
        if old is None:
            added.append(obj)
        elif resource_version(old) != resource_version(obj):
            updated.append((old, obj))
    for uid, old in cached.items():
        if uid not in fresh:
            deleted.append(old)
    return added, updated, deleted


def server_watch_timeout(preferred: float, silence: float, r: float) -> int:
    """timeoutSeconds for one watch, `r` uniform in [0, 1): `preferred` spread over
    [1x, 2x) so that many watches do not reconnect together, but never more than
    50-75% of the silence bound, so the server ends a healthy watch (its last bytes)
    well before the client could take its quiet for a dead connection."""
    return max(1, int(min(preferred * (1 + r), silence * (0.5 + 0.25 * r))))


class Informer:
    """Keeps `handler` in step with one resource (`path`, e.g. /api/v1/pods).

    `synced` is set once the first list has been delivered. Run `run(stop)` in a
    thread; `stop` ends it promptly (an open watch is closed)."""

    def __init__(self, client: KubeClient, path: str, handler: Handler, *,
                 name: str = "", page_size: int = 500, watch_timeout: float = 300.0,
                 backoff: Backoff | None = None,
                 on_error: Callable[[ApiError], None] | None = None,
                 on_skip: Callable[[str], None] | None = None,
                 optional: bool = False) -> None:
        self.client = client
        self.path = path
        self.name = name or path
        self.handler = handler
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(initial=0.8, maximum=30.0)
        self.on_error = on_error
        self.on_skip = on_skip
        # An API a server may not serve (a disabled group): a 404 on the list counts
        # as an empty list, so the informers waiting for it do not wait forever.
        self.optional = optional
        self.absent = False  # the last list found the resource not served
        self._skipped: dict[str, str] = {}  # uid/key -> problem last logged
        self.synced = threading.Event()
        self.resource_version = ""
        self.cache: dict[str, Obj] = {}  # by uid (`object_uid`)
        self._uid_of: dict[str, str] = {}  # object key (namespace/name) -> uid
        self.relists = 0
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        # request_relist() counts up `_relist_wanted`; a list that started when it was
        # N and completed sets `_listed_gen` to N.
        self._relist_wanted = 0
        self._listed_gen = 0
        self._wake = threading.Event()  # ends the wait between lists of an absent API

    # -- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        need_list = True
        while not stop.is_set():
            wanted = self._relist_wanted
            listing = False
            try:
                if need_list or wanted > self._listed_gen:
                    listing = True
                    self._list()
                    listing = need_list = False
                    self.absent = False
                    self._listed_gen = wanted
                    self.synced.set()
                self._watch(stop)
                self.backoff.reset()
            except ApiError as exc:
                if stop.is_set():
                    break
                if exc.status == 410:
                    log.info("%s: resourceVersion %s expired; re-listing", self.name,
                             self.resource_version)
                    need_list = True
                    continue
                if exc.status == 404 and self.optional and listing:
                    # As fresh as a list of it can be: a relist asked for is answered.
                    self._listed_gen = max(self._listed_gen, wanted)
                    need_list = True
                    self._not_served(stop)
                    continue
                if isinstance(exc, BadWatchEvent):
                    self._count_skip(SKIP_BAD_WATCH_LINE)
                # At least the server's Retry-After (a 429 or 5xx), bounded.
                delay = self.backoff.next_delay(exc.retry_after if exc.transient else None)
                log.warning("%s: %s %s failed (attempt %d): %s; retrying in %.1fs",
                            self.name, "list" if need_list else "watch", self.path,
                            self.backoff.attempts, exc, delay)
                if self.on_error is not None:
                    self.on_error(exc)
                if exc.status in (401, 403, 404):
                    # Credentials or RBAC changed, or the API is gone: the cache may be
                    # stale, so start over with a list.
                    need_list = True
                stop.wait(delay)

    def _not_served(self, stop: threading.Event) -> None:
        """The list of an optional resource answered 404: the server does not serve it
        (its API group is off). Synced as empty the first time, what was listed before
        kept (an API that went away for a moment must not look like every object
        deleted); listed again after the backoff, which grows to its maximum, so the
        informer picks the resource up once it is served. Logged once per absence and
        not counted as a watch error: nothing is broken."""
        if not self.absent:
            self.absent = True
            log.warning("%s: the API server does not serve %s; %s until it does",
                        self.name, self.path, "keeping what was listed"
                        if self.synced.is_set() else "taken as empty")
        self.synced.set()
        # Woken early by a relist asked for (a new leader's), which this answers at once.
        deadline = time.monotonic() + self.backoff.next_delay(None)
        while not stop.is_set() and not self._wake.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            stop.wait(min(left, 0.25))
        self._wake.clear()

    def stop(self) -> None:
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.interrupt()

    def request_relist(self) -> int:
        """Ask for a fresh list (the open watch is interrupted for it); returns a token
        for `listed_since`. The list is a consistent read: it starts after this call,
        so it shows at least everything written before it."""
        with self._lock:
            self._relist_wanted += 1
            token = self._relist_wanted
            stream = self._stream
        self._wake.set()
        if stream is not None:
            stream.interrupt()
        return token

    @property
    def watching(self) -> bool:
        """Whether a watch stream is open (its response began): only then can
        `request_relist` interrupt it at once. A watch request still waiting for its
        response ends at the silence bound at the latest."""
        return self._stream is not None

    def listed_since(self, token: int) -> bool:
        """Whether a list that started after `request_relist()` returned `token` has
        been delivered."""
        return self._listed_gen >= token

    # -- list -------------------------------------------------------------------------

    def _list(self) -> None:
        items: list[Obj] = []
        token = ""
        rv = ""
        while True:
            query: dict[str, Any] = {"limit": self.page_size}
            if token:
                query["continue"] = token
            try:
                page = self.client.request("GET", self.path, query=query)
            except ApiError as exc:
                if exc.status == 410 and token:
                    # The continue token expired mid-list: start the list again.
                    items, token = [], ""
                    continue
                raise
            for obj in page.get("items") or []:
                if self._usable(obj, "listed"):
                    items.append(obj)
                elif (known := self._cached_version(obj)) is not None:
                    # Valid before: keep what we knew rather than report it deleted.
                    items.append(known)
            meta = page.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                break
        kind, api_version = _item_kind(self.path), _item_api_version(self.path)
        for obj in items:
            # List items carry no kind; the decoders want one.
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
        added, updated, deleted = diff_relist(self.cache, items)
        self.relists += 1
        self.cache = {object_uid(o): o for o in items}
        self._uid_of = {object_key(o): object_uid(o) for o in items}
        self.resource_version = rv
        log.info("%s: listed %d objects at resourceVersion %s", self.name, len(items), rv)
        # Deletes first: a name re-created under a new uid leaves before it comes back.
        for obj in deleted:
            self._deliver("delete", obj)
        for obj in added:
            self._deliver("add", obj)
        for old, new in updated:
            self._deliver("update", new, old)

    # -- watch ------------------------------------------------------------------------

    def _watch(self, stop: threading.Event) -> None:
        timeout = server_watch_timeout(self.watch_timeout,
                                       self.client.settings.watch_silence, random.random())
        query = {"watch": True, "resourceVersion": self.resource_version,
                 "allowWatchBookmarks": True, "timeoutSeconds": timeout}
        # Each read waits at most the client's silence bound: the server ends a
        # healthy watch sooner (see server_watch_timeout). The backoff is reset only
        # once a good event arrives (a stream of garbage keeps backing off).
        stream = self.client.stream(self.path, query=query)
        opened = time.monotonic()
        events = 0
        with self._lock:
            self._stream = stream
            relist = self._relist_wanted > self._listed_gen
        try:
            if stop.is_set() or relist:
                return
            for event in stream.events():
                if stop.is_set():
                    return
                self._apply(event)
                events += 1
                if events == 1:
                    # A working stream: the next failure backs off from the start
                    # again. Not on connect alone: a server that answers every watch
                    # with garbage must see the delays grow.
                    self.backoff.reset()
            if events == 0 and not stop.is_set() \
                    and time.monotonic() - opened < SHORT_WATCH:
                raise ApiError(0, "ShortWatch", "the watch ended at once without an event")
        finally:
            with self._lock:
                self._stream = None
            stream.close()

    def _apply(self, event: Obj) -> None:
        etype = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise BadWatchEvent(f"{etype} event without an object")
        if etype == "ERROR":
            code = obj.get("code")
            status = code if isinstance(code, int) else 0
            # A Status may carry details.retryAfterSeconds (a throttled watch).
            raise ApiError(status, str(obj.get("reason", "")), str(obj.get("message", "")),
                           obj, retry_after_of(status, None, obj))
        rv = resource_version(obj)
        if etype == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED") or not self._usable(
                obj, f"watch {etype}", check_labels=etype != "DELETED"):
            if etype not in ("ADDED", "MODIFIED", "DELETED"):
                self._skip(obj, SKIP_INVALID, f"unknown watch event type {etype!r}",
                           "watch")
            # Skipped (the cached version, if any, stays); the stream goes on from here.
            if rv:
                self.resource_version = rv
            return
        key, uid = object_key(obj), object_uid(obj)
        if log.isEnabledFor(logging.DEBUG):  # -v 4; the check keeps the hot path cheap
            log.debug("%s: watch event %s %s %s (resourceVersion %s)", self.name, etype,
                      obj.get("kind") or _item_kind(self.path), key, rv)
        if etype == "ADDED" or etype == "MODIFIED":
            replaced = self._uid_of.get(key)
            if replaced is not None and replaced != uid:
                # Another object under this name: the old one is gone, even if its
                # DELETED never reached us.
                gone = self.cache.pop(replaced, None)
                if gone is not None:
                    self._deliver("delete", gone)
            self._uid_of[key] = uid
            old = self.cache.get(uid)
            self.cache[uid] = obj
            if old is None:
                self._deliver("add", obj)
            else:
                self._deliver("update", obj, old)
        elif etype == "DELETED":
            if self._uid_of.get(key) == uid:
                del self._uid_of[key]
            if self.cache.pop(uid, None) is not None:
                self._deliver("delete", obj)
            else:
                # Already delivered as replaced (or never seen): a consumer that keys
                # by name (nodes) must not lose the object now under that name.
                log.debug("%s: DELETED of %s (uid %s) not in the cache", self.name, key,
                          uid)
        if rv:
            self.resource_version = rv

    # -- skipped objects ----------------------------------------------------------------

    def _usable(self, obj: Any, source: str, *, check_labels: bool = True) -> bool:
        problem = object_problem(obj, check_labels=check_labels)
        if problem is None:
            if self._skipped and isinstance(obj, dict):
                self._skipped.pop(object_uid(obj), None)
            return True
        self._skip(obj, *problem, source)
        return False

    def _skip(self, obj: Any, reason: str, problem: str, source: str) -> None:
        """One log line per object and problem (a hostile node updated every few
        seconds would flood the log otherwise); the metric counts every skip."""
        self._count_skip(reason)
        ident = object_uid(obj) if object_problem(obj, check_labels=False) is None else ""
        if ident and self._skipped.get(ident) == problem:
            return
        if ident:
            self._skipped[ident] = problem
        log.error("%s: skipping %s %s: %s", self.name, source, _describe(obj), problem)

    def _count_skip(self, reason: str) -> None:
        if self.on_skip is not None:
            try:
                self.on_skip(reason)
            except Exception:  # a metric must not stop the watch
                log.exception("%s: on_skip failed", self.name)

    def _cached_version(self, obj: Any) -> Obj | None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return None
        uid = meta.get("uid")
        if isinstance(uid, str) and uid:
            return self.cache.get(uid)
        return None

    def _deliver(self, what: str, obj: Obj, old: Obj | None = None) -> None:
        # A consumer's bug must not stop the watch: later events would be lost too.
        try:
            if what == "add":
                self.handler.on_add(obj)
            elif what == "update":
                assert old is not None
                self.handler.on_update(old, obj)
            else:
                self.handler.on_delete(obj)
        except Exception:
            log.exception("%s: handler failed on %s of %s", self.name, what, object_key(obj))


_KINDS = {"pods": "Pod", "nodes": "Node", "namespaces": "Namespace", "services": "Service",
          "replicationcontrollers": "ReplicationController", "replicasets": "ReplicaSet",
          "statefulsets": "StatefulSet", "leases": "Lease",
          "persistentvolumes": "PersistentVolume",
          "persistentvolumeclaims": "PersistentVolumeClaim", "storageclasses": "StorageClass",
          "csinodes": "CSINode", "csidrivers": "CSIDriver",
          "csistoragecapacities": "CSIStorageCapacity",
          "volumeattachments": "VolumeAttachment", "deviceclasses": "DeviceClass",
          "resourceslices": "ResourceSlice", "resourceclaims": "ResourceClaim"}


def _item_kind(path: str) -> str:
    return _KINDS.get(path.rstrip("/").rsplit("/", 1)[-1], "")


def _item_api_version(path: str) -> str:
    """`/api/v1/...` -> v1, `/apis/apps/v1/...` -> apps/v1."""
    parts = path.strip("/").split("/")
    if parts[0] == "apis" and len(parts) >= 3:
        return f"{parts[1]}/{parts[2]}"
    return parts[1] if len(parts) > 1 else "v1"
