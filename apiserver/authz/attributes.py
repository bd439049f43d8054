"""What a request asks to do, in the terms authorizers decide on (kube's authorizer.Attributes).

Built from the HTTP method, path and query alone, before the body is read: authorization
runs before decoding, so a request that may not be made is refused without parsing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apiserver.auth.user import User
from apiserver.http.requestinfo import ResourcePath, parse_resource_path

_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True, slots=True)
class Attributes:
    user: User
    verb: str  # get list watch create update patch delete deletecollection (resource) | get post ... (path)
    resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    # the value the request's field selector requires for spec.nodeName, if any (the Node
    # authorizer lets a kubelet list and watch the pods bound to it, and only those)
    node_name_selector: str | None = None

    @property
    def combined_resource(self) -> str:
        """`pods` or `pods/status`: the form RBAC rules name."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _is_true(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _selector_value(selector: str, field: str) -> str | None:
    """The value `field=value` / `field==value` requires in a simple field selector, else None.

    Only plain terms count (a term with `!=` or escapes never grants anything more)."""
    for term in selector.split(","):
        for op in ("==", "="):
            name, sep, value = term.partition(op)
            if sep and name.strip() == field and "!" not in name and "\\" not in value:
                return value.strip()
    return None


def request_attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request (a non-resource request for any path that is not a resource)."""
    target = parse_resource_path(path)
    if target is None:
        return Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
    return resource_attributes(user, method, target, query)


def resource_attributes(user: User, method: str, target: ResourcePath, query: Mapping[str, str]) -> Attributes:
    name = target.name or ""
    namespace = target.namespace or ""
    if target.group == "" and target.resource == "namespaces" and name:
        namespace = name  # the namespace object is inside itself, as kube decides it
    verb: str
    if method in ("GET", "HEAD"):
        if _is_true(query.get("watch")):
            verb = "watch"
        elif target.name is None:
            verb = "list"
        else:
            verb = "get"
    elif method == "DELETE":
        verb = "delete" if target.name is not None else "deletecollection"
    else:
        verb = _WRITE_VERBS.get(method, method.lower())
    node_selector: str | None = None
    if target.name is None and verb in ("list", "watch"):
        selector = query.get("fieldSelector", "")
        if selector:
            # a list or watch of one named object is authorized as that object (kube does the same)
            only = _selector_value(selector, "metadata.name")
            if only:
                name = only
            node_selector = _selector_value(selector, "spec.nodeName")
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        path=target_path(target),
        namespace=namespace,
        api_group=target.group,
        api_version=target.version,
        resource=target.resource,
        subresource=target.subresource or "",
        name=name,
        node_name_selector=node_selector,
    )


def target_path(target: ResourcePath) -> str:
    root = f"/apis/{target.group}/{target.version}" if target.group else f"/api/{target.version}"
    parts = [root]
    if target.namespace:
        parts.append(f"namespaces/{target.namespace}")
    parts.append(target.resource)
    if target.name:
        parts.append(target.name)
    if target.subresource:
        parts.append(target.subresource)
    return "/".join(parts)
