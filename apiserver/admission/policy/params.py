"""The params a binding gives its policy: objects of the policy's `paramKind`, found by the
binding's `paramRef` (by name, or every object its label selector matches), as kube's
CollectParams does: a namespaced kind is looked up in `paramRef.namespace`, else the
request's namespace (a cluster-scoped request with neither is a configuration error); no
paramKind, or no paramRef, evaluates once with `params` null; nothing found evaluates
nothing, unless `parameterNotFoundAction: Deny` makes it a configuration error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from apiserver.admission.policy.binding import ParamRef
from apiserver.admission.policy.compiled import ParamKind
from machinery.objects import Obj, labels


class ParamSource(Protocol):
    """What params are read from (a watch cache: `Cacher` has these)."""

    def objects(self) -> Iterator[Obj]: ...

    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


# (apiVersion, kind) -> (source, namespaced) of the served resource of that kind, or None
ParamLookup = Callable[[str, str], tuple[ParamSource, bool] | None]


class ParamError(Exception):
    """A binding whose params cannot be found as configured (the failure policy decides)."""


def _namespace(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("namespace", "")) if isinstance(meta, dict) else ""


def collect(
    kind: ParamKind | None, ref: ParamRef | None, lookup: ParamLookup, namespace: str | None
) -> list[Obj | None]:
    """The params to evaluate with, one evaluation each; raises ParamError."""
    if kind is None or ref is None:
        return [None]
    found = lookup(kind.api_version, kind.kind)
    if found is None:
        raise ParamError(f"paramKind kind `{kind.api_version}, Kind={kind.kind}` not known")
    source, namespaced = found
    where: str | None = None
    if namespaced:
        where = ref.namespace or namespace or None
        if where is None:
            raise ParamError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
    elif ref.namespace:
        raise ParamError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    params: list[Obj | None]
    if ref.name:
        obj = source.get_object(where, ref.name)
        params = [] if obj is None else [obj]
    else:
        params = [
            o
            for o in source.objects()
            if (where is None or _namespace(o) == where)
            and ref.selector is not None
            and ref.selector.matches(labels(o))
        ]
    if not params and ref.deny_when_missing:
        raise ParamError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return params
