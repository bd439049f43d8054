"""Discovery documents: the shapes kubectl reads (research/kubectl-surface.md G1, G2, shared shapes)."""

from __future__ import annotations

import dataclasses
from email.message import Message
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.discovery import (
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_V2,
    CONTENT_TYPE_V2BETA1,
    RemoteGroupVersion,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
    check_catalog,
    discovery_content_type,
    discovery_root,
    negotiate_discovery,
    served_groups,
    version_priority,
)
from apiserver.errors import StatusError
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources.base import ResourceDef, Subresource
from tests.apiserver.disc_catalog import CATALOG, DEPLOYMENTS, PODS

# what kubectl 1.31-1.33 send for /api and /apis
KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


# ---------------------------------------------------------------- negotiation


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_ACCEPT, "v2"),
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
        # newer client-go puts a profile=nopeer variant first
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer," + KUBECTL_ACCEPT,
            "v2",
        ),
        ("application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io", "v2"),
        ("application/json", "legacy"),
        ("", "legacy"),
        ("*/*", "legacy"),
        ("application/json, */*", "legacy"),
        ("application/vnd.kubernetes.protobuf", "legacy"),
        # an unknown discovery version is skipped, not guessed
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json", "legacy"),
        # q-values: the client prefers legacy
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5,application/json", "legacy"),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0", "legacy"),
        ("application/json;q=0.1,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
        # a Table request is not a discovery request
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "v2",
        ),
    ],
)
def test_negotiation(accept: str, expected: str) -> None:
    assert negotiate_discovery(accept) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_negotiation_never_fails_on_hostile_headers(accept: str) -> None:
    assert negotiate_discovery(accept) in ("v2", "v2beta1", "legacy")


def _content_type_is(content_type: str, version: str) -> bool:
    """client-go's ContentTypeIsGVK: base type application/json, and g, v, as in any order."""
    msg = Message()
    msg["content-type"] = content_type
    params = dict((msg.get_params() or [])[1:])
    return (
        msg.get_content_type() == "application/json"
        and params.get("g") == "apidiscovery.k8s.io"
        and params.get("v") == version
        and params.get("as") == "APIGroupDiscoveryList"
    )


def test_content_types_are_the_exact_ones_client_go_checks() -> None:
    assert CONTENT_TYPE_V2 == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert _content_type_is(discovery_content_type("v2"), "v2")
    assert _content_type_is(discovery_content_type("v2beta1"), "v2beta1")
    assert discovery_content_type("v2beta1") == CONTENT_TYPE_V2BETA1
    assert discovery_content_type("legacy") == CONTENT_TYPE_JSON


# ---------------------------------------------------------------- ordering


def test_preferred_version_first() -> None:
    versions = ["v1alpha1", "v1beta1", "v2beta2", "v1", "v2", "v10", "foo", "v2alpha1"]
    assert sorted(versions, key=version_priority) == [
        "v10",
        "v2",
        "v1",
        "v2beta2",
        "v1beta1",
        "v2alpha1",
        "v1alpha1",
        "foo",
    ]


def test_groups_core_first_then_kubernetes_order_then_alphabetical() -> None:
    groups = served_groups(CATALOG)
    assert [g.name for g in groups] == [
        "",
        "apps",
        "events.k8s.io",
        "autoscaling",
        "batch",
        "coordination.k8s.io",
        "example.com",
    ]
    autoscaling = next(g for g in groups if g.name == "autoscaling")
    assert [gv.version for gv in autoscaling.versions] == ["v2", "v1"]
    core = groups[0].versions[0]
    assert [r.plural for r in core.resources] == sorted(r.plural for r in core.resources)
    # the order does not depend on the catalog's
    assert served_groups(reversed(CATALOG)) == groups


# ---------------------------------------------------------------- aggregated


def _split_groups_and_resources(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """What client-go's SplitGroupsAndResources makes of an APIGroupDiscoveryList: the
    APIResourceList entries per group-version, each with its effective group/version."""
    out: dict[str, list[dict[str, Any]]] = {}
    for group in doc["items"]:
        name = group["metadata"].get("name", "")
        for v in group["versions"]:
            assert v.get("freshness", "Current") == "Current"
            gv = f"{name}/{v['version']}" if name else v["version"]
            entries = out.setdefault(gv, [])
            for r in v["resources"]:
                kind = r["responseKind"]
                assert kind["kind"], f"{r['resource']} has no responseKind: client-go would drop it"
                assert r["scope"] in ("Namespaced", "Cluster")
                entries.append(
                    {
                        "name": r["resource"],
                        "namespaced": r["scope"] == "Namespaced",
                        "group": kind["group"],
                        "version": kind["version"],
                        "kind": kind["kind"],
                        "verbs": r["verbs"],
                        "shortNames": r.get("shortNames"),
                        "categories": r.get("categories"),
                    }
                )
                for s in r.get("subresources", []):
                    sk = s["responseKind"]
                    assert sk["kind"], f"{r['resource']}/{s['subresource']} has no responseKind"
                    entries.append(
                        {
                            "name": f"{r['resource']}/{s['subresource']}",
                            "namespaced": r["scope"] == "Namespaced",
                            "group": sk["group"],
                            "version": sk["version"],
                            "kind": sk["kind"],
                            "verbs": s["verbs"],
                            "shortNames": None,
                            "categories": None,
                        }
                    )
    return out


def _legacy_entries(gv: str) -> list[dict[str, Any]]:
    group, _, version = gv.rpartition("/")
    return [
        {
            "name": e["name"],
            "namespaced": e["namespaced"],
            "group": e.get("group", group),
            "version": e.get("version", version),
            "kind": e["kind"],
            "verbs": e["verbs"],
            "shortNames": e.get("shortNames"),
            "categories": e.get("categories"),
        }
        for e in api_resource_list(CATALOG, gv)["resources"]
    ]


def test_aggregated_core_is_one_group_named_empty() -> None:
    doc = aggregated_discovery(CATALOG, core=True)
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert doc["metadata"] == {}
    assert [item["metadata"]["name"] for item in doc["items"]] == [""]
    pods = next(r for r in doc["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert pods["scope"] == "Namespaced"
    assert pods["singularResource"] == "pod"
    assert pods["shortNames"] == ["po"]
    assert pods["categories"] == ["all"]
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert subs["eviction"]["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert subs["status"]["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert subs["status"]["verbs"] == ["get", "patch", "update"]


def test_aggregated_apis_has_no_core_and_scale_is_autoscaling_v1() -> None:
    doc = aggregated_discovery(CATALOG, core=False)
    assert "" not in [item["metadata"]["name"] for item in doc["items"]]
    apps = next(item for item in doc["items"] if item["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert deployments["shortNames"] == ["deploy"]
    nodes_scope = aggregated_discovery(CATALOG, core=True)["items"][0]["versions"][0]["resources"]
    assert next(r for r in nodes_scope if r["resource"] == "nodes")["scope"] == "Cluster"


def test_v2beta1_differs_only_in_api_version() -> None:
    v2 = aggregated_discovery(CATALOG, core=False)
    beta = aggregated_discovery(CATALOG, core=False, representation="v2beta1")
    assert beta["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert {**beta, "apiVersion": v2["apiVersion"]} == v2
    with pytest.raises(ValueError, match="v2 or v2beta1"):
        aggregated_discovery(CATALOG, core=False, representation="legacy")


def test_aggregated_and_legacy_say_the_same_thing() -> None:
    agg = _split_groups_and_resources(aggregated_discovery(CATALOG, core=True))
    agg |= _split_groups_and_resources(aggregated_discovery(CATALOG, core=False))
    legacy_gvs = ["v1"] + [v["groupVersion"] for g in api_group_list(CATALOG)["groups"] for v in g["versions"]]
    assert sorted(agg) == sorted(legacy_gvs)
    for gv in legacy_gvs:
        assert agg[gv] == _legacy_entries(gv), gv


def test_every_resource_is_in_exactly_one_list_with_its_subresources() -> None:
    gvs = ["v1"] + [v["groupVersion"] for g in api_group_list(CATALOG)["groups"] for v in g["versions"]]
    listed = [(gv, e) for gv in gvs for e in api_resource_list(CATALOG, gv)["resources"]]
    resources = sorted((gv, e["name"], e["kind"]) for gv, e in listed if "/" not in e["name"])
    assert resources == sorted((r.group_version, r.plural, r.kind) for r in CATALOG)
    subresources = sorted((gv, e["name"], e["kind"]) for gv, e in listed if "/" in e["name"])
    assert subresources == sorted(
        (r.group_version, f"{r.plural}/{s.name}", s.kind) for r in CATALOG for s in r.subresources
    )


# ---------------------------------------------------------------- legacy


def test_legacy_api_versions() -> None:
    doc = api_versions(CATALOG, "127.0.0.1:6443")
    assert doc == {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }


def test_legacy_group_list_prefers_the_first_version() -> None:
    doc = api_group_list(CATALOG)
    assert doc["kind"] == "APIGroupList"
    autoscaling = next(g for g in doc["groups"] if g["name"] == "autoscaling")
    assert autoscaling["versions"] == [
        {"groupVersion": "autoscaling/v2", "version": "v2"},
        {"groupVersion": "autoscaling/v1", "version": "v1"},
    ]
    assert autoscaling["preferredVersion"] == {"groupVersion": "autoscaling/v2", "version": "v2"}
    assert api_group(CATALOG, "autoscaling") == {"kind": "APIGroup", "apiVersion": "v1", **autoscaling}
    with pytest.raises(StatusError) as e:
        api_group(CATALOG, "")
    assert e.value.code == 404


def test_legacy_resource_list_for_drain_and_scale() -> None:
    core = api_resource_list(CATALOG, "v1")
    assert core["kind"] == "APIResourceList"
    assert core["groupVersion"] == "v1"
    by_name = {e["name"]: e for e in core["resources"]}
    assert by_name["pods/eviction"] == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert "group" not in by_name["pods/status"]
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert by_name["pods/binding"]["kind"] == "Binding"
    pods = by_name["pods"]
    assert (pods["singularName"], pods["namespaced"], pods["kind"]) == ("pod", True, "Pod")
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    assert isinstance(pods["storageVersionHash"], str) and pods["storageVersionHash"]
    assert by_name["nodes"]["namespaced"] is False
    assert "shortNames" not in api_resource_list(CATALOG, "coordination.k8s.io/v1")["resources"][0]
    apps = {e["name"]: e for e in api_resource_list(CATALOG, "apps/v1")["resources"]}
    assert (apps["deployments/scale"]["group"], apps["deployments/scale"]["version"]) == ("autoscaling", "v1")
    assert apps["deployments/scale"]["kind"] == "Scale"


@pytest.mark.parametrize("gv", ["v2", "apps/v2", "nope/v1", "", "apps", "/v1"])
def test_unknown_group_version_is_not_found(gv: str) -> None:
    with pytest.raises(StatusError) as e:
        api_resource_list(CATALOG, gv)
    assert (e.value.code, e.value.reason) == (404, "NotFound")


def test_discovery_root_answers_by_accept() -> None:
    body, ct = discovery_root(CATALOG, KUBECTL_ACCEPT, core=True, server_address="h:1")
    assert ct == CONTENT_TYPE_V2 and body["kind"] == "APIGroupDiscoveryList"
    body, ct = discovery_root(CATALOG, "application/json", core=True, server_address="h:1")
    assert ct == CONTENT_TYPE_JSON and body["kind"] == "APIVersions"
    body, ct = discovery_root(CATALOG, "", core=False, server_address="h:1")
    assert ct == CONTENT_TYPE_JSON and body["kind"] == "APIGroupList"


def test_empty_catalog() -> None:
    assert aggregated_discovery([], core=True)["items"] == []
    assert api_group_list([])["groups"] == []
    assert api_versions([], "h:1")["versions"] == []


# ---------------------------------------------------------------- catalog checks


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (dataclasses.replace(PODS, kind="Pod2"), "declared twice"),
        (dataclasses.replace(PODS, plural="pods2"), "kind Pod is already served"),
        (dataclasses.replace(PODS, plural="Pods"), "lowercase DNS label"),
        (dataclasses.replace(PODS, plural="pods/x"), "lowercase DNS label"),
        (dataclasses.replace(PODS, plural="other", kind="Other", version=""), "non-empty"),
        (
            dataclasses.replace(
                DEPLOYMENTS,
                plural="d2",
                kind="D2",
                subresources=(Subresource("s", "S", handler=STATUS_VIEW), Subresource("s", "S", handler=STATUS_VIEW)),
            ),
            "subresource is declared twice",
        ),
        (
            dataclasses.replace(
                DEPLOYMENTS,
                plural="d3",
                kind="D3",
                subresources=(Subresource("x", "S", group="g", handler=STATUS_VIEW),),
            ),
            "bad subresource",
        ),
    ],
)
def test_ambiguous_catalogs_are_refused(bad: ResourceDef, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_catalog([*CATALOG, bad])


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["flunders", "flunders/status", "", "a/b/c", "x"]) | _JSON,
        "kind": st.sampled_from(["Flunder"]) | _JSON,
        "verbs": st.lists(st.sampled_from(["get", "list"]), max_size=2) | _JSON,
        "namespaced": _JSON,
        "singularName": _JSON,
        "shortNames": _JSON,
        "group": _JSON,
    },
)


@settings(max_examples=200, deadline=None)
@given(listed=st.lists(_ENTRY | _JSON, max_size=6), priority=_JSON)
def test_whatever_an_aggregated_server_lists_discovery_stays_well_formed(listed: list[Any], priority: Any) -> None:
    """An aggregated server's APIResourceList is input from a peer: any JSON leaves discovery
    answering, with only well-formed resources of the remote group."""
    remote = RemoteGroupVersion.of("wardle.example.com", "v1alpha1", priority, 200, listed)
    body = aggregated_discovery(CATALOG, core=False, remote=[remote])
    (group,) = [g for g in body["items"] if g["metadata"]["name"] == "wardle.example.com"]
    for resource in group["versions"][0]["resources"]:
        assert isinstance(resource["resource"], str) and "/" not in resource["resource"]
        assert isinstance(resource["responseKind"]["kind"], str)
        assert all(isinstance(v, str) for v in resource["verbs"])
    assert any(g["name"] == "wardle.example.com" for g in api_group_list(CATALOG, [remote])["groups"])
    assert api_group(CATALOG, "wardle.example.com", [remote])["preferredVersion"]["version"] == "v1alpha1"
