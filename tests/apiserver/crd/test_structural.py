"""A CRD's schema: structural or not, what an object breaks, what it defaults, how it is
published in OpenAPI v2, what pruning keeps; and none of it fails on hostile input."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from apiserver import pruning
from apiserver.crd import structural
from apiserver.openapi_v2 import custom_definition
from apiserver.resources.base import ResourceDef

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "count": {"type": "integer", "minimum": 0, "exclusiveMaximum": True, "maximum": 5},
                "port": {"x-kubernetes-int-or-string": True},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "note": {"type": "string", "nullable": True},
                "inner": {"type": "object", "properties": {"x": {"type": "integer", "default": 7}}, "default": {}},
                "pick": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {}},
            },
        }
    },
}


def fields_of(causes: list[Any]) -> dict[str, str]:
    return {c.field: c.message for c in causes}


def test_a_valid_object_breaks_nothing() -> None:
    obj = {"spec": {"name": "ab", "count": 4, "port": "http", "tags": ["x"], "labels": {"k": "v"}, "note": None}}
    assert structural.validate(SCHEMA, obj) == []


def test_each_rule_names_its_field_in_kubes_words() -> None:
    obj = {
        "spec": {
            "name": "A",
            "count": 5,
            "port": 1.5,
            "mode": "c",
            "tags": ["x", "x", "y", "z"],
            "labels": {"k": 1},
            "pick": {"a": 1, "b": 2},
            "template": {"metadata": {}},
        }
    }
    found = fields_of(structural.validate(SCHEMA, obj))
    assert "should be at least 2 chars long" in found["spec.name"] or "should match" in found["spec.name"]
    assert found["spec.count"] == "Invalid value: 5: spec.count in body should be less than 5"
    assert "must be of type integer,string" in found["spec.port"]
    assert found["spec.mode"] == 'Unsupported value: "c": supported values: "a", "b"'
    assert found["spec.tags"] == "Too many: 4: must have at most 3 items"
    assert found["spec.tags[1]"] == 'Duplicate value: "x"'
    assert found["spec.labels.k"] == 'Invalid value: "integer": spec.labels.k in body must be of type string: "integer"'
    assert "oneOf" in found["spec.pick"]
    assert found["spec.template.apiVersion"].startswith("Required value")
    assert fields_of(structural.validate(SCHEMA, {"spec": {}}))["spec.name"] == "Required value"
    assert fields_of(structural.validate(SCHEMA, {"spec": "x"}))["spec"].endswith('must be of type object: "string"')


def test_defaults_fill_what_is_missing_top_down() -> None:
    obj: dict[str, Any] = {"spec": {"name": "ab"}}
    structural.apply_defaults(SCHEMA, obj)
    assert obj["spec"]["mode"] == "a" and obj["spec"]["inner"] == {"x": 7}
    assert structural.has_defaults(SCHEMA) and not structural.has_defaults({"type": "object"})


def test_a_schema_that_is_not_structural_is_named_where() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {},
            "b": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "c": {"type": "array"},
            "d": {"type": "thing"},
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
        },
    }
    found = fields_of(structural.schema_problems(bad, "s"))
    assert set(found) == {
        "s.properties[a].type",
        "s.properties[b].additionalProperties",
        "s.properties[c].items",
        "s.properties[d].type",
        "s.properties[metadata]",
    }
    assert structural.schema_problems({"type": "string"}, "s")[0].field == "s.type"
    assert structural.schema_problems(SCHEMA, "s") == []


def test_pruning_follows_the_schema_and_keeps_what_it_preserves() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "empty": {"type": "object"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
                    "embedded": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {}},
                },
            }
        },
    }
    pruning.register_custom("prune.example.com", "v1", "Thing", schema)
    try:
        obj = {
            "metadata": {"name": "x", "bogus": 1},
            "spec": {
                "empty": {"a": 1},
                "free": {"b": 2},
                "open": {"c": 3},
                "embedded": {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "junk": 1}, "d": 4},
            },
            "other": 5,
        }
        dropped = pruning.prune("prune.example.com", "v1", "Thing", obj)
        assert sorted(dropped) == [
            "metadata.bogus",
            "other",
            "spec.embedded.d",
            "spec.embedded.metadata.junk",
            "spec.empty.a",
        ]
        assert obj["spec"]["free"] == {"b": 2} and obj["spec"]["open"] == {"c": 3}
    finally:
        pruning.forget_custom("prune.example.com", "v1", "Thing")


def test_v2_publishing_is_kubes() -> None:
    res = ResourceDef("g.example.com", "v1", "Foo", "foos", "foo", True)
    published = custom_definition(
        res,
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": True, "default": "x"},
                "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"c": {}}},
                "e": {"type": "integer", "anyOf": [{"minimum": 1}]},
            },
            "required": ["a", "e"],
        },
    )
    props = published["properties"]
    assert props["a"] == {} and props["b"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["e"] == {"type": "integer"} and published["required"] == ["e"]
    assert props["metadata"]["$ref"].endswith("ObjectMeta")
    bare = custom_definition(res, {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    assert bare == {
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": "g.example.com", "version": "v1", "kind": "Foo"}],
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=25,
)


KEYWORDS = ("type", "enum", "items", "properties", "required", "maximum", "pattern", "oneOf", "not")
KEYWORDS += ("additionalProperties", "nullable", "default", "x-kubernetes-embedded-resource", "uniqueItems")


@settings(max_examples=300, deadline=None)
@given(schema=st.dictionaries(st.sampled_from(KEYWORDS), json_values, max_size=6), obj=json_values)
@example(schema={"enum": [-(2**63) - 1]}, obj=[])  # found by CI: an integer orjson cannot write
@example(schema={"type": "array", "uniqueItems": True}, obj=[2**70, 2**70])
@example(schema={"x-kubernetes-embedded-resource": True, "required": 1}, obj=None)  # found by CI: v2 publishing
def test_hostile_schemas_and_objects_never_raise(schema: dict[str, Any], obj: Any) -> None:
    """Whatever a stored schema and a request hold (they are checked, but this layer trusts
    neither), checking, defaulting, the structural check and v2 publishing only answer."""
    structural.validate(schema, obj)
    structural.validate(SCHEMA, obj)
    structural.apply_defaults(schema, obj)
    structural.schema_problems(schema, "s")
    structural.has_defaults(schema)
    custom_definition(ResourceDef("g.example.com", "v1", "Foo", "foos", "foo", True), schema)
