"""Hypothesis over the kinds served from their schema (`stored_kind`): objects drawn from each
kind's own published schema, with a field of the wrong JSON type planted here and there.

What it shows: validation of any such body answers with causes and never raises (a body is
hostile input), and every planted wrong type is refused with a cause naming exactly its field,
as kube's decoder names it (`spec.accessModes[0]`).  The drawing follows the schema's `$ref`s,
arrays, maps and enums, so it reaches fields no hand-written sample names.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver import validation as v
from apiserver.openapi_schemas import COMPONENTS, Schema, default_source
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from tests.apiserver.resources.stored_samples import SAMPLES

MAX_DEPTH = 6
"""How deep the drawn objects go: deep enough for a pod template's containers' ports."""
MAX_FIELDS = 4
"""Properties drawn per object, items per array: bodies stay small, the draws many."""
WRONG: dict[str, Any] = {
    "string": 7,
    "integer": "seven",
    "number": "seven",
    "boolean": "true",
    "object": ["not", "an", "object"],
    "array": {"not": "an array"},
}
"""A value of each OpenAPI type's wrong JSON type (Go's decoder refuses each one)."""


def _stored() -> list[ResourceDef]:
    """The kinds `stored_kind` serves (their samples live in stored_samples.py), each with a schema."""
    source = default_source()
    kinds = [r for r in catalog() if (r.group, r.plural) in SAMPLES]
    return [r for r in kinds if source.name_for(r.group, r.version, r.kind)]


STORED = _stored()


def _resolve(schema: Schema) -> Schema:
    source = default_source()
    for _ in range(16):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(COMPONENTS):
            schema = source.get(ref[len(COMPONENTS) :])
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            schema = all_of[0]
            continue
        break
    return schema


class Drawer:
    """Draws a value for a schema, recording the paths where it planted a wrong type."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.planted: list[str] = []

    def value(self, schema: Schema, path: str, depth: int) -> Any:
        schema = _resolve(schema)
        kind = schema.get("type")
        if isinstance(kind, str) and kind in WRONG and self.data.draw(st.integers(0, 11)) == 0:
            self.planted.append(path)
            return WRONG[kind]
        if kind == "object" or "properties" in schema:
            return self.object(schema, path, depth)
        if kind == "array":
            items = schema.get("items")
            if not isinstance(items, dict) or depth >= MAX_DEPTH:
                return []
            n = self.data.draw(st.integers(0, 2))
            return [self.value(items, v.index(path, i), depth + 1) for i in range(n)]
        if kind == "string":
            enum = schema.get("enum")
            if isinstance(enum, list) and enum:
                return self.data.draw(st.sampled_from([str(e) for e in enum]) | st.text(max_size=6))
            return self.data.draw(st.text(max_size=8))
        if kind == "integer":
            return self.data.draw(st.integers(-(2**40), 2**40))
        if kind == "number":
            return self.data.draw(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10, 10))
        if kind == "boolean":
            return self.data.draw(st.booleans())
        # untyped (IntOrString, Quantity, RawExtension...): any small JSON value
        return self.data.draw(st.none() | st.integers(-5, 5) | st.text(max_size=6))

    def object(self, schema: Schema, path: str, depth: int) -> dict[str, Any]:
        if depth >= MAX_DEPTH:
            return {}
        props = schema.get("properties")
        out: dict[str, Any] = {}
        if isinstance(props, dict) and props:
            names = sorted(n for n in props if not (depth == 0 and n in ("apiVersion", "kind", "metadata")))
            if names:
                chosen = self.data.draw(st.lists(st.sampled_from(names), max_size=MAX_FIELDS, unique=True))
                for name in chosen:
                    out[name] = self.value(props[name], v.child(path, name), depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in self.data.draw(st.lists(st.text("abc", min_size=1, max_size=3), max_size=2, unique=True)):
                out[key] = self.value(extra, v.key(path, key), depth + 1)
        return out


def test_the_stored_kinds_are_found() -> None:
    # every kind with a sample (all but componentstatuses, which is read-only) has its schema
    assert len(STORED) == len(SAMPLES) >= 19, [r.plural for r in STORED]


@pytest.mark.parametrize("resource", STORED, ids=lambda r: f"{r.group or 'core'}/{r.plural}")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_schema_drawn_bodies_never_raise_and_wrong_types_are_named(resource: ResourceDef, data: st.DataObject) -> None:
    source = default_source()
    name = source.name_for(resource.group, resource.version, resource.kind)
    assert name is not None
    drawer = Drawer(data)
    obj = drawer.object(_resolve(source.get(name)), "", 0)
    obj["metadata"] = {"name": "fuzzed", **({"namespace": "default"} if resource.namespaced else {})}
    causes = resource.validate(obj, None)
    assert all(isinstance(c.field, str) and c.message for c in causes)
    named = {c.field for c in causes}
    missing = [p for p in drawer.planted if p not in named]
    assert not missing, (missing, [(c.field, c.message) for c in causes])
    resource.validate(obj, obj)  # an update with itself as the old object answers too
