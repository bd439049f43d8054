"""The Kubernetes object schemas our OpenAPI documents are built from.

kube-apiserver generates its schemas from the Go types; we have no Go types, so we take
the JSON Schemas the `kubernetes-validate` package ships (generated from the same
upstream OpenAPI, descriptions and patch metadata included) for the newest Kubernetes
release not newer than the one we claim to be, and turn them back into the OpenAPI v3.0
shape kube-apiserver serves: one `type` instead of `[type, "null"]`, `$ref`s into
`#/components/schemas/`, a `$ref` with siblings wrapped in `allOf` (what `kubectl explain`
and the strategic-merge-patch builder expect), no `apiVersion`/`kind` enums.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from apiserver.version import KUBE_MAJOR, KUBE_MINOR

Schema = dict[str, Any]

COMPONENTS = "#/components/schemas/"
_SOURCE_REF = "#/$defs/"
_RELEASE_DIR = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-local$")  # the non-strict variant


class SchemaSourceError(RuntimeError):
    """kubernetes-validate is missing or ships no schemas we can use."""


def schema_directory(not_newer_than: tuple[int, int] = (int(KUBE_MAJOR), int(KUBE_MINOR))) -> Path:
    """The newest `vX.Y.Z-local` schema directory of kubernetes-validate not newer than X.Y.

    Found without importing the package (its import pulls in jsonschema for nothing)."""
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise SchemaSourceError("the kubernetes-validate package is not installed")
    root = Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"
    best: tuple[tuple[int, int, int], Path] | None = None
    for d in root.iterdir() if root.is_dir() else ():
        m = _RELEASE_DIR.match(d.name)
        if m is None or not (d / "_definitions.json").is_file():
            continue
        release = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if release[:2] <= not_newer_than and (best is None or release > best[0]):
            best = (release, d)
    if best is None:
        raise SchemaSourceError(f"kubernetes-validate has no schemas for Kubernetes <= {not_newer_than}")
    return best[1]


def _single_type(t: Any) -> Any:
    if isinstance(t, list):
        kept = [x for x in t if x != "null"]
        return kept[0] if len(kept) == 1 else (kept or None)
    return t


def convert(node: Any) -> Any:
    """One JSON Schema (2020-12, nullable types) node as kube-apiserver's OpenAPI v3.0 shape."""
    if isinstance(node, list):
        return [convert(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key in ("$schema", "$id", "$defs"):
            continue
        if key == "type":
            t = _single_type(value)
            if t is not None:
                out["type"] = t
        elif key == "$ref":
            out["$ref"] = COMPONENTS + str(value).split(_SOURCE_REF, 1)[-1]
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {
                name: _drop_type_meta_enum(name, convert(sub)) if isinstance(sub, dict) else sub
                for name, sub in value.items()
            }
        elif key.startswith("x-kubernetes-") or key in ("enum", "required", "default", "example"):
            out[key] = value  # data, not schemas: copied as is
        else:
            out[key] = convert(value)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}]
    return out


def _drop_type_meta_enum(name: str, prop: Schema) -> Schema:
    # kubernetes-validate pins apiVersion/kind with an enum; kube-apiserver does not, and
    # `kubectl explain` would print it as if it were a choice
    if name in ("apiVersion", "kind"):
        prop.pop("enum", None)
    return prop


class SchemaSource:
    """All published schemas of one Kubernetes release, converted on first use."""

    def __init__(self, definitions: dict[str, Any], release: str) -> None:
        self._raw: dict[str, Any] = definitions
        self._converted: dict[str, Schema] = {}
        self.release = release  # "v1.33.0"
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in definitions.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", ()):
                self._by_gvk.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)

    @classmethod
    def from_directory(cls, directory: Path) -> SchemaSource:
        with (directory / "_definitions.json").open("rb") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("$defs"), dict):
            raise SchemaSourceError(f"{directory}/_definitions.json has no $defs")
        return cls(doc["$defs"], directory.name.removesuffix("-local"))

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def name_for(self, group: str, version: str, kind: str) -> str | None:
        """The schema name (`io.k8s.api.core.v1.Pod`) of a kind, if Kubernetes publishes one."""
        return self._by_gvk.get((group, version, kind))

    def get(self, name: str) -> Schema:
        """The converted schema; callers must not mutate it (it is shared by every document)."""
        if name not in self._converted:
            converted = convert(self._raw[name])
            if not isinstance(converted, dict):
                raise SchemaSourceError(f"schema {name} is not an object")
            self._converted[name] = converted
        return self._converted[name]

    def closure(self, roots: Iterable[str], extra: dict[str, Schema] | None = None) -> dict[str, Schema]:
        """`roots` and every schema they reach through `$ref`, roots first then in discovery order.

        `extra` holds schemas not published by Kubernetes (synthesized ones); they are
        looked up there first and may refer to published ones."""
        extra = extra or {}
        out: dict[str, Schema] = {}
        pending = list(roots)
        while pending:
            name = pending.pop(0)
            if name in out:
                continue
            schema = extra[name] if name in extra else self.get(name)
            out[name] = schema
            pending.extend(r for r in refs(schema) if r not in out)
        return out


def refs(node: Any) -> list[str]:
    """The component names a schema refers to, in document order."""
    found: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            ref = n.get("$ref")
            if isinstance(ref, str) and ref.startswith(COMPONENTS):
                found.append(ref[len(COMPONENTS) :])
            stack.extend(reversed(list(n.values())))
        elif isinstance(n, list):
            stack.extend(reversed(n))
    return found


@cache
def default_source() -> SchemaSource:
    """The schemas for the Kubernetes release we claim (loaded once per process)."""
    return SchemaSource.from_directory(schema_directory())
