"""Patch metadata read from kubernetes-validate's schemas: the markers kube's strategic merge
patch and server-side apply rely on, `$ref`s followed, unknown kinds and fields."""

from __future__ import annotations

from apiserver.patch.schema import UNKNOWN, meta_for, meta_for_object


def test_container_list_markers_through_refs() -> None:
    containers = meta_for("apps", "v1", "Deployment").field("spec").field("template").field("spec").field("containers")
    assert containers.strategies == {"merge"}
    assert containers.merge_key == "name"
    assert (containers.list_type, containers.list_map_keys) == ("map", ("name",))
    ports = containers.item().field("ports")
    assert ports.list_map_keys == ("containerPort", "protocol")
    assert containers.item().field("env").merge_key == "name"


def test_field_and_definition_markers() -> None:
    deploy = meta_for("apps", "v1", "Deployment")
    assert deploy.field("spec").field("strategy").strategies == {"retainKeys"}
    assert deploy.field("spec").field("selector").map_type == "atomic"  # on the LabelSelector definition
    assert deploy.field("metadata").field("labels").map_type == "granular"
    assert deploy.field("spec").has_field("replicas")
    assert not deploy.field("metadata").field("labels").has_field("app")
    pod = meta_for("", "v1", "Pod").field("spec")
    assert pod.field("volumes").strategies == {"merge", "retainKeys"}
    assert pod.field("tolerations").list_type == "atomic"
    assert pod.field("tolerations").strategies == frozenset()
    assert pod.field("nodeSelector").map_type == "atomic"


def test_finalizers_are_a_merging_set() -> None:
    finalizers = meta_for("", "v1", "Namespace").field("metadata").field("finalizers")
    assert finalizers.list_type == "set"
    assert finalizers.strategies == {"merge"}


def test_unknown_kinds_fields_and_free_form_keys() -> None:
    assert meta_for("example.com", "v1", "Thing") is UNKNOWN
    assert meta_for_object({"apiVersion": "example.com/v1", "kind": "Thing"}) is UNKNOWN
    assert meta_for_object({"kind": 3}) is UNKNOWN
    assert UNKNOWN.field("x").item().field("y") is UNKNOWN
    deploy = meta_for_object({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert deploy.field("spec").field("noSuchField") is UNKNOWN
    labels = deploy.field("metadata").field("labels")
    assert labels.field("a") is labels.field("b")  # free-form keys share one node: no unbounded cache
