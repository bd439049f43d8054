"""The 403 a refused request gets, worded as kube-apiserver words it (kubectl prints it as is):

pods is forbidden: User "ann" cannot list resource "pods" in API group "" in the namespace "web"
nodes "n1" is forbidden: User "ann" cannot get resource "nodes" in API group "" at the cluster scope
forbidden: User "ann" cannot get path "/metrics"
"""

from __future__ import annotations

from typing import Any

from apiserver import errors
from apiserver.authz.attributes import Attributes


def refusal(attrs: Attributes) -> str:
    user = attrs.user.name
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    what = f'User "{user}" cannot {attrs.verb} resource "{attrs.combined_resource}" in API group "{attrs.api_group}"'
    if attrs.namespace:
        return f'{what} in the namespace "{attrs.namespace}"'
    return f"{what} at the cluster scope"


def forbidden(attrs: Attributes, reason: str = "") -> errors.StatusError:
    message = refusal(attrs)
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request:
        return errors.StatusError(403, "Forbidden", f"forbidden: {message}")
    resource = errors.qualified(attrs.resource, attrs.api_group)
    subject = f'{resource} "{attrs.name}"' if attrs.name else resource
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    return errors.StatusError(403, "Forbidden", f"{subject} is forbidden: {message}", details)
