"""Query parameters, checked at the edge: a bad value is 400 (or, for a write's options, kube's 422)
naming the parameter."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from apiserver import errors
from apiserver.resources.base import ResourceDef
from machinery.selectors import FieldSelector, LabelSelector, SelectorError

MAX_TIMEOUT_SECONDS = 3600


def _int(query: Mapping[str, str], name: str, default: int, lo: int = 0, hi: int = 2**31 - 1) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"{name}: invalid value {text!r}: must be an integer") from None
    if not lo <= value <= hi:
        raise errors.bad_request(f"{name}: invalid value {value}: must be between {lo} and {hi}")
    return value


def query_bool(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter as kube reads it (absent: false); 400 names a bad one."""
    text = query.get(name, "")
    if text in ("", "false", "0", "False"):
        return False
    if text in ("true", "1", "True"):
        return True
    raise errors.bad_request(f"{name}: invalid value {text!r}: must be true or false")


def resource_version(query: Mapping[str, str]) -> str:
    rv = query.get("resourceVersion", "")
    if rv and not (rv.isascii() and rv.isdigit() and len(rv) <= 19):
        raise errors.bad_request(f"resourceVersion: Invalid value: {rv!r}: must be a non-negative integer")
    return rv


@dataclass(frozen=True, slots=True)
class ListParams:
    labels: LabelSelector | None
    fields: FieldSelector | None
    resource_version: str
    match: str
    limit: int
    continue_token: str
    watch: bool
    allow_bookmarks: bool
    send_initial_events: bool | None
    timeout_seconds: int
    include_object: str


def list_params(resource: ResourceDef, query: Mapping[str, str]) -> ListParams:
    try:
        labels = LabelSelector.parse(query.get("labelSelector", "")) if query.get("labelSelector") else None
    except SelectorError as e:
        raise errors.bad_request(f"unable to parse requirement: labelSelector: {e}") from None
    try:
        fields = FieldSelector.parse(query.get("fieldSelector", "")) if query.get("fieldSelector") else None
    except SelectorError as e:
        raise errors.bad_request(f"fieldSelector: {e}") from None
    if fields is not None:
        allowed = {"metadata.name", *resource.field_selectors}
        if resource.namespaced:
            allowed.add("metadata.namespace")
        for name in sorted(fields.field_names()):
            if name not in allowed:
                raise errors.bad_request(f"field label not supported: {name}")
    rv = resource_version(query)
    match = query.get("resourceVersionMatch", "")
    if match not in ("", "NotOlderThan", "Exact"):
        raise errors.bad_request(
            f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"'
        )
    watch = query_bool(query, "watch")
    sie_text = query.get("sendInitialEvents")
    send_initial = None if sie_text is None else query_bool(query, "sendInitialEvents")
    if watch:
        # kube's rules for watches: the match only goes with sendInitialEvents, and must be NotOlderThan
        if send_initial is not None and match != "NotOlderThan":
            raise errors.bad_request('sendInitialEvents requires resourceVersionMatch "NotOlderThan"')
        if match and send_initial is None:
            raise errors.bad_request("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
    else:
        if send_initial is not None:
            raise errors.bad_request("sendInitialEvents is forbidden for list")
        if match and not rv:
            raise errors.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match == "Exact" and rv == "0":
        raise errors.bad_request('resourceVersionMatch "Exact" is forbidden for resourceVersion "0"')
    cont = query.get("continue", "")
    if cont and rv not in ("",):
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    include = query.get("includeObject", "Metadata") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise errors.bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: "None", "Metadata", "Object"'
        )
    return ListParams(
        labels=labels,
        fields=fields,
        resource_version=rv,
        match=match,
        limit=_int(query, "limit", 0),
        continue_token=cont,
        watch=watch,
        allow_bookmarks=query_bool(query, "allowWatchBookmarks"),
        send_initial_events=send_initial,
        timeout_seconds=_int(query, "timeoutSeconds", 0, 0, MAX_TIMEOUT_SECONDS),
        include_object=include,
    )


@dataclass(frozen=True, slots=True)
class WriteParams:
    dry_run: bool
    field_manager: str
    field_validation: str
    force: bool


def write_params(query: Mapping[str, str], user_agent: str, options: str = "CreateOptions") -> WriteParams:
    """The options of a create, update or patch (`options` names which, for kube's 422)."""
    dry = query.get("dryRun", "")
    if dry not in ("", "All"):
        raise errors.bad_request(f'dryRun: Unsupported value: "{dry}": supported values: "All"')
    # absent means Warn (kube >= 1.27); a bad value is kube's ValidateFieldValidation 422, whose
    # supported values list the empty string too
    validation = query.get("fieldValidation", "") or "Warn"
    if validation not in ("Strict", "Warn", "Ignore"):
        cause = errors.Cause(
            "FieldValueNotSupported",
            f'Unsupported value: {json.dumps(validation)}: supported values: "", "Ignore", "Strict", "Warn"',
            "fieldValidation",
        )
        raise errors.invalid(options, "", [cause], "meta.k8s.io")
    manager = query.get("fieldManager", "")
    if len(manager) > 128:
        raise errors.bad_request("fieldManager: Too long: must have at most 128 bytes")
    if not manager:
        # kube names an unnamed manager after the client's user agent, up to the first '/'
        manager = (user_agent.split("/", 1)[0] or "unknown")[:128]
    return WriteParams(dry == "All", manager, validation, query_bool(query, "force"))
