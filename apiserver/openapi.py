"""OpenAPI v3: `GET /openapi/v3` and one document per group-version.

kubectl needs these for more than `explain`.  `create -f` and `apply` (with the default
`--validate=strict`) look in the object's group-version document for a PATCH operation
tagged with the object's `x-kubernetes-group-version-kind` and a `fieldValidation` query
parameter; without it they fall back to `/openapi/v2` (protobuf, which we do not serve)
and fail.  Client-side `apply` builds its strategic merge patch from the schemas when the
PATCH operation accepts `application/strategic-merge-patch+json`, which we offer only for
kinds with a published Kubernetes schema (the patch metadata comes from it); other kinds,
like custom resources upstream, get merge patches.

Each document is built from the catalog, serialized once and cached with its hash: the
root lists `serverRelativeURL`s carrying the hash, clients fetch `?hash=H` and may cache
forever, and the same hash is the ETag.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import orjson

from apiserver.discovery import GroupVersion, served_groups
from apiserver.errors import StatusError
from apiserver.openapi_schemas import COMPONENTS, Schema, SchemaSource, default_source
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef, Subresource
from apiserver.version import KUBE_MAJOR, KUBE_MINOR

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# subresources that stream or upgrade the connection rather than exchange an object
_CONNECT = frozenset({"exec", "attach", "portforward", "proxy"})

# name -> (schema type, description); descriptions are ours, in few words
_QUERY: dict[str, tuple[str, str]] = {
    "pretty": ("string", "If 'true', the output is pretty printed."),
    "dryRun": ("string", "All: run every stage of the request but persist nothing."),
    "fieldManager": ("string", "The name of the actor making the change, recorded in managedFields."),
    "fieldValidation": (
        "string",
        "How to treat unknown or duplicate fields in the body: Ignore (drop them), Warn "
        "(drop them and say so in a warning header) or Strict (fail the request).",
    ),
    "force": ("boolean", "Apply only: take ownership of fields that other managers own."),
    "allowWatchBookmarks": ("boolean", "Ask for BOOKMARK events in a watch."),
    "continue": ("string", "The continue token of the previous page of a paged list."),
    "fieldSelector": ("string", "Restrict the list to objects whose fields match, e.g. spec.nodeName=n1."),
    "labelSelector": ("string", "Restrict the list to objects whose labels match, e.g. app=web,tier!=db."),
    "limit": ("integer", "The most objects to return; the rest come with the continue token."),
    "resourceVersion": ("string", "Read at or after this version (for watch: send events after it)."),
    "resourceVersionMatch": ("string", "How resourceVersion applies to a list: Exact or NotOlderThan."),
    "sendInitialEvents": ("boolean", "Start a watch with the current objects as ADDED events, then a bookmark."),
    "timeoutSeconds": ("integer", "Close the list or watch after this many seconds."),
    "watch": ("boolean", "Stream changes instead of returning a list."),
    "gracePeriodSeconds": ("integer", "Seconds before the object is deleted; 0 deletes at once."),
    "orphanDependents": ("boolean", "Deprecated: use propagationPolicy=Orphan."),
    "propagationPolicy": ("string", "What happens to dependents: Orphan, Background or Foreground."),
    "container": ("string", "The container to read logs of; may be left out when the pod has one."),
    "follow": ("boolean", "Keep streaming the log as it grows."),
    "limitBytes": ("integer", "Stop after this many bytes of log."),
    "previous": ("boolean", "The log of the previous, terminated instance of the container."),
    "sinceSeconds": ("integer", "Only log lines newer than this many seconds."),
    "tailLines": ("integer", "Only this many lines from the end of the log."),
    "timestamps": ("boolean", "Prefix every log line with its RFC3339 timestamp."),
}
_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_SELECT_PARAMS = ("continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_LOG_PARAMS = ("container", "follow", "limitBytes", "previous", "sinceSeconds", "tailLines", "timestamps")


def _query(name: str) -> dict[str, Any]:
    typ, description = _QUERY[name]
    return {"name": name, "in": "query", "description": description, "schema": {"type": typ, "uniqueItems": True}}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "description": description,
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": COMPONENTS + name}


def _content(schema: dict[str, Any], *types: str) -> dict[str, Any]:
    return {t: {"schema": schema} for t in types or ("application/json",)}


def _camel(text: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[.\-]", text) if p)


def _group_camel(group: str) -> str:
    return _camel(group.removesuffix(".k8s.io")) if group else "Core"


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def synthesized_name(group: str, version: str, kind: str) -> str:
    """Where a kind without a published schema lives: `com.example.v1.Widget`, as for CRDs."""
    prefix = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
    return f"{prefix}.{version}.{kind}"


def _type_meta(group: str, version: str) -> dict[str, Schema]:
    api_version = f"{group}/{version}" if group else version
    return {
        "apiVersion": {"type": "string", "description": f"The versioned schema of this object: {api_version}."},
        "kind": {"type": "string", "description": "The REST resource this object represents."},
    }


def _synthesized_kind(group: str, version: str, kind: str) -> Schema:
    return {
        "type": "object",
        "description": f"{kind} (Kubernetes publishes no schema for it; any fields are kept).",
        "properties": {
            **_type_meta(group, version),
            "metadata": {"description": "Standard object's metadata.", "allOf": [_ref(META + "ObjectMeta")]},
        },
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-group-version-kind": [_gvk(group, version, kind)],
    }


API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)


def _custom_kind(group: str, version: str, kind: str, schema: Mapping[str, Any]) -> Schema:
    """A CRD version's schema as kube publishes it: with apiVersion, kind (TypeMeta's words) and ObjectMeta."""
    props = dict(schema.get("properties") or {}) if isinstance(schema.get("properties"), Mapping) else {}
    props["apiVersion"] = {"type": "string", "description": API_VERSION_DESCRIPTION}
    props["kind"] = {"type": "string", "description": KIND_DESCRIPTION}
    props["metadata"] = {"description": "Standard object's metadata.", "allOf": [_ref(META + "ObjectMeta")]}
    return {**schema, "properties": props, "x-kubernetes-group-version-kind": [_gvk(group, version, kind)]}


def _synthesized_list(group: str, version: str, kind: str, item: str) -> Schema:
    return {
        "type": "object",
        "description": f"A list of {kind.removesuffix('List')}.",
        "required": ["items"],
        "properties": {
            **_type_meta(group, version),
            "items": {"type": "array", "items": _ref(item)},
            "metadata": {"description": "Standard list metadata.", "allOf": [_ref(META + "ListMeta")]},
        },
        "x-kubernetes-group-version-kind": [_gvk(group, version, kind)],
    }


class _DocumentBuilder:
    """Paths and component schemas of one group-version document."""

    def __init__(self, gv: GroupVersion, source: SchemaSource) -> None:
        self.gv = gv
        self.source = source
        self.paths: dict[str, dict[str, Any]] = {}
        self.roots: list[str] = []
        self.synthesized: dict[str, Schema] = {}
        self.tag = f"{_group_camel(gv.group)[:1].lower()}{_group_camel(gv.group)[1:]}_{gv.version}"
        self.id_infix = f"{_group_camel(gv.group)}{_camel(gv.version)}"

    def schema_for(
        self, group: str, version: str, kind: str, custom: Mapping[str, Any] | None = None
    ) -> tuple[str, bool]:
        """The component name of a kind and whether its schema is published (a built-in kind's
        by Kubernetes, a custom kind's by its CRD: `custom`)."""
        name = self.source.name_for(group, version, kind)
        published = name is not None or custom is not None
        if name is None:
            name = synthesized_name(group, version, kind)
            if custom is not None:
                self.synthesized[name] = _custom_kind(group, version, kind, custom)
            elif name not in self.synthesized:  # a subresource of a custom kind names it too
                self.synthesized[name] = _synthesized_kind(group, version, kind)
        if name not in self.roots:
            self.roots.append(name)
        return name, published

    def list_schema_for(self, group: str, version: str, kind: str, item: str) -> str:
        name = self.source.name_for(group, version, f"{kind}List")
        if name is None:
            name = synthesized_name(group, version, f"{kind}List")
            self.synthesized[name] = _synthesized_list(group, version, f"{kind}List", item)
        if name not in self.roots:
            self.roots.append(name)
        return name

    def _op(
        self,
        action: str,
        op_id: str,
        description: str,
        gvk: dict[str, str],
        params: Sequence[str],
        responses: dict[str, Any],
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        op: dict[str, Any] = {"tags": [self.tag], "description": description, "operationId": op_id}
        if params:
            op["parameters"] = [_query(p) for p in params]
        if body is not None:
            op["requestBody"] = {"content": body, "required": True}
        op["responses"] = {**responses, "401": {"description": "Unauthorized"}}
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = gvk
        return op

    def _path(self, path: str, params: list[dict[str, Any]], ops: dict[str, Any]) -> None:
        if ops:
            self.paths[path] = {**ops, "parameters": [*params, _query("pretty")]}

    def add(self, r: ResourceDef) -> None:
        group, version = self.gv.group, self.gv.version
        base = f"/{self.gv.path}"
        kind_name, published = self.schema_for(group, version, r.kind, r.openapi_schema)
        list_name = self.list_schema_for(group, version, r.kind, kind_name)
        gvk = _gvk(group, version, r.kind)
        obj = _ref(kind_name)
        scope = "Namespaced" if r.namespaced else ""
        ident = f"{self.id_infix}{scope}{r.kind}"
        name_param = _path_param("name", f"name of the {r.kind}")
        ns_params = [_path_param("namespace", "the namespace of the object")] if r.namespaced else []
        collection = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
        item = f"{collection}/{{name}}"
        verbs = set(r.verbs)
        ok = {"200": {"description": "OK", "content": _content(obj)}}
        written = {
            "200": {"description": "OK", "content": _content(obj)},
            "201": {"description": "Created", "content": _content(obj)},
        }
        status = {"200": {"description": "OK", "content": _content(_ref(META + "Status"))}}
        delete_body = _content(_ref(META + "DeleteOptions"), "*/*")
        listed = {
            "200": {
                "description": "OK",
                "content": {
                    **_content(_ref(list_name)),
                    "application/json;stream=watch": {"schema": _ref(META + "WatchEvent")},
                },
            }
        }

        ops: dict[str, Any] = {}
        if "list" in verbs:
            ops["get"] = self._op(
                "list", f"list{ident}", f"list or watch objects of kind {r.kind}", gvk, _LIST_PARAMS, listed
            )
        if "create" in verbs:
            ops["post"] = self._op(
                "post", f"create{ident}", f"create a {r.kind}", gvk, _WRITE_PARAMS, written, _content(obj, "*/*")
            )
        if "deletecollection" in verbs:
            ops["delete"] = self._op(
                "deletecollection",
                f"deleteCollection{ident}",
                f"delete a collection of {r.kind}",
                gvk,
                (*_DELETE_PARAMS, *_SELECT_PARAMS),
                status,
                delete_body,
            )
        self._path(collection, ns_params, ops)

        ops = {}
        if "get" in verbs:
            ops["get"] = self._op("get", f"read{ident}", f"read the specified {r.kind}", gvk, (), ok)
        if "update" in verbs:
            ops["put"] = self._op(
                "put",
                f"replace{ident}",
                f"replace the specified {r.kind}",
                gvk,
                _WRITE_PARAMS,
                written,
                _content(obj, "*/*"),
            )
        if "delete" in verbs:
            ops["delete"] = self._op(
                "delete", f"delete{ident}", f"delete a {r.kind}", gvk, _DELETE_PARAMS, status, delete_body
            )
        if "patch" in verbs:
            ops["patch"] = self._patch_op(
                f"patch{ident}", f"partially update the specified {r.kind}", gvk, obj, published
            )
        self._path(item, [name_param, *ns_params], ops)

        if r.namespaced and "list" in verbs:
            everywhere = self._op(
                "list",
                f"list{self.id_infix}{r.kind}ForAllNamespaces",
                f"list or watch objects of kind {r.kind}",
                gvk,
                (),
                listed,
            )
            self._path(f"{base}/{r.plural}", [_query(p) for p in _LIST_PARAMS], {"get": everywhere})

        for sub in r.subresources:
            self._add_subresource(r, sub, f"{item}/{sub.name}", [name_param, *ns_params], ident, gvk)

    def _patch_op(
        self, op_id: str, description: str, gvk: dict[str, str], obj: dict[str, str], smp: bool
    ) -> dict[str, Any]:
        types = (*PATCH_TYPES, STRATEGIC_MERGE_PATCH) if smp else PATCH_TYPES
        written = {
            "200": {"description": "OK", "content": _content(obj)},
            "201": {"description": "Created", "content": _content(obj)},
        }
        body = _content(_ref(META + "Patch"), *types)
        return self._op("patch", op_id, description, gvk, (*_WRITE_PARAMS, "force"), written, body)

    def _add_subresource(
        self,
        r: ResourceDef,
        sub: Subresource,
        path: str,
        params: list[dict[str, Any]],
        ident: str,
        parent_gvk: dict[str, str],
    ) -> None:
        ident = f"{ident}{_camel(sub.name)}"
        verbs = set(sub.verbs)
        text = {"200": {"description": "OK", "content": _content({"type": "string"}, "text/plain", "application/json")}}
        ops: dict[str, Any] = {}
        if sub.name == "log" or sub.name in _CONNECT:
            # streams: the parent's kind, a text body, no schema of their own
            action = "get" if sub.name == "log" else "connect"
            query = _LOG_PARAMS if sub.name == "log" else ()
            if "get" in verbs:
                ops["get"] = self._op(
                    action, f"read{ident}", f"{sub.name} of the specified {r.kind}", parent_gvk, query, text
                )
            if "create" in verbs and sub.name != "log":
                ops["post"] = self._op(
                    action, f"connectPost{ident}", f"{sub.name} to the specified {r.kind}", parent_gvk, (), text
                )
            self._path(path, params, ops)
            return
        group, version = sub.group or r.group, sub.version or r.version
        name, published = self.schema_for(group, version, sub.kind)
        gvk = _gvk(group, version, sub.kind)
        obj = _ref(name)
        ok = {"200": {"description": "OK", "content": _content(obj)}}
        written = {
            "200": {"description": "OK", "content": _content(obj)},
            "201": {"description": "Created", "content": _content(obj)},
        }
        what = f"{sub.name} of the specified {r.kind}"
        if "get" in verbs:
            ops["get"] = self._op("get", f"read{ident}", f"read {what}", gvk, (), ok)
        if "create" in verbs:
            accepted = {**written, "202": {"description": "Accepted", "content": _content(obj)}}
            ops["post"] = self._op(
                "post", f"create{ident}", f"create {what}", gvk, _WRITE_PARAMS, accepted, _content(obj, "*/*")
            )
        if "update" in verbs:
            ops["put"] = self._op(
                "put", f"replace{ident}", f"replace {what}", gvk, _WRITE_PARAMS, written, _content(obj, "*/*")
            )
        if "patch" in verbs:
            ops["patch"] = self._patch_op(f"patch{ident}", f"partially update {what}", gvk, obj, published)
        self._path(path, params, ops)

    def document(self) -> dict[str, Any]:
        for r in self.gv.resources:
            self.add(r)
        roots = [*self.roots, *(META + m for m in ("DeleteOptions", "Patch", "Status", "WatchEvent"))]
        schemas = self.source.closure(roots, self.synthesized)
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0"},
            "paths": self.paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "BearerToken": {
                        "type": "apiKey",
                        "description": "Bearer Token authentication",
                        "name": "authorization",
                        "in": "header",
                    }
                },
            },
        }


def build_document(gv: GroupVersion, source: SchemaSource) -> dict[str, Any]:
    """The OpenAPI v3 document of one served group-version."""
    return _DocumentBuilder(gv, source).document()


def document_hash(body: bytes) -> str:
    """The `?hash=` of a document: its SHA-256, upper-case hex (kube-apiserver's style)."""
    return hashlib.sha256(body).hexdigest().upper()


class OpenAPIDocuments:
    """Every OpenAPI v3 document of one catalog, each built and serialized once.

    The root needs every document's hash, so asking for it builds them all; a single
    document is built on first request."""

    def __init__(self, resources: Sequence[ResourceDef], source: SchemaSource | None = None) -> None:
        self._gvs = {gv.path: gv for g in served_groups(resources) for gv in g.versions}
        self._source = source
        self._docs: dict[str, tuple[bytes, str]] = {}
        self._root: bytes | None = None

    def document_keys(self) -> list[str]:
        """`api/v1`, `apis/apps/v1`, ...: the documents, in discovery order."""
        return list(self._gvs)

    def document(self, key: str) -> tuple[bytes, str]:
        """The serialized document at `/openapi/v3/{key}` and its hash; 404 NotFound for no such group-version."""
        key = key.strip("/")
        if key not in self._docs:
            gv = self._gvs.get(key)
            if gv is None:
                raise StatusError(404, "NotFound", "the server could not find the requested resource")
            if self._source is None:
                self._source = default_source()
            body = orjson.dumps(build_document(gv, self._source))
            self._docs[key] = (body, document_hash(body))
        return self._docs[key]

    def root(self) -> bytes:
        """`GET /openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=H"}, ...}}`."""
        if self._root is None:
            paths = {k: {"serverRelativeURL": f"/openapi/v3/{k}?hash={self.document(k)[1]}"} for k in self._gvs}
            self._root = orjson.dumps({"paths": paths})
        return self._root


@cache
def _served() -> OpenAPIDocuments:
    return OpenAPIDocuments(catalog())


def openapi_root() -> bytes:
    """The `/openapi/v3` root for the served catalog."""
    return _served().root()


def openapi_document(key: str) -> tuple[bytes, str]:
    """(body, ETag) of `/openapi/v3/{key}` for the served catalog; `key` as in the root (`apis/apps/v1`).

    The ETag is the quoted hash, so a matching `?hash=` may be answered with
    `Cache-Control: public, immutable`."""
    body, digest = _served().document(key)
    return body, f'"{digest}"'
