"""Reusable checks for object validation, each returning `list[Cause]` worded as kube-apiserver words them.

kubectl prints a 422's causes verbatim (`metadata.name: Invalid value: "Foo_bar": a lowercase RFC
1123 subdomain must consist of ...`), so the reasons (FieldValueInvalid, ...), the bodies
(`Invalid value: "x": detail`) and the detail strings follow apimachinery's `field.Error` and
`util/validation` exactly.  A cause's message is the body without the field; the field is the path
from the object root (`spec.containers[0].image`).

The checks never trust types: a `spec` that is a string or a port that is a list yields a cause
naming the field, never an exception.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from apiserver.errors import Cause
from machinery.objects import Obj, get

# ---------------------------------------------------------------------------------------------
# Causes, with apimachinery's bodies


def go_value(value: Any) -> str:
    """A value as `field.Error` prints it: strings quoted (%q), numbers and bools bare, maps Go-style."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(value.items()))
        return f"map[string]string{{{inner}}}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _with_detail(body: str, detail: str) -> str:
    return f"{body}: {detail}" if detail else body


def required(field: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", _with_detail("Required value", detail), field)


def invalid(field: str, value: Any, detail: str = "") -> Cause:
    return Cause("FieldValueInvalid", _with_detail(f"Invalid value: {go_value(value)}", detail), field)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> Cause:
    quoted = ", ".join(json.dumps(s) for s in supported)
    detail = f"supported values: {quoted}" if quoted else ""
    return Cause("FieldValueNotSupported", _with_detail(f"Unsupported value: {go_value(value)}", detail), field)


def duplicate(field: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {go_value(value)}", field)


def not_found(field: str, value: Any) -> Cause:
    return Cause("FieldValueNotFound", f"Not found: {go_value(value)}", field)


def forbidden(field: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", _with_detail("Forbidden", detail), field)


def too_long(field: str, max_bytes: int) -> Cause:
    unit = "byte" if max_bytes == 1 else "bytes"
    return Cause("FieldValueTooLong", f"Too long: may not be more than {max_bytes} {unit}", field)


def too_many(field: str, actual: int, limit: int) -> Cause:
    return Cause("FieldValueTooMany", f"Too many: {actual}: must have at most {limit} items", field)


def immutable(field: str, value: Any) -> Cause:
    return invalid(field, value, "field is immutable")


# ---------------------------------------------------------------------------------------------
# Field paths and defensive access


def child(base: str, name: str) -> str:
    return f"{base}.{name}" if base else name


def index(base: str, i: int) -> str:
    return f"{base}[{i}]"


def key(base: str, k: str) -> str:
    return f"{base}[{k}]"


def as_dict(value: Any, field: str, causes: list[Cause]) -> Obj:
    """The value if it is an object; {} (and a cause) if it is something else; {} if absent."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    causes.append(invalid(field, value, "must be an object"))
    return {}


def as_list(value: Any, field: str, causes: list[Cause]) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    causes.append(invalid(field, value, "must be a list"))
    return []


def as_str(value: Any, field: str, causes: list[Cause]) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    causes.append(invalid(field, value, "must be a string"))
    return ""


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# util/validation: the name and label formats


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"

_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_DNS1035_RE = re.compile(f"^{_DNS1035_FMT}$")
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_CONFIG_KEY_RE = re.compile(f"^{_CONFIG_KEY_FMT}$")

_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _LABEL_RE.match(value):
        if _SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1035_RE.match(value):
        errs.append(_regex_error(_DNS1035_MSG, _DNS1035_FMT, "my-name", "abc-123"))
    return errs


def _qualified_name_problems(value: str) -> list[str]:
    """A label or annotation key: `name` or `prefix/name`, the prefix a DNS subdomain."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def _label_value_problems(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_config_key(value: str) -> list[str]:
    """A ConfigMap or Secret data key: it becomes a file name when the map is mounted."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_KEY_RE.match(value):
        errs.append(_regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_port_name(value: str) -> list[str]:
    """An IANA service name, as container and service port names must be."""
    errs: list[str] = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not re.match(r"^[-a-z0-9]+$", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


# ---------------------------------------------------------------------------------------------
# Object names: which format a kind's names follow.  (name, is_prefix) -> details


NameFunc = Callable[[str, bool], list[str]]


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-' (the random suffix follows): check it as if it did not."""
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """RBAC objects: any name that is safe as one URL path segment."""
    errs: list[str] = []
    if not prefix:
        errs.extend(f"may not be '{bad}'" for bad in (".", "..") if name == bad)
    errs.extend(f"may not contain '{bad}'" for bad in ("/", "%") if bad in name)
    return errs


# ---------------------------------------------------------------------------------------------
# Object metadata


ANNOTATIONS_MAX_BYTES = 256 * 1024


def validate_labels(labels: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    for k, v in as_dict(labels, field, causes).items():
        causes.extend(invalid(field, k, msg) for msg in is_qualified_name(k))
        if not isinstance(v, str):
            causes.append(invalid(key(field, k), v, "must be a string"))
            continue
        causes.extend(invalid(field, v, msg) for msg in is_label_value(v))
    return causes


def validate_annotations(annotations: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    total = 0
    for k, v in as_dict(annotations, field, causes).items():
        causes.extend(invalid(field, k, msg) for msg in is_qualified_name(k.lower()))
        if not isinstance(v, str):
            causes.append(invalid(key(field, k), v, "must be a string"))
            continue
        total += len(k.encode()) + len(v.encode())
    if total > ANNOTATIONS_MAX_BYTES:
        causes.append(too_long(field, ANNOTATIONS_MAX_BYTES))
    return causes


def _validate_owner_references(refs: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, ref in enumerate(as_list(refs, field, causes)):
        here = index(field, i)
        ref = as_dict(ref, here, causes)
        for name, what in (("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(name):
                causes.append(invalid(child(here, name), ref.get(name, ""), f"{what} must not be empty"))
    return causes


def validate_object_meta(obj: Obj, *, namespaced: bool, name_fn: NameFunc, old: Obj | None = None) -> list[Cause]:
    """ObjectMeta rules for every kind: a name (or generateName) in the kind's format, a namespace
    exactly when the kind is namespaced, well-formed labels, annotations, finalizers and owner
    references; and on update, the identity fields unchanged."""
    causes: list[Cause] = []
    meta = as_dict(obj.get("metadata"), "metadata", causes)
    name = as_str(meta.get("name"), "metadata.name", causes)
    generate = as_str(meta.get("generateName"), "metadata.generateName", causes)
    if generate:
        causes.extend(invalid("metadata.generateName", generate, m) for m in name_fn(generate, True))
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(invalid("metadata.name", name, m) for m in name_fn(name, False))
    namespace = as_str(meta.get("namespace"), "metadata.namespace", causes)
    if namespaced:
        if not namespace:
            causes.append(required("metadata.namespace"))
        else:
            causes.extend(invalid("metadata.namespace", namespace, m) for m in is_dns1123_label(namespace))
    elif namespace:
        causes.append(forbidden("metadata.namespace", "not allowed on this type"))
    causes += validate_labels(meta.get("labels"), "metadata.labels")
    causes += validate_annotations(meta.get("annotations"), "metadata.annotations")
    for i, fin in enumerate(as_list(meta.get("finalizers"), "metadata.finalizers", causes)):
        here = index("metadata.finalizers", i)
        if not isinstance(fin, str):
            causes.append(invalid(here, fin, "must be a string"))
        else:
            causes.extend(invalid(here, fin, m) for m in is_qualified_name(fin))
    causes += _validate_owner_references(meta.get("ownerReferences"), "metadata.ownerReferences")
    if old is not None:
        old_meta = old.get("metadata")
        old_meta = old_meta if isinstance(old_meta, dict) else {}
        for f in ("name", "namespace", "uid", "creationTimestamp"):
            if f in old_meta and meta.get(f) != old_meta.get(f):
                causes.append(immutable(f"metadata.{f}", meta.get(f)))
    return causes


# ---------------------------------------------------------------------------------------------
# Values


def validate_required(obj: Any, path: str) -> list[Cause]:
    """A dotted path that must hold something other than None, "", [] or {}."""
    value = get(obj, path)
    return [required(path)] if value in (None, "", [], {}) else []


def validate_enum(value: Any, field: str, supported: Iterable[str], *, optional: bool = True) -> list[Cause]:
    """`Unsupported value: "X": supported values: "A", "B"`; a missing value is fine when optional,
    `Required value` otherwise."""
    allowed = tuple(supported)
    if value is None or value == "":
        return [] if optional else [required(field)]
    return [] if value in allowed else [not_supported(field, value, allowed)]


def validate_non_negative(value: Any, field: str) -> list[Cause]:
    if value is None:
        return []
    if not is_int(value):
        return [invalid(field, value, "must be an integer")]
    return [invalid(field, value, "must be greater than or equal to 0")] if value < 0 else []


def validate_positive(value: Any, field: str) -> list[Cause]:
    if value is None:
        return []
    if not is_int(value):
        return [invalid(field, value, "must be an integer")]
    return [invalid(field, value, "must be greater than 0")] if value <= 0 else []


def validate_port(value: Any, field: str, *, optional: bool = False) -> list[Cause]:
    if value is None or value == 0:
        return [] if optional else [required(field)]
    if not is_int(value):
        return [invalid(field, value, "must be an integer")]
    return [] if 1 <= value <= 65535 else [invalid(field, value, "must be between 1 and 65535, inclusive")]


def validate_immutable(new: Obj, old: Obj | None, path: str) -> list[Cause]:
    """`field is immutable` when an update changes the value at `path`."""
    if old is None:
        return []
    value = get(new, path)
    return [immutable(path, value)] if value != get(old, path) else []


def validate_unique(values: Iterable[tuple[str, Any]]) -> list[Cause]:
    """Duplicate causes for (field, value) pairs whose value was already seen."""
    seen: set[Any] = set()
    causes: list[Cause] = []
    for field, value in values:
        if isinstance(value, str | int) and value in seen:
            causes.append(duplicate(field, value))
        seen.add(value)
    return causes


def map_of_strings(value: Any, field: str, causes: list[Cause]) -> Mapping[str, str]:
    """A string-to-string map (data, selector...), with a cause per non-string value."""
    result: dict[str, str] = {}
    for k, v in as_dict(value, field, causes).items():
        if isinstance(v, str):
            result[k] = v
        else:
            causes.append(invalid(key(field, k), v, "must be a string"))
    return result


# Label keys and values repeat across objects: checking each distinct one once takes a hot
# spot off every create (bounded, so hostile keys only churn the cache).
_cached_qualified = functools.lru_cache(maxsize=8192)(lambda value: tuple(_qualified_name_problems(value)))
_cached_label_value = functools.lru_cache(maxsize=8192)(lambda value: tuple(_label_value_problems(value)))


def is_qualified_name(value: str) -> list[str]:
    """Why `value` is not a qualified name (`prefix/name`), or nothing."""
    return list(_cached_qualified(value))


def is_label_value(value: str) -> list[str]:
    """Why `value` is not a label value, or nothing."""
    return list(_cached_label_value(value))
