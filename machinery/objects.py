"""API objects as the JSON both sides hold, and the tolerant readers of their fields.

An object here is the decoded JSON document (`Obj`), not a typed class: the apiserver stores and
serves kinds it learns at run time (CustomResourceDefinitions) through the same path as built-in
ones, and the components hold what their informers decoded.  What both sides then do again and
again is read a field that may be absent or, in an object nothing has validated yet (a request
body, a patch's result before validation), of the wrong type.  These readers never raise: a
missing or mistyped field reads as the neutral value of its type ("", 0, {}, []), which is what
kube's typed structs give the Go code for a zero field.  They were written once per module before
(`_meta`, `_labels`, `_dict`, ...), each with its own idea of which neutral value and which type
test; here they are written once.

Paths are dotted field names (`"spec.template.metadata"`); a list on the way reads as absent.
"""

# no `from __future__ import annotations`: `annotations` below is an accessor, and every hint
# here evaluates at run time on 3.11 anyway
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
"""An API object, or any JSON object inside one, as decoded."""


def as_dict(value: Any) -> Obj:
    """`value` when it is a JSON object, else {} (absent and mistyped read alike)."""
    return value if isinstance(value, dict) else {}


def get(obj: Any, path: str) -> Any:
    """The value at a dotted path, None when any step is absent or not an object."""
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def text(obj: Any, path: str) -> str:
    """The string at `path`, "" when absent or not a string."""
    value = get(obj, path)
    return value if isinstance(value, str) else ""


def number(obj: Any, path: str) -> int:
    """The integer at `path`, 0 when absent or not an integer (a JSON true is not 1)."""
    value = get(obj, path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def items(obj: Any, path: str) -> list[Any]:
    """The list at `path`, [] when absent or not a list."""
    value = get(obj, path)
    return value if isinstance(value, list) else []


def dicts(obj: Any, path: str) -> list[Obj]:
    """The objects in the list at `path` (other entries are passed over)."""
    return [x for x in items(obj, path) if isinstance(x, dict)]


def mapping(obj: Any, path: str) -> Obj:
    """The object at `path`, {} when absent or not an object."""
    return as_dict(get(obj, path))


# -- ObjectMeta ---------------------------------------------------------------------------------


def metadata(obj: Mapping[str, Any] | None) -> Obj:
    """The object's metadata (the dict itself, not a copy), {} when it has none."""
    return as_dict(obj.get("metadata")) if isinstance(obj, Mapping) else {}


def spec(obj: Mapping[str, Any] | None) -> Obj:
    """The object's spec (the dict itself), {} when it has none."""
    return as_dict(obj.get("spec")) if isinstance(obj, Mapping) else {}


def status(obj: Mapping[str, Any] | None) -> Obj:
    """The object's status (the dict itself), {} when it has none."""
    return as_dict(obj.get("status")) if isinstance(obj, Mapping) else {}


def name(obj: Mapping[str, Any] | None) -> str:
    return text(metadata(obj), "name")


def namespace(obj: Mapping[str, Any] | None) -> str:
    """The namespace, "" for a cluster-scoped object (or one not yet defaulted)."""
    return text(metadata(obj), "namespace")


def uid(obj: Mapping[str, Any] | None) -> str:
    return text(metadata(obj), "uid")


def resource_version(obj: Mapping[str, Any] | None) -> str:
    """The resourceVersion as written: opaque to clients, so a string, "" when unset."""
    return text(metadata(obj), "resourceVersion")


def labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """A copy of the labels: a reader may add to it without writing into the object."""
    return dict(mapping(metadata(obj), "labels"))


def annotations(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """A copy of the annotations, as `labels`."""
    return dict(mapping(metadata(obj), "annotations"))


def owner_references(obj: Mapping[str, Any] | None) -> list[Obj]:
    """The ownerReferences that are objects, in their order."""
    return dicts(metadata(obj), "ownerReferences")


def controller_ref(obj: Mapping[str, Any] | None) -> Obj | None:
    """The owner reference marked `controller` (metav1.GetControllerOf): at most one owner
    manages an object, and controllers adopt and release only through it."""
    for ref in owner_references(obj):
        if ref.get("controller"):
            return ref
    return None
