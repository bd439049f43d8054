"""What a resource is, declared: one `ResourceDef` per resource, one file per resource.

The generic registry (`apiserver/registry/`) does every verb for every resource; what
differs between pods and deployments is only what is declared here: where it lives (group,
version, scope), what it is called (kind, plural, singular, short names, categories), its
subresources and the handler object serving each (`apiserver/http/subresources/`), how a new
object is defaulted and validated, how it is stored and deleted, which fields a field
selector may name, and the columns `kubectl get` shows.  Every hook is a typed field, so a
definition is plain data that can also be built at run time (from a CustomResourceDefinition).
Adding a resource is adding one module under `apiserver/resources/` that defines `RESOURCE`
(or `RESOURCES`); `catalog()` finds it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apiserver.errors import Cause
from machinery.objects import Obj

if TYPE_CHECKING:
    from apiserver.http.subresources.handler import SubresourceHandler


ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Column:
    """A Table column (metav1.TableColumnDefinition).  priority 0 = always shown, 1 = `-o wide` only."""

    name: str
    type: str = "string"  # string, integer, number, boolean, date
    format: str = ""  # "name" for the first column
    description: str = ""
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


@dataclass(frozen=True, slots=True)
class Subresource:
    """`pods/status`, `deployments/scale`, `pods/eviction`...: what discovery lists, and the
    object that serves it (kube's StatusREST, ScaleREST, EvictionREST...), so that the HTTP
    layer dispatches to `handler` and never branches on a subresource's or a resource's name."""

    name: str  # "status", "scale", "binding", "eviction", "log"
    kind: str  # the kind it takes and returns: Pod, Scale, Binding, Eviction
    group: str | None = None  # None = the parent's group/version
    version: str | None = None
    # the verbs discovery lists; a request for any other is refused (405) before `handler`
    verbs: tuple[str, ...] = ("get", "patch", "update")
    handler: SubresourceHandler = field(kw_only=True)


# now: seconds since the epoch (an injected clock, so tables are testable)
RowFunc = Callable[[Obj, float], list[Any]]
DefaultFunc = Callable[[Obj], None]  # mutates a new or updated object in place
# (new, old or None for a create) -> causes; paths are relative to the object root ("spec.replicas")
ValidateFunc = Callable[[Obj, Obj | None], list[Cause]]
# (new, old): what kube's strategy PrepareForUpdate does beyond system metadata, after defaulting
# and before validation (a Service's fields that go with its old type are dropped)
PrepareUpdateFunc = Callable[[Obj, Obj], None]
FieldsFunc = Callable[[Obj], dict[str, str]]  # selectable fields besides metadata.name/namespace
ConvertFunc = Callable[[Obj], Obj]  # an object in one shape -> the same object in another
# objects in one shape -> the same objects in another, by a call out (a CRD's conversion webhook)
AsyncConvertFunc = Callable[[list[Obj]], Awaitable[list[Obj]]]
# an object -> the conditions of its Table row (kube marks finished pods' rows "Completed")
RowConditionsFunc = Callable[[Obj], list[dict[str, str]]]


def _no_default(obj: Obj) -> None:
    return None


def _no_validation(new: Obj, old: Obj | None) -> list[Cause]:
    return []


def _no_fields(obj: Obj) -> dict[str, str]:
    return {}


@dataclass(frozen=True, eq=False)  # one object per resource: hashed by identity
class ResourceDef:
    group: str  # "" for core
    version: str
    kind: str
    plural: str  # the resource name in URLs: "pods"
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[Subresource, ...] = ()
    # metadata.generation goes up by one when anything outside metadata and status changes
    bumps_generation: bool = True
    default: DefaultFunc = _no_default
    validate: ValidateFunc = _no_validation
    prepare_update: PrepareUpdateFunc | None = None
    fields: FieldsFunc = _no_fields
    field_selectors: tuple[str, ...] = ()  # the names `fields` returns, for error messages
    columns: tuple[Column, ...] = ()  # after Name (and before Age when `age_last`)
    row: RowFunc | None = None  # cells for `columns`; Name and Age are added by the Table writer
    # True: the Table writer puts Age after the last priority-0 column (before the `-o wide` ones),
    # kubectl's layout for most kinds.  False: the writer adds no Age; a kind that shows one
    # elsewhere (nodes: Name, Status, Roles, Age, Version) has it in `columns` and `row`.
    age_last: bool = True
    # True: the writer puts Name first.  False: `columns`/`row` hold every column, Name included
    # wherever the kind shows it (core events: Last Seen, Type, Reason, Object, ... Name last, wide).
    name_column: bool = True
    row_conditions: RowConditionsFunc | None = None
    # Storage shape.  Two groups may serve one stored resource (events.k8s.io/v1 Event is
    # core/v1 Event, stored once, as Kubernetes does): `store_as` names the stored resource and
    # the conversions map this resource's shape to the stored one and back.
    store_as: str | None = None
    to_storage: ConvertFunc | None = None
    from_storage: ConvertFunc | None = None
    # The same, when converting takes a call (a CRD whose conversion strategy is Webhook): the
    # registry and the watch cache await these around the sync ones (identity for such kinds).
    convert_for_storage: AsyncConvertFunc | None = None
    convert_for_serving: AsyncConvertFunc | None = None
    # Deletion.  graceful: a DELETE sets deletionTimestamp and a grace period (pods) instead of
    # removing at once.  spec_finalizers: spec.finalizers hold the object until they are
    # emptied through /finalize (namespaces).  return_deleted: DELETE answers with the object
    # (pods, services) instead of a Status.
    graceful: bool = False
    spec_finalizers: bool = False
    return_deleted: bool = False
    # Not stored at all: a create is answered by the handler registered under this name
    # (access reviews, SelfSubjectReview); such a resource has no registry and no watch cache.
    virtual: str | None = None
    # Not stored either: get and list are answered by the reader registered under this name
    # (metrics.k8s.io's NodeMetrics and PodMetrics, computed from the kubelets' usage).
    computed: str | None = None
    # The status every object carries, as kube's JSON always has one: a Go type whose `Status`
    # is a struct (not a pointer) encodes it even when empty (`omitempty` does not omit a
    # struct), with its members that are not `omitempty` at their zero value (ReplicaSet:
    # `{"replicas": 0}`).  None: the kind has no status (ConfigMap) or a pointer one.  Clients
    # generated from the Go types read `d.status.observed_generation` right after a create.
    empty_status: Mapping[str, Any] | None = None
    # The OpenAPI schema of a kind Kubernetes does not publish one for (a CRD version's
    # openAPIV3Schema): what /openapi/v3 serves for it, so `kubectl explain` reads it.
    openapi_schema: Mapping[str, Any] | None = None

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def store_name(self) -> str:
        """The `{resource}` of `/registry/{resource}/...`: the plural, unless two groups share one stored
        resource (events.k8s.io/v1 Event is core/v1 Event, stored once, as Kubernetes does)."""
        return self.store_as or self.plural

    @property
    def status_subresource(self) -> bool:
        """Declaring /status makes status written only through it: a write of the main resource
        keeps the stored status, and a write of /status keeps everything but status (and metadata
        labels/annotations), as a CRD's `subresources.status` does."""
        return self.subresource("status") is not None

    def with_status(self, obj: Obj) -> Obj:
        """`obj` (changed in place) carrying `empty_status` under what it already has: every
        write and every read goes through here, so objects stored before a kind declared its
        status read as kube's do.  A status that is not an object is left to validation."""
        if self.empty_status is not None:
            if obj.get("status") is None:
                obj["status"] = {}
            _fill(obj["status"], self.empty_status)
        return obj

    def read_view(self, obj: Obj) -> Obj:
        """A stored object (decoded) as this resource serves it: its shape, then its status."""
        convert = self.from_storage
        return self.with_status(convert(obj) if convert is not None else obj)

    def subresource(self, name: str) -> Subresource | None:
        """The declared subresource called `name`, None when the resource has none by that name."""
        return next((s for s in self.subresources if s.name == name), None)

    def key_prefix(self, namespace: str | None = None) -> str:
        """`/registry/pods/` (all namespaces), `/registry/pods/default/`, `/registry/nodes/`."""
        if self.namespaced and namespace:
            return f"/registry/{self.store_name}/{namespace}/"
        return f"/registry/{self.store_name}/"

    def key(self, namespace: str | None, name: str) -> str:
        return f"{self.key_prefix(namespace if self.namespaced else None)}{name}"


def _fill(into: Any, defaults: Mapping[str, Any]) -> None:
    """Each member of `defaults` that `into` lacks (or holds as null), recursively."""
    if not isinstance(into, dict):
        return
    for key, value in defaults.items():
        if into.get(key) is None:
            into[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping):
            _fill(into[key], value)


def object_fields(resource: ResourceDef, obj: dict[str, Any]) -> dict[str, str]:
    """The fields a field selector sees: metadata.name, metadata.namespace (namespaced kinds)
    and whatever the resource declares."""
    meta = obj.get("metadata") or {}
    fields = {"metadata.name": str(meta.get("name") or "")}
    if resource.namespaced:
        fields["metadata.namespace"] = str(meta.get("namespace") or "")
    return fields | resource.fields(obj)
