"""`GET /openapi/v2`: the served kinds' schemas as a Swagger 2.0 document.

kubectl since 1.27 and the generated clients read the OpenAPI v3 documents (`apiserver.openapi`);
v2 is still what older tools and the conformance suite read for schemas, by definition name.
This document carries the `definitions` (every built-in kind's schema and what it refers to,
and each served custom kind's as kube's CRD OpenAPI builder publishes it for v2) and no paths:
the operations are in the v3 documents.

A custom kind is published as kube does for v2 (apiextensions' `ToStructuralOpenAPIV2` and
`buildKubeNative`): `allOf`/`anyOf`/`oneOf`/`not` dropped; a nullable node loses its type,
properties and items; a node keeping unknown fields loses its properties and items (and its
type, when an object); an array left without items loses its type; a kind that keeps unknown
fields at its root is published as a bare object.  apiVersion, kind and ObjectMeta are added,
to embedded resources too, and defaults are pruned, as kube's merged spec has none.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from apiserver.openapi import API_VERSION_DESCRIPTION as _API_VERSION
from apiserver.openapi import KIND_DESCRIPTION as _KIND
from apiserver.openapi import synthesized_name
from apiserver.openapi_schemas import COMPONENTS, SchemaSource, default_source
from apiserver.resources.base import ResourceDef
from apiserver.version import KUBE_MAJOR, KUBE_MINOR

DEFINITIONS = "#/definitions/"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_META_DESCRIPTION = "Standard object's metadata."
_MAX_DEPTH = 128


def _rewrite_refs(node: Any) -> Any:
    """A v3 component schema with its `$ref`s pointing into v2's `definitions`."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(COMPONENTS):
                out[key] = DEFINITIONS + value[len(COMPONENTS) :]
            else:
                out[key] = _rewrite_refs(value)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(x) for x in node]
    return node


def _to_v2(node: dict[str, Any], depth: int = 0) -> None:
    """kube's ToStructuralOpenAPIV2, in place, on one CRD schema node and below."""
    if depth > _MAX_DEPTH:
        return
    for junctor in ("allOf", "anyOf", "oneOf", "not"):
        node.pop(junctor, None)
    node.pop("default", None)
    if node.pop("nullable", False) is True:
        node.pop("type", None)
        node.pop("items", None)
        node.pop("properties", None)
    if node.get("x-kubernetes-preserve-unknown-fields") is True:
        node.pop("items", None)
        node.pop("properties", None)
        if node.get("type") == "object":
            node.pop("type")
    if node.get("type") == "array" and "items" not in node:
        node.pop("type")
    props = node.get("properties")
    if isinstance(props, dict):
        nullable = [k for k, v in props.items() if isinstance(v, dict) and v.get("nullable") is True]
        if nullable and isinstance(node.get("required"), list):
            node["required"] = [r for r in node["required"] if r not in nullable] or None
            if node["required"] is None:
                node.pop("required")
        for sub in props.values():
            if isinstance(sub, dict):
                _to_v2(sub, depth + 1)
    for member in ("items", "additionalProperties"):
        sub = node.get(member)
        if isinstance(sub, dict):
            _to_v2(sub, depth + 1)
    if (
        node.get("x-kubernetes-embedded-resource") is True
        and node.get("x-kubernetes-preserve-unknown-fields") is not True
    ):
        _add_type_meta(node)
        given = node.get("required")
        required = [r for r in given if isinstance(r, str)] if isinstance(given, list) else []
        node["required"] = required + [r for r in ("kind", "apiVersion") if r not in required]


def _add_type_meta(node: dict[str, Any]) -> None:
    if not isinstance(node.get("properties"), dict):
        node["properties"] = {}
    props = node["properties"]
    props["apiVersion"] = {"type": "string", "description": _API_VERSION}
    props["kind"] = {"type": "string", "description": _KIND}
    props["metadata"] = {"$ref": DEFINITIONS + OBJECT_META, "description": _META_DESCRIPTION}


def custom_definition(res: ResourceDef, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD version's schema as kube publishes it in v2."""
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        out: dict[str, Any] = {"type": "object"}
    else:
        out = copy.deepcopy(dict(schema))
        _to_v2(out)
        _add_type_meta(out)
    out["x-kubernetes-group-version-kind"] = [{"group": res.group, "version": res.version, "kind": res.kind}]
    return out


def _custom_list(res: ResourceDef, item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{res.list_kind} is a list of {res.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION},
            "kind": {"type": "string", "description": _KIND},
            "items": {"type": "array", "items": {"$ref": DEFINITIONS + item}},
            "metadata": {"$ref": DEFINITIONS + LIST_META, "description": "Standard list metadata."},
        },
        "x-kubernetes-group-version-kind": [{"group": res.group, "version": res.version, "kind": res.list_kind}],
    }


def swagger(resources: Iterable[ResourceDef], source: SchemaSource | None = None) -> dict[str, Any]:
    """The v2 document of what is served."""
    source = source or default_source()
    roots: list[str] = []
    custom: dict[str, Any] = {}
    for res in resources:
        if res.openapi_schema is not None:
            name = synthesized_name(res.group, res.version, res.kind)
            custom[name] = custom_definition(res, res.openapi_schema)
            custom[f"{name}List"] = _custom_list(res, name)
            continue
        for kind in (res.kind, res.list_kind):
            found = source.name_for(res.group, res.version, kind)
            if found is not None and found not in roots:
                roots.append(found)
    roots += [OBJECT_META, LIST_META]
    definitions = {name: _rewrite_refs(schema) for name, schema in source.closure(roots).items()}
    definitions.update(custom)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0"},
        "paths": {},
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    }


class SwaggerDocument:
    """The serialized v2 document of one set of served resources, built on first request."""

    def __init__(self, resources: Iterable[ResourceDef]) -> None:
        self._resources = tuple(resources)
        self._body: tuple[bytes, str] | None = None

    def body(self) -> tuple[bytes, str]:
        """(JSON, ETag)."""
        if self._body is None:
            body = orjson.dumps(swagger(self._resources))
            self._body = (body, '"' + hashlib.sha256(body).hexdigest().upper() + '"')
        return self._body
