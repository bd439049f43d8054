"""Prometheus metrics of the apiserver's requests (one registry per server, so tests stay apart).

The request metrics carry kube-apiserver's labels and values (k8s.io/apiserver
pkg/endpoints/metrics), so dashboards and alerts written for kube read ours: `verb` is the
uppercase verb as kube reports it (GET of one object, LIST of a collection, WATCH for any
watch, POST PUT PATCH DELETE DELETECOLLECTION, APPLY for a server-side-apply patch, CONNECT
for exec/attach/portforward/proxy, `other` for anything else); `dry_run` is "All", "" or
"invalid"; `scope` is "resource" (one named object, or a create), "namespace", "cluster", or ""
for a request that names no resource; `component` is "apiserver".  Only served resources
become group/version/resource labels: a client cannot grow the metrics by inventing paths.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from apiserver.authz.attributes import Attributes

COMPONENT = "apiserver"
APPLY_PATCH = "application/apply-patch+yaml"
# kube serves these through a Connecter (a stream or proxy, not a stored object): verb CONNECT
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})
_VERBS = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETECOLLECTION",
}
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})  # of non-resource requests
OTHER = "other"
LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")


@dataclass(frozen=True, slots=True)
class RequestLabels:
    """One request's labels, in the order of LABELS."""

    verb: str
    dry_run: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    scope: str = ""
    component: str = COMPONENT

    def values(self) -> tuple[str, ...]:
        return (
            self.verb,
            self.dry_run,
            self.group,
            self.version,
            self.resource,
            self.subresource,
            self.scope,
            self.component,
        )


def request_labels(
    attrs: Attributes,
    method: str,
    dry_run: Sequence[str],
    content_type: str,
    served: Container[tuple[str, str, str]],
) -> RequestLabels:
    """kube's labels for a request: `attrs` as authorization saw it, `dry_run` the query's dryRun
    values, `served` the (group, version, resource) triples this server serves."""
    dry = "invalid" if any(v != "All" for v in dry_run) else ("All" if dry_run else "")
    if not attrs.resource_request:
        return RequestLabels(method if method in _METHODS else OTHER, dry)
    verb = _VERBS.get(attrs.verb, OTHER)
    if attrs.subresource in CONNECT_SUBRESOURCES:
        verb = "CONNECT"
    elif verb == "PATCH" and content_type.split(";", maxsplit=1)[0].strip().lower() == APPLY_PATCH:
        verb = "APPLY"
    if (attrs.api_group, attrs.api_version, attrs.resource) not in served:
        return RequestLabels(verb, dry)
    if attrs.name or attrs.verb == "create":
        scope = "resource"
    elif attrs.namespace:
        scope = "namespace"
    else:
        scope = "cluster"
    return RequestLabels(verb, dry, attrs.api_group, attrs.api_version, attrs.resource, attrs.subresource, scope)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, "
            "scope, component, and HTTP response code.",
            [*LABELS, "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, "
            "subresource, scope and component.",
            list(LABELS),
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )

        self._children: dict[tuple[RequestLabels, int], tuple[Any, Any]] = {}

    def observe(self, labels: RequestLabels, code: int, seconds: float) -> None:
        key = (labels, code)
        children = self._children.get(key)
        if children is None:  # label lookups are costly; the label sets are few (bounded by the catalog)
            values = labels.values()
            children = self._children[key] = (
                self.requests.labels(*values, str(code)),
                self.latency.labels(*values),
            )
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
