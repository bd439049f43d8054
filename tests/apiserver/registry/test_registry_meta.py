"""System metadata on create and update, and what a DELETE plans: pure rules, given the time."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.registry import deletion, meta
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.strategy import BUILTIN_STATUS, FINALIZE, LABELS, STATUS, UpdateStrategy, status_resetting
from apiserver.registry.subresources import BINDING
from apiserver.resources.base import ResourceDef, Subresource
from machinery.timestamps import format_time

PODS = ResourceDef(
    "",
    "v1",
    "Pod",
    "pods",
    "pod",
    True,
    subresources=(Subresource("status", "Pod", handler=STATUS_VIEW),),
    graceful=True,
)
MAPS = ResourceDef("", "v1", "ConfigMap", "configmaps", "configmap", True, bumps_generation=False)
NAMESPACES = ResourceDef(
    "",
    "v1",
    "Namespace",
    "namespaces",
    "namespace",
    False,
    subresources=(Subresource("status", "Namespace", handler=STATUS_VIEW),),
    spec_finalizers=True,
)
NOW = 1_700_000_000.0


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def test_create_fills_server_fields_and_namespace_from_the_url() -> None:
    obj = pod()
    obj["status"] = {"phase": "Running"}
    obj["metadata"]["resourceVersion"] = "7"
    meta.prepare_create(PODS, obj, "default", lambda: NOW)
    m = obj["metadata"]
    assert m["namespace"] == "default" and m["generation"] == 1 and len(m["uid"]) == 36
    assert m["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert "resourceVersion" not in m and "status" not in obj  # status is written through /status only


def test_create_in_another_namespace_than_the_url_is_400() -> None:
    obj = pod()
    obj["metadata"]["namespace"] = "other"
    with pytest.raises(StatusError) as e:
        meta.prepare_create(PODS, obj, "default")
    assert e.value.code == 400


def test_generate_name() -> None:
    obj = {"metadata": {"generateName": "web-"}}
    meta.prepare_create(MAPS, obj, "default")
    assert obj["metadata"]["name"].startswith("web-") and len(obj["metadata"]["name"]) == 9
    assert "generation" not in obj["metadata"]


def test_update_bumps_generation_only_on_spec_change_and_keeps_status() -> None:
    old = pod()
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    old["status"] = {"phase": "Running"}
    same = meta.prepare_update(PODS, {**old, "status": {"phase": "Failed"}}, old)
    assert same["metadata"]["generation"] == 1 and same["status"] == {"phase": "Running"}
    changed = meta.prepare_update(PODS, {**old, "spec": {"containers": []}}, old)
    assert changed["metadata"]["generation"] == 2


def test_custom_resource_status_update_changes_only_status() -> None:
    old = pod()
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    labelled = {**old["metadata"], "labels": {"a": "b"}, "annotations": {"x": "y"}}
    new = {**old, "metadata": labelled, "spec": {"nodeName": "x"}, "status": {"phase": "Running"}}
    result = meta.prepare_update(PODS, new, old, STATUS)
    assert result["spec"] == old["spec"] and result["status"] == {"phase": "Running"}
    assert result["metadata"] == old["metadata"]  # a CRD's status strategy: only status


def _status_write(strategy: UpdateStrategy) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(old, sent, stored) of a /status write that changes metadata, spec and status at once."""
    old = pod(image="a")
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    old["metadata"]["labels"] = {"app": "web"}
    sent_meta = {**old["metadata"], "labels": {"app": "db"}, "annotations": {"note": "kept"}}
    sent_meta |= {"uid": old["metadata"]["uid"], "creationTimestamp": "2000-01-01T00:00:00Z", "generation": 9}
    sent_meta["deletionTimestamp"] = "2000-01-01T00:00:00Z"
    sent = {**old, "metadata": sent_meta, "spec": {"image": "b"}, "status": {"phase": "Running"}}
    return old, sent, meta.prepare_update(PODS, sent, old, strategy)


def test_builtin_status_update_keeps_the_requests_metadata_and_resets_spec() -> None:
    """kube's built-in *StatusStrategy: the request's object, spec reset, system metadata kept."""
    old, _, stored = _status_write(BUILTIN_STATUS)
    assert stored["status"] == {"phase": "Running"} and stored["spec"] == old["spec"]
    assert stored["metadata"]["annotations"] == {"note": "kept"} and stored["metadata"]["labels"] == {"app": "db"}
    for system in ("uid", "creationTimestamp", "generation"):
        assert stored["metadata"][system] == old["metadata"][system]
    assert "deletionTimestamp" not in stored["metadata"]


def test_deployment_status_update_also_resets_labels() -> None:
    old, _, stored = _status_write(status_resetting(LABELS))
    assert stored["metadata"]["labels"] == {"app": "web"} and stored["metadata"]["annotations"] == {"note": "kept"}
    unlabelled = {**old, "metadata": {k: v for k, v in old["metadata"].items() if k != "labels"}}
    sent = {**unlabelled, "metadata": {**unlabelled["metadata"], "labels": {"new": "x"}}}
    assert "labels" not in meta.prepare_update(PODS, sent, unlabelled, status_resetting(LABELS))["metadata"]


def test_a_resets_strategy_names_fields_and_nothing_taken() -> None:
    with pytest.raises(ValueError):
        UpdateStrategy("status", takes=("status",), resets=(("spec",),))
    with pytest.raises(ValueError):
        UpdateStrategy("status", resets=((),))


def test_a_subresource_strategy_built_at_run_time_takes_its_field_and_keeps_the_rest() -> None:
    old = pod(replicas=1, image="a")
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    old["status"] = {"phase": "Running"}
    sent = {**old, "metadata": {**old["metadata"], "labels": {"x": "y"}}, "status": {"phase": "Failed"}}
    sent["spec"] = {"replicas": 3, "image": "b"}  # and no containers
    replicas = UpdateStrategy("replicas", takes=("spec", "replicas"), moves_generation=True)
    result = meta.prepare_update(PODS, sent, old, replicas)
    assert result["spec"] == {**old["spec"], "replicas": 3} and result["status"] == {"phase": "Running"}
    assert "labels" not in result["metadata"] and result["metadata"]["generation"] == 2
    still = UpdateStrategy("replicas", takes=("spec", "replicas"))  # generation stays unless it says so
    assert meta.prepare_update(PODS, sent, old, still)["metadata"]["generation"] == 1
    left_out = meta.prepare_update(PODS, {**old, "spec": {"image": "b"}}, old, replicas)
    assert left_out["spec"] == {k: v for k, v in old["spec"].items() if k != "replicas"}  # left out: removed
    emptied = UpdateStrategy("replicas", takes=("spec", "replicas"), empty=lambda: 0)
    assert meta.prepare_update(PODS, {**old, "spec": None}, old, emptied)["spec"] == {**old["spec"], "replicas": 0}
    with pytest.raises(ValueError):
        UpdateStrategy("nothing", takes=())


def test_update_cannot_change_uid() -> None:
    old = pod()
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    new = {**old, "metadata": {**old["metadata"], "uid": "other"}}
    with pytest.raises(StatusError) as e:
        meta.prepare_update(PODS, new, old)
    assert e.value.code == 422 and e.value.details["causes"][0]["field"] == "metadata.uid"


def stored_pod(**spec: Any) -> dict[str, Any]:
    obj = pod(**spec)
    meta.prepare_create(PODS, obj, "default", lambda: NOW)
    obj["metadata"]["resourceVersion"] = "5"
    return obj


def test_unscheduled_pod_is_deleted_at_once() -> None:
    assert deletion.plan_delete(PODS, stored_pod(), DeleteOptions(), NOW).action == "delete"


def test_scheduled_pod_is_deleted_gracefully_then_confirmed_with_grace_zero() -> None:
    obj = stored_pod(nodeName="n1", terminationGracePeriodSeconds=30)
    plan = deletion.plan_delete(PODS, obj, DeleteOptions(), NOW)
    assert plan.action == "update"
    assert plan.obj["metadata"]["deletionGracePeriodSeconds"] == 30
    assert plan.obj["metadata"]["deletionTimestamp"] == format_time(NOW + 30)
    again = deletion.plan_delete(PODS, plan.obj, DeleteOptions(), NOW + 1)
    assert again.action == "nothing"
    assert deletion.plan_delete(PODS, plan.obj, DeleteOptions(grace_period_seconds=0), NOW + 2).action == "delete"


def test_finalizers_hold_the_object() -> None:
    obj = {"metadata": {"name": "c", "namespace": "d", "uid": "u", "resourceVersion": "3", "finalizers": ["x/y"]}}
    plan = deletion.plan_delete(MAPS, obj, DeleteOptions(), NOW)
    assert plan.action == "update" and plan.obj["metadata"]["deletionTimestamp"]
    assert not deletion.finished(MAPS, plan.obj)
    plan.obj["metadata"]["finalizers"] = []
    assert deletion.finished(MAPS, plan.obj)


def test_foreground_and_orphan_add_the_garbage_collectors_finalizers() -> None:
    obj = {"metadata": {"name": "c", "uid": "u", "resourceVersion": "3"}}
    fg = deletion.plan_delete(MAPS, obj, DeleteOptions(propagation_policy="Foreground"), NOW)
    assert fg.obj["metadata"]["finalizers"] == ["foregroundDeletion"]
    orphan = deletion.plan_delete(MAPS, obj, DeleteOptions(propagation_policy="Orphan"), NOW)
    assert orphan.obj["metadata"]["finalizers"] == ["orphan"]


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (DeleteOptions(precondition_uid="other"), "UID in precondition"),
        (DeleteOptions(precondition_resource_version="4"), "ResourceVersion in precondition"),
    ],
)
def test_preconditions_are_409(options: DeleteOptions, why: str) -> None:
    with pytest.raises(StatusError) as e:
        deletion.plan_delete(PODS, stored_pod(), options, NOW)
    assert e.value.code == 409 and why in e.value.message


@pytest.mark.parametrize(
    ("body", "query", "code"),
    [
        ({"gracePeriodSeconds": "x"}, {}, 400),
        ({}, {"propagationPolicy": "Sideways"}, 422),
        ({"preconditions": []}, {}, 400),
        ([], {}, 400),
    ],
)
def test_bad_delete_options(body: Any, query: dict[str, str], code: int) -> None:
    with pytest.raises(StatusError) as e:
        DeleteOptions.parse(body, query)
    assert e.value.code == code


def namespace(**spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "ns1", "uid": "u", "resourceVersion": "5"},
        "status": {"phase": "Active"},
    }
    obj["spec"] = {"finalizers": ["kubernetes"], **spec}
    return obj


def test_namespace_delete_marks_it_terminating_and_keeps_it_for_the_namespace_controller() -> None:
    plan = deletion.plan_delete(NAMESPACES, namespace(), DeleteOptions(propagation_policy="Background"), NOW)
    assert plan.action == "update" and plan.obj["status"]["phase"] == "Terminating"
    assert plan.obj["metadata"]["deletionTimestamp"] == format_time(NOW)
    assert "deletionGracePeriodSeconds" not in plan.obj["metadata"] and "finalizers" not in plan.obj["metadata"]
    assert deletion.plan_delete(NAMESPACES, plan.obj, DeleteOptions(), NOW + 1).action == "nothing"
    assert not deletion.finished(NAMESPACES, plan.obj)
    finalized = meta.prepare_update(
        NAMESPACES, {"spec": {"finalizers": []}, "metadata": {"labels": {"x": "y"}}}, plan.obj, FINALIZE
    )
    assert finalized["spec"]["finalizers"] == [] and finalized["status"]["phase"] == "Terminating"
    assert "labels" not in finalized["metadata"]  # /finalize takes spec.finalizers only
    # the /finalize that empties spec.finalizers removes it (kube's namespace controller sends
    # no DELETE after it); one that leaves a finalizer, or a GC finalizer in metadata, does not
    assert deletion.finished(NAMESPACES, finalized)
    assert not deletion.finished(NAMESPACES, {**finalized, "spec": {"finalizers": ["example.com/x"]}})
    assert not deletion.finished(
        NAMESPACES, {**finalized, "metadata": {**finalized["metadata"], "finalizers": ["orphan"]}}
    )
    assert not deletion.finished(NAMESPACES, {**finalized, "metadata": {"name": "ns1"}})  # not deleted at all
    assert deletion.plan_delete(NAMESPACES, finalized, DeleteOptions(), NOW + 2).action == "delete"


def test_namespace_orphan_policy_adds_the_finalizer_and_only_finalize_changes_spec_finalizers() -> None:
    plan = deletion.plan_delete(NAMESPACES, namespace(), DeleteOptions(propagation_policy="Orphan"), NOW)
    assert plan.obj["metadata"]["finalizers"] == ["orphan"]
    replaced = meta.prepare_update(NAMESPACES, {"metadata": {"name": "ns1"}, "spec": {"finalizers": []}}, namespace())
    assert replaced["spec"]["finalizers"] == ["kubernetes"]


def test_a_deleted_object_goes_on_the_update_that_removes_its_last_finalizer() -> None:
    obj = {"metadata": {"name": "c", "deletionTimestamp": "x", "deletionGracePeriodSeconds": 0}}
    assert deletion.finished(MAPS, obj)
    assert not deletion.finished(MAPS, {"metadata": {**obj["metadata"], "finalizers": ["a/b"]}})
    assert not deletion.finished(MAPS, {"metadata": {**obj["metadata"], "deletionGracePeriodSeconds": 30}})
    no_grace = {"metadata": {"name": "c", "deletionTimestamp": "x"}}  # kube counts no grace period as 0
    assert deletion.finished(MAPS, no_grace)


def test_empty_metadata_maps_and_lists_are_not_stored() -> None:
    obj = pod()
    obj["metadata"].update(labels={}, annotations={}, finalizers=[], ownerReferences=[], generateName="")
    meta.prepare_create(PODS, obj, "default", lambda: NOW)
    assert set(obj["metadata"]) == {"name", "namespace", "uid", "creationTimestamp", "generation"}
    new = meta.prepare_update(PODS, {**obj, "metadata": {**obj["metadata"], "labels": {}, "annotations": None}}, obj)
    assert "labels" not in new["metadata"] and "annotations" not in new["metadata"]


def test_binding_sets_the_node_and_keeps_the_generation() -> None:
    """kube's BindingREST writes past the pod strategy: a scheduled pod is still generation 1,
    while a spec change through the pod itself moves it (conformance 'Ephemeral Containers')."""
    old = pod()
    meta.prepare_create(PODS, old, "default", lambda: NOW)
    sent = pod(nodeName="node-1")
    sent["metadata"]["labels"] = {"ignored": "yes"}
    bound = meta.prepare_update(PODS, sent, old, BINDING)
    assert bound["spec"]["nodeName"] == "node-1" and bound["metadata"]["generation"] == 1
    assert "labels" not in bound["metadata"]  # the binding takes spec.nodeName, nothing else
    changed = pod(nodeName="node-1", ephemeralContainers=[{"name": "e", "image": "i"}])
    changed["metadata"] = dict(bound["metadata"])
    assert meta.prepare_update(PODS, changed, bound)["metadata"]["generation"] == 2
