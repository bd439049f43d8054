"""OpenAPI v3 documents: what kubectl's validation (G5), apply and explain read."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from apiserver.discovery import served_groups
from apiserver.errors import StatusError
from apiserver.openapi import STRATEGIC_MERGE_PATCH, OpenAPIDocuments, build_document
from apiserver.openapi_schemas import (
    COMPONENTS,
    SchemaSource,
    SchemaSourceError,
    convert,
    default_source,
    refs,
    schema_directory,
)
from tests.apiserver.disc_catalog import CATALOG

POD = "io.k8s.api.core.v1.Pod"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."


@pytest.fixture(scope="module")
def docs() -> OpenAPIDocuments:
    return OpenAPIDocuments(CATALOG)


def _doc(docs: OpenAPIDocuments, key: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(docs.document(key)[0])
    return parsed


def _patch_ops(doc: dict[str, Any], gvk: dict[str, str]) -> list[dict[str, Any]]:
    return [
        item["patch"]
        for item in doc["paths"].values()
        if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"] == gvk
    ]


def _supports_field_validation(doc: dict[str, Any], gvk: dict[str, str]) -> bool:
    """cli-runtime's supportsQueryParamV3: the first PATCH operation for the GVK (in map
    order, so it must hold for every one) has a `fieldValidation` query parameter."""
    ops = _patch_ops(doc, gvk)
    return bool(ops) and all(
        any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op.get("parameters", [])) for op in ops
    )


# ---------------------------------------------------------------- the root


def test_root_lists_every_group_version_with_its_hash(docs: OpenAPIDocuments) -> None:
    root = json.loads(docs.root())
    keys = [gv.path for g in served_groups(CATALOG) for gv in g.versions]
    assert list(root["paths"]) == keys
    assert keys[:2] == ["api/v1", "apis/apps/v1"]
    for key in keys:
        body, digest = docs.document(key)
        assert digest == hashlib.sha256(body).hexdigest().upper()
        assert root["paths"][key] == {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}


def test_documents_are_serialized_once(docs: OpenAPIDocuments) -> None:
    assert docs.document("api/v1")[0] is docs.document("api/v1")[0]
    assert docs.root() is docs.root()
    # built again from the same catalog: the same bytes, so the same hash across processes
    assert OpenAPIDocuments(CATALOG).document("apis/apps/v1") == docs.document("apis/apps/v1")


@pytest.mark.parametrize("key", ["api/v2", "apis/apps/v2", "apis/nope/v1", "", "v1", "apis/apps"])
def test_unknown_document_is_not_found(docs: OpenAPIDocuments, key: str) -> None:
    with pytest.raises(StatusError) as e:
        docs.document(key)
    assert e.value.code == 404


# ---------------------------------------------------------------- paths (G5, apply)


def test_pod_patch_has_field_validation_and_every_patch_type(docs: OpenAPIDocuments) -> None:
    doc = _doc(docs, "api/v1")
    assert doc["openapi"].startswith("3.0")
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    assert _supports_field_validation(doc, gvk)
    op = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert op["x-kubernetes-action"] == "patch"
    assert op["x-kubernetes-group-version-kind"] == gvk
    assert {p["name"] for p in op["parameters"]} == {"dryRun", "fieldManager", "fieldValidation", "force"}
    assert all(p["in"] == "query" for p in op["parameters"])
    assert set(op["requestBody"]["content"]) == {
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
        STRATEGIC_MERGE_PATCH,
    }
    for media in op["requestBody"]["content"].values():
        assert media["schema"] == {"$ref": COMPONENTS + META + "Patch"}
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": COMPONENTS + POD}


def test_every_kind_can_be_validated_server_side(docs: OpenAPIDocuments) -> None:
    for r in CATALOG:
        doc = _doc(
            docs, next(gv.path for g in served_groups(CATALOG) for gv in g.versions if gv.name == r.group_version)
        )
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        assert _supports_field_validation(doc, gvk), r.group_version + " " + r.kind


def test_subresource_operations(docs: OpenAPIDocuments) -> None:
    v1 = _doc(docs, "api/v1")["paths"]
    item = "/api/v1/namespaces/{namespace}/pods/{name}"
    eviction = v1[f"{item}/eviction"]["post"]
    assert eviction["x-kubernetes-group-version-kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert set(v1[f"{item}/status"]) == {"get", "put", "patch", "parameters"}
    log = v1[f"{item}/log"]["get"]
    assert "text/plain" in log["responses"]["200"]["content"]
    assert {p["name"] for p in log["parameters"]} >= {"container", "follow", "tailLines", "previous", "timestamps"}
    assert "post" in v1[f"{item}/binding"]
    assert "post" in v1["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]
    apps = _doc(docs, "apis/apps/v1")
    scale = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert _supports_field_validation(apps, scale)
    assert "io.k8s.api.autoscaling.v1.Scale" in apps["components"]["schemas"]
    assert "io.k8s.api.policy.v1.Eviction" in _doc(docs, "api/v1")["components"]["schemas"]


def test_collection_and_item_paths_follow_scope_and_verbs(docs: OpenAPIDocuments) -> None:
    paths = _doc(docs, "api/v1")["paths"]
    assert set(paths["/api/v1/namespaces/{namespace}/pods"]) == {"get", "post", "delete", "parameters"}
    assert paths["/api/v1/pods"]["get"]["x-kubernetes-action"] == "list"  # all namespaces
    assert "/api/v1/nodes/{name}" in paths
    assert not any(p.startswith("/api/v1/namespaces/{namespace}/nodes") for p in paths)
    # namespaces have no deletecollection verb
    assert set(paths["/api/v1/namespaces"]) == {"get", "post", "parameters"}
    listing = paths["/api/v1/namespaces/{namespace}/pods"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "watch",
    }
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": COMPONENTS + POD + "List"}
    params = paths["/api/v1/namespaces/{namespace}/pods/{name}"]["parameters"]
    assert [(p["name"], p["in"]) for p in params] == [("name", "path"), ("namespace", "path"), ("pretty", "query")]
    op_ids = [op["operationId"] for item in paths.values() for k, op in item.items() if k != "parameters"]
    assert len(op_ids) == len(set(op_ids))
    assert "patchCoreV1NamespacedPod" in op_ids


def test_kinds_without_a_published_schema_get_no_strategic_merge_patch(docs: OpenAPIDocuments) -> None:
    doc = _doc(docs, "apis/example.com/v1alpha1")
    gvk = {"group": "example.com", "version": "v1alpha1", "kind": "Widget"}
    ops = _patch_ops(doc, gvk)
    assert len(ops) == 2  # the object and its status
    for op in ops:
        assert STRATEGIC_MERGE_PATCH not in op["requestBody"]["content"]
        assert "application/merge-patch+json" in op["requestBody"]["content"]
    widget = doc["components"]["schemas"]["com.example.v1alpha1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [gvk]
    assert widget["x-kubernetes-preserve-unknown-fields"] is True
    assert _all_refs_resolve(doc)


# ---------------------------------------------------------------- schemas (explain, SMP)


def _all_refs_resolve(doc: dict[str, Any]) -> bool:
    schemas = doc["components"]["schemas"]
    return all(name in schemas for name in refs(doc))


def test_pod_schema_resolves_within_the_document(docs: OpenAPIDocuments) -> None:
    doc = _doc(docs, "api/v1")
    schemas = doc["components"]["schemas"]
    # walk from Pod: everything it reaches is in this document
    seen, pending = set(), [POD]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        assert name in schemas, name
        seen.add(name)
        pending.extend(refs(schemas[name]))
    assert {"io.k8s.api.core.v1.PodSpec", "io.k8s.api.core.v1.Container", META + "ObjectMeta", META + "Time"} <= seen
    assert _all_refs_resolve(doc)
    for key in docs.document_keys():
        assert _all_refs_resolve(_doc(docs, key)), key


def test_pod_schema_has_what_explain_and_apply_read(docs: OpenAPIDocuments) -> None:
    schemas = _doc(docs, "api/v1")["components"]["schemas"]
    pod = schemas[POD]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert pod["type"] == "object"
    assert pod["description"].startswith("Pod is a collection of containers")
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": COMPONENTS + "io.k8s.api.core.v1.PodSpec"}]
    assert pod["properties"]["spec"]["description"]
    assert pod["properties"]["apiVersion"] == {
        "description": pod["properties"]["apiVersion"]["description"],
        "type": "string",
    }
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["items"] == {"$ref": COMPONENTS + "io.k8s.api.core.v1.Container"}
    assert "containers" in schemas["io.k8s.api.core.v1.PodSpec"]["required"]
    for name in ("Status", "DeleteOptions", "ObjectMeta", "ListMeta", "WatchEvent"):
        assert META + name in schemas


def test_no_json_schema_only_constructs_leak(docs: OpenAPIDocuments) -> None:
    """OpenAPI 3.0 (and kubectl's templates) want one `type` string and no `$ref` siblings."""

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if "type" in node and not isinstance(node["type"], dict):
                assert isinstance(node["type"], str), where
            if "$ref" in node:
                assert len(node) == 1, where
            assert "$defs" not in node and "$schema" not in node, where
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    for key in docs.document_keys():
        walk(_doc(docs, key)["components"], key)


def test_build_document_is_pure(docs: OpenAPIDocuments) -> None:
    gv = served_groups(CATALOG)[0].versions[0]
    first = build_document(gv, default_source())
    assert build_document(gv, default_source()) == first == _doc(docs, "api/v1")


# ---------------------------------------------------------------- the schema source


def test_schema_directory_is_the_newest_not_newer_than_asked() -> None:
    assert schema_directory().name == "v1.33.0-local"
    assert schema_directory((1, 31)).name == "v1.31.0-local"
    with pytest.raises(SchemaSourceError):
        schema_directory((0, 9))


def test_conversion() -> None:
    assert convert({"type": ["string", "null"], "format": "date-time"}) == {"type": "string", "format": "date-time"}
    assert convert({"$ref": "#/$defs/a.B", "description": "d"}) == {
        "description": "d",
        "allOf": [{"$ref": COMPONENTS + "a.B"}],
    }
    assert convert({"items": {"$ref": "#/$defs/a.B"}}) == {"items": {"$ref": COMPONENTS + "a.B"}}
    assert convert({"oneOf": [{"type": ["integer", "null"]}, {"type": "string"}]}) == {
        "oneOf": [{"type": "integer"}, {"type": "string"}]
    }
    # property names are data, even when they look like keywords
    converted = convert({"properties": {"type": {"type": "string"}, "kind": {"type": "string", "enum": ["X"]}}})
    assert converted == {"properties": {"type": {"type": "string"}, "kind": {"type": "string"}}}
    assert convert({"type": ["null"], "x-kubernetes-list-type": "map"}) == {"x-kubernetes-list-type": "map"}


def test_source_lookups() -> None:
    source = SchemaSource(
        {
            "a.v1.A": {
                "type": "object",
                "properties": {"b": {"$ref": "#/$defs/a.v1.B"}},
                "x-kubernetes-group-version-kind": [{"group": "a", "version": "v1", "kind": "A"}],
            },
            "a.v1.B": {"type": ["object", "null"], "properties": {"a": {"$ref": "#/$defs/a.v1.A"}}},
            "a.v1.C": {"type": "string"},
        },
        "v9.9.9",
    )
    assert source.name_for("a", "v1", "A") == "a.v1.A"
    assert source.name_for("a", "v1", "B") is None
    assert list(source.closure(["a.v1.A"])) == ["a.v1.A", "a.v1.B"]  # cycles end
    assert "a.v1.C" in source and "a.v1.D" not in source


def test_served_catalog_entry_points() -> None:
    """The module-level functions the HTTP layer calls serve `catalog()` (whatever it holds)."""
    from apiserver.openapi import openapi_document, openapi_root

    root = json.loads(openapi_root())
    for key, entry in root["paths"].items():
        body, etag = openapi_document(key)
        assert entry["serverRelativeURL"].endswith(f"?hash={etag.strip(chr(34))}")
        assert etag == f'"{hashlib.sha256(body).hexdigest().upper()}"'
    with pytest.raises(StatusError):
        openapi_document("apis/no.such.group/v1")
