"""Discovery: what the server serves, told to clients in the shapes client-go reads.

Two representations answer `GET /api` and `GET /apis`.  Aggregated discovery
(`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) gives every group, version and resource
in one response, but only counts when the response Content-Type names it exactly
(kubectl treats the same body sent as plain `application/json` as legacy and finds no
resources).  Legacy discovery (APIVersions, APIGroupList, then one APIResourceList per
group-version) is still needed: `kubectl drain` reads `GET /api/v1` for `pods/eviction`
even when aggregated discovery worked.

Everything here is a pure function of the resource catalog, passed in, so the HTTP layer
serves `catalog()` and tests pass their own.  Groups come core first, then in Kubernetes'
own group order, then any other group alphabetically; each group's preferred version (the
most stable, newest) comes first, which is how clients pick it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from apiserver.errors import StatusError
from apiserver.resources.base import ResourceDef

Representation = Literal["v2", "v2beta1", "legacy"]

DISCOVERY_GROUP = "apidiscovery.k8s.io"
CONTENT_TYPE_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
CONTENT_TYPE_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
CONTENT_TYPE_JSON = "application/json"

# kube-apiserver's group priorities (highest first); groups not listed follow alphabetically
_GROUP_ORDER = (
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
)

_KUBE_VERSION = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting Kubernetes' preferred version first: GA before beta before alpha,
    then the higher major, then the higher minor; versions of other shapes last, by name."""
    m = _KUBE_VERSION.match(version)
    if m is None:
        return (3, 0, 0, version)
    stability = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stability, -int(m.group(1)), -int(m.group(3) or 0), "")


def group_priority(group: str) -> tuple[int, int, str]:
    if group == "":
        return (0, 0, "")
    if group in _GROUP_ORDER:
        return (1, _GROUP_ORDER.index(group), "")
    return (2, 0, group)


@dataclass(frozen=True)
class GroupVersion:
    group: str
    version: str
    resources: tuple[ResourceDef, ...]  # sorted by resource name

    @property
    def name(self) -> str:
        """`v1`, `apps/v1`: the apiVersion of its objects."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """`api/v1`, `apis/apps/v1`: its URL prefix without the leading slash (the OpenAPI v3 key)."""
        return f"apis/{self.group}/{self.version}" if self.group else f"api/{self.version}"


@dataclass(frozen=True)
class Group:
    name: str  # "" for core
    versions: tuple[GroupVersion, ...]  # preferred first


@dataclass(frozen=True)
class RemoteGroupVersion:
    """A group-version another server serves (an available APIService with a service): its
    priorities and the resources its server listed (legacy APIResource entries, checked)."""

    group: str
    version: str
    group_priority: int
    version_priority: int
    resources: tuple[dict[str, Any], ...]

    @property
    def name(self) -> str:
        return f"{self.group}/{self.version}"

    @classmethod
    def of(
        cls, group: str, version: str, group_priority: Any, version_priority: Any, listed: list[Any]
    ) -> RemoteGroupVersion:
        """From an APIService's spec and what its server listed; entries that are not
        well-formed APIResources (a name, a kind, a list of verbs) are left out."""
        kept = []
        for entry in listed:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                continue
            if not isinstance(entry.get("kind"), str) or not _strings(entry.get("verbs")):
                continue
            kept.append(
                {
                    "name": entry["name"],
                    "singularName": entry.get("singularName") if isinstance(entry.get("singularName"), str) else "",
                    "namespaced": entry.get("namespaced") is True,
                    "kind": entry["kind"],
                    "verbs": list(entry["verbs"]),
                    **{k: list(entry[k]) for k in ("shortNames", "categories") if _strings(entry.get(k)) and entry[k]},
                    **{k: entry[k] for k in ("group", "version") if isinstance(entry.get(k), str) and entry[k]},
                }
            )
        return cls(
            group,
            version,
            group_priority if isinstance(group_priority, int) else 0,
            version_priority if isinstance(version_priority, int) else 0,
            tuple(kept),
        )


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _remote_groups(remote: Sequence[RemoteGroupVersion]) -> dict[str, list[RemoteGroupVersion]]:
    """Remote group-versions by group, the groups by priority (highest first, then name), each
    group's versions by priority (highest first), as the aggregator orders them."""
    by_group: dict[str, list[RemoteGroupVersion]] = {}
    for rv in sorted(remote, key=lambda r: (-r.group_priority, r.group, -r.version_priority, r.version)):
        by_group.setdefault(rv.group, []).append(rv)
    return by_group


def check_catalog(resources: Iterable[ResourceDef]) -> None:
    """Refuse a catalog that would make discovery ambiguous, naming the offending resource."""
    seen: dict[tuple[str, str, str], str] = {}
    kinds: dict[tuple[str, str, str], str] = {}
    for r in resources:
        where = f"{r.group_version} {r.plural}"
        if not _DNS_LABEL.match(r.plural):
            raise ValueError(f"{where}: resource name must be a lowercase DNS label")
        if not r.version or "/" in r.version or "/" in r.group:
            raise ValueError(f"{where}: group and version must be non-empty path segments")
        if (r.group, r.version, r.plural) in seen:
            raise ValueError(f"{where}: declared twice")
        seen[(r.group, r.version, r.plural)] = r.kind
        if (r.group, r.version, r.kind) in kinds:
            raise ValueError(f"{where}: kind {r.kind} is already served by {kinds[(r.group, r.version, r.kind)]}")
        kinds[(r.group, r.version, r.kind)] = r.plural
        names = [s.name for s in r.subresources]
        if len(set(names)) != len(names):
            raise ValueError(f"{where}: a subresource is declared twice")
        for s in r.subresources:
            if not _DNS_LABEL.match(s.name) or (s.group is None) != (s.version is None):
                raise ValueError(f"{where}/{s.name}: bad subresource (name, or group without version)")


def served_groups(resources: Iterable[ResourceDef]) -> tuple[Group, ...]:
    """The catalog as groups and versions, in discovery order (core first, preferred versions first)."""
    resources = tuple(resources)
    check_catalog(resources)
    by_group: dict[str, dict[str, list[ResourceDef]]] = {}
    for r in resources:
        by_group.setdefault(r.group, {}).setdefault(r.version, []).append(r)
    groups = []
    for g in sorted(by_group, key=group_priority):
        versions = tuple(
            GroupVersion(g, v, tuple(sorted(by_group[g][v], key=lambda r: r.plural)))
            for v in sorted(by_group[g], key=version_priority)
        )
        groups.append(Group(g, versions))
    return tuple(groups)


def find_group_version(resources: Iterable[ResourceDef], group_version: str) -> GroupVersion:
    """The served group-version named `v1` or `apps/v1`; 404 NotFound otherwise."""
    for g in served_groups(resources):
        for gv in g.versions:
            if gv.name == group_version:
                return gv
    raise StatusError(404, "NotFound", "the server could not find the requested resource")


# ---------------------------------------------------------------- content negotiation


def _media_ranges(accept: str) -> list[tuple[float, str, dict[str, str]]]:
    ranges = []
    for entry in accept.split(","):
        kind, _, rest = entry.partition(";")
        params: dict[str, str] = {}
        for p in rest.split(";"):
            key, eq, value = p.partition("=")
            if eq:
                params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        if q > 0:  # also drops NaN
            ranges.append((q, kind.strip().lower(), params))
    ranges.sort(key=lambda r: -r[0])  # stable: equal weights keep the client's order
    return ranges


def negotiate_discovery(accept: str) -> Representation:
    """Which representation answers `/api` or `/apis` for this Accept header.

    The first acceptable media range wins (by q, then the client's order).  Aggregated
    discovery needs `g=apidiscovery.k8s.io` and `as=APIGroupDiscoveryList` on a JSON type;
    other JSON types (and no header at all) get legacy discovery, as from kube-apiserver.
    """
    for _, kind, params in _media_ranges(accept or ""):
        if kind not in ("application/json", "application/*", "*/*"):
            continue
        if "as" not in params and "g" not in params and "v" not in params:
            return "legacy"
        if kind == "application/json" and params.get("g") == DISCOVERY_GROUP:
            if params.get("as") == "APIGroupDiscoveryList" and params.get("v") in ("v2", "v2beta1"):
                return "v2" if params["v"] == "v2" else "v2beta1"
    return "legacy"


def discovery_content_type(representation: Representation) -> str:
    """The exact response Content-Type for a representation (client-go checks g, v and as)."""
    return {"v2": CONTENT_TYPE_V2, "v2beta1": CONTENT_TYPE_V2BETA1, "legacy": CONTENT_TYPE_JSON}[representation]


# ---------------------------------------------------------------- aggregated (apidiscovery.k8s.io)


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _aggregated_resource(r: ResourceDef) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": r.plural,
        "responseKind": _gvk(r.group, r.version, r.kind),
        "scope": "Namespaced" if r.namespaced else "Cluster",
        "singularResource": r.singular,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    subs = [
        {
            "subresource": s.name,
            "responseKind": _gvk(s.group or r.group, s.version or r.version, s.kind),
            "verbs": list(s.verbs),
        }
        for s in sorted(r.subresources, key=lambda s: s.name)
    ]
    if subs:
        entry["subresources"] = subs
    return entry


def _aggregated_group(group: Group) -> dict[str, Any]:
    return {
        "metadata": {"name": group.name},
        "versions": [
            {
                "version": gv.version,
                "resources": [_aggregated_resource(r) for r in gv.resources],
                "freshness": "Current",
            }
            for gv in group.versions
        ],
    }


def _aggregated_remote(rv: RemoteGroupVersion) -> dict[str, Any]:
    """An APIVersionDiscovery from a remote server's legacy list (subresources under their resource)."""
    by_name: dict[str, dict[str, Any]] = {}
    for e in rv.resources:
        if "/" in e["name"]:
            continue
        entry: dict[str, Any] = {
            "resource": e["name"],
            "responseKind": _gvk(e.get("group", rv.group), e.get("version", rv.version), e["kind"]),
            "scope": "Namespaced" if e["namespaced"] else "Cluster",
            "singularResource": e["singularName"],
            "verbs": e["verbs"],
        }
        entry |= {k: e[k] for k in ("shortNames", "categories") if k in e}
        by_name[e["name"]] = entry
    for e in rv.resources:
        parent, _, sub = e["name"].partition("/")
        if sub and parent in by_name:
            by_name[parent].setdefault("subresources", []).append(
                {
                    "subresource": sub,
                    "responseKind": _gvk(e.get("group", rv.group), e.get("version", rv.version), e["kind"]),
                    "verbs": e["verbs"],
                }
            )
    return {"version": rv.version, "resources": [by_name[n] for n in sorted(by_name)], "freshness": "Current"}


def aggregated_discovery(
    resources: Iterable[ResourceDef],
    *,
    core: bool,
    representation: Representation = "v2",
    remote: Sequence[RemoteGroupVersion] = (),
) -> dict[str, Any]:
    """APIGroupDiscoveryList for `/api` (`core=True`: the one group named "") or `/apis` (the
    rest, with the `remote` group-versions: a version of one of our groups after ours, other
    groups after ours)."""
    if representation == "legacy":
        raise ValueError("aggregated_discovery needs the v2 or v2beta1 representation")
    groups = [g for g in served_groups(resources) if (g.name == "") == core]
    items = [_aggregated_group(g) for g in groups]
    if not core:
        by_name = {item["metadata"]["name"]: item for item in items}
        for group, versions in _remote_groups(remote).items():
            item = by_name.get(group)
            if item is None:
                item = by_name[group] = {"metadata": {"name": group}, "versions": []}
                items.append(item)
            known = {v["version"] for v in item["versions"]}
            item["versions"] += [_aggregated_remote(rv) for rv in versions if rv.version not in known]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"{DISCOVERY_GROUP}/{representation}",
        "metadata": {},
        "items": items,
    }


# ---------------------------------------------------------------- legacy (meta/v1)


def api_versions(resources: Iterable[ResourceDef], server_address: str) -> dict[str, Any]:
    """APIVersions for legacy `GET /api`; `server_address` is the host:port clients reached us on."""
    core = [g for g in served_groups(resources) if g.name == ""]
    return {
        "kind": "APIVersions",
        "versions": [gv.version for g in core for gv in g.versions],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _api_group(group: Group) -> dict[str, Any]:
    versions = [{"groupVersion": gv.name, "version": gv.version} for gv in group.versions]
    return {"name": group.name, "versions": versions, "preferredVersion": versions[0]}


def _legacy_groups(resources: Iterable[ResourceDef], remote: Sequence[RemoteGroupVersion]) -> list[dict[str, Any]]:
    groups = [_api_group(g) for g in served_groups(resources) if g.name]
    by_name = {g["name"]: g for g in groups}
    for group, versions in _remote_groups(remote).items():
        entry = by_name.get(group)
        if entry is None:
            entry = by_name[group] = {"name": group, "versions": []}
            groups.append(entry)
        known = {v["version"] for v in entry["versions"]}
        entry["versions"] += [
            {"groupVersion": rv.name, "version": rv.version} for rv in versions if rv.version not in known
        ]
        entry.setdefault("preferredVersion", entry["versions"][0])
    return groups


def api_group_list(resources: Iterable[ResourceDef], remote: Sequence[RemoteGroupVersion] = ()) -> dict[str, Any]:
    """APIGroupList for legacy `GET /apis` (with the `remote` group-versions)."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": _legacy_groups(resources, remote)}


def api_group(
    resources: Iterable[ResourceDef], group: str, remote: Sequence[RemoteGroupVersion] = ()
) -> dict[str, Any]:
    """APIGroup for `GET /apis/{group}` (kubectl never asks, but the path exists upstream)."""
    for g in _legacy_groups(resources, remote):
        if g["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **g}
    raise StatusError(404, "NotFound", "the server could not find the requested resource")


def storage_version_hash(r: ResourceDef) -> str:
    """An opaque token that changes when the stored group/version/kind does (clients only compare it)."""
    digest = hashlib.sha256(f"{r.group}/{r.version}/{r.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _legacy_entries(r: ResourceDef) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    entry["storageVersionHash"] = storage_version_hash(r)
    out = [entry]
    for s in sorted(r.subresources, key=lambda s: s.name):
        sub: dict[str, Any] = {"name": f"{r.plural}/{s.name}", "singularName": "", "namespaced": r.namespaced}
        if (s.group is not None and s.group != r.group) or (s.version is not None and s.version != r.version):
            sub["group"] = s.group
            sub["version"] = s.version
        sub["kind"] = s.kind
        sub["verbs"] = list(s.verbs)
        out.append(sub)
    return out


def api_resource_list(resources: Iterable[ResourceDef], group_version: str) -> dict[str, Any]:
    """APIResourceList for `GET /api/v1` or `GET /apis/{group}/{version}`: resources and subresources."""
    gv = find_group_version(resources, group_version)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv.name,
        "resources": [e for r in gv.resources for e in _legacy_entries(r)],
    }


def discovery_root(
    resources: Sequence[ResourceDef],
    accept: str,
    *,
    core: bool,
    server_address: str,
    remote: Sequence[RemoteGroupVersion] = (),
) -> tuple[dict[str, Any], str]:
    """The body and Content-Type answering `GET /api` (`core=True`) or `GET /apis` for `accept`
    (`remote`: the group-versions of available APIServices, in `/apis`)."""
    representation = negotiate_discovery(accept)
    if representation != "legacy":
        body = aggregated_discovery(resources, core=core, representation=representation, remote=remote)
    elif core:
        body = api_versions(resources, server_address)
    else:
        body = api_group_list(resources, remote)
    return body, discovery_content_type(representation)
