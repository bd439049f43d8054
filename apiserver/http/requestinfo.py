"""What a request path names: a discovery document, or a resource verb on a collection or object.

Pure parsing of Kubernetes REST paths (as kube-apiserver's RequestInfoFactory does), so that
routing is one table lookup and can be tested without a server:

    /api/v1/namespaces/default/pods/p/status   -> group "", v1, ns default, pods, name p, sub status
    /apis/apps/v1/deployments                  -> every namespace's deployments
    /api/v1/namespaces/default                 -> the namespace object "default"
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourcePath:
    group: str
    version: str
    resource: str
    namespace: str | None  # None: cluster-scoped, or every namespace
    name: str | None  # None: the collection
    subresource: str | None
    subpath: str = ""  # what follows a proxy subresource: /api/v1/nodes/n/proxy/<subpath>


def parse_resource_path(path: str) -> ResourcePath | None:
    """The resource a path names, or None when it is not a resource path (discovery, health...)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    # /namespaces/{ns}/{resource}...: a namespaced path, unless it is the namespace object itself
    # (/namespaces/{name}, /namespaces/{name}/status, /namespaces/{name}/finalize).
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    subpath = ""
    if len(rest) > 3:
        if rest[2] != "proxy":
            return None
        subpath, rest = "/".join(rest[3:]), rest[:3]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) == 3 else None
    return ResourcePath(group, version, resource, namespace, name, sub, subpath)
