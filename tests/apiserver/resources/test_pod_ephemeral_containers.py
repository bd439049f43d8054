"""pods/ephemeralcontainers, kube's podEphemeralContainersStrategy and
ValidatePodEphemeralContainersUpdate (v1.33 pkg/registry/core/pod/strategy.go,
pkg/apis/core/validation): the write takes only spec.ephemeralContainers and moves the generation;
containers may only be added, each by the rules of an ephemeral container; a pod is created
without any, a plain update may not change them, a template may not have them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.registry import meta
from apiserver.resources import core_pods
from apiserver.resources._podspec import validate_template
from apiserver.resources.core_pods import EPHEMERAL_CONTAINERS, validate, validate_ephemeral_update
from machinery.objects import Obj
from tests.apiserver.kinds_support import find, registry, run
from tests.apiserver.memstorage import MemStorage

PODS = find("", "pods")
NOW = 1_700_000_000.0


def _pod() -> Obj:
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "initContainers": [{"name": "setup", "image": "busybox"}],
        },
    }
    meta.prepare_create(PODS, pod, "default", lambda: NOW)
    core_pods.default(pod)
    return pod


def _debugger(name: str = "debugger", **more: Any) -> Obj:
    container: Obj = {"name": name, "image": "busybox", "command": ["sh"], "stdin": True, "tty": True, **more}
    return container


def _with(pod: Obj, *containers: Obj) -> Obj:
    out = copy.deepcopy(pod)
    out["spec"]["ephemeralContainers"] = [copy.deepcopy(c) for c in containers]
    core_pods.default(out)
    return out


def _fields(causes: list[Any]) -> list[tuple[str, str]]:
    return [(c.field, c.reason) for c in causes]


# -- the strategy -------------------------------------------------------------------------------


def test_the_write_takes_only_the_list_and_moves_the_generation() -> None:
    old = _pod()
    sent = _with(old, _debugger())
    sent["metadata"]["labels"] = {"sneaked": "in"}
    sent["spec"]["activeDeadlineSeconds"] = 5
    sent["status"] = {"phase": "Failed"}
    stored = meta.prepare_update(PODS, sent, old, EPHEMERAL_CONTAINERS)
    assert stored["spec"]["ephemeralContainers"] == sent["spec"]["ephemeralContainers"]
    assert stored["metadata"]["labels"] == {"app": "x"}
    assert "activeDeadlineSeconds" not in stored["spec"] and stored.get("status") == old.get("status")
    assert stored["metadata"]["generation"] == 2


def test_the_same_list_again_keeps_the_generation() -> None:
    old = meta.prepare_update(PODS, _with(_pod(), _debugger()), _pod(), EPHEMERAL_CONTAINERS)
    assert meta.prepare_update(PODS, copy.deepcopy(old), old, EPHEMERAL_CONTAINERS)["metadata"]["generation"] == 2


def test_none_null_or_empty_is_no_field() -> None:
    for none in (None, []):
        pod = _pod()
        pod["spec"]["ephemeralContainers"] = none
        core_pods.default(pod)
        assert "ephemeralContainers" not in pod["spec"]


# -- validation of the subresource's write ------------------------------------------------------


def test_adding_one_is_valid_and_so_is_adding_another() -> None:
    old = _pod()
    one = _with(old, _debugger())
    assert validate_ephemeral_update(one, old) == []
    assert validate_ephemeral_update(_with(old, _debugger(), _debugger("debugger2")), one) == []
    assert validate_ephemeral_update(_with(old, _debugger("debugger2"), _debugger()), one) == []  # reordered


def test_an_existing_one_may_not_be_removed_or_changed() -> None:
    old = _with(_pod(), _debugger())
    removed = validate_ephemeral_update(_with(old), old)
    assert _fields(removed) == [("spec.ephemeralContainers", "FieldValueForbidden")]
    assert 'existing ephemeral containers "debugger" may not be removed' in removed[0].message
    changed = validate_ephemeral_update(_with(old, _debugger(image="agnhost")), old)
    assert _fields(changed) == [("spec.ephemeralContainers", "FieldValueForbidden")]
    assert "may not be changed" in changed[0].message


@pytest.mark.parametrize(
    ("container", "field", "reason"),
    [
        (_debugger("main"), "spec.ephemeralContainers[0].name", "FieldValueDuplicate"),
        (_debugger("setup"), "spec.ephemeralContainers[0].name", "FieldValueDuplicate"),
        (_debugger(""), "spec.ephemeralContainers[0].name", "FieldValueRequired"),
        (_debugger("Not_A_Label"), "spec.ephemeralContainers[0].name", "FieldValueInvalid"),
        (_debugger(image=None), "spec.ephemeralContainers[0].image", "FieldValueRequired"),
        (
            _debugger(targetContainerName="nope"),
            "spec.ephemeralContainers[0].targetContainerName",
            "FieldValueNotFound",
        ),
        (_debugger(ports=[{"containerPort": 80}]), "spec.ephemeralContainers[0].ports", "FieldValueForbidden"),
        (
            _debugger(resources={"requests": {"cpu": "1"}}),
            "spec.ephemeralContainers[0].resources",
            "FieldValueForbidden",
        ),
        (
            _debugger(livenessProbe={"exec": {"command": ["true"]}}),
            "spec.ephemeralContainers[0].livenessProbe",
            "FieldValueForbidden",
        ),
        (
            _debugger(readinessProbe={"exec": {"command": ["true"]}}),
            "spec.ephemeralContainers[0].readinessProbe",
            "FieldValueForbidden",
        ),
        (
            _debugger(startupProbe={"exec": {"command": ["true"]}}),
            "spec.ephemeralContainers[0].startupProbe",
            "FieldValueForbidden",
        ),
        (
            _debugger(lifecycle={"postStart": {"exec": {"command": ["true"]}}}),
            "spec.ephemeralContainers[0].lifecycle",
            "FieldValueForbidden",
        ),
        (_debugger(restartPolicy="Always"), "spec.ephemeralContainers[0].restartPolicy", "FieldValueForbidden"),
        (
            _debugger(volumeMounts=[{"name": "v", "mountPath": "/v", "subPath": "x"}]),
            "spec.ephemeralContainers[0].volumeMounts[0].subPath",
            "FieldValueForbidden",
        ),
    ],
)
def test_a_new_one_follows_the_rules_of_ephemeral_containers(container: Obj, field: str, reason: str) -> None:
    old = _pod()
    assert (field, reason) in _fields(validate_ephemeral_update(_with(old, container), old))


def test_a_second_of_the_same_name_is_a_duplicate() -> None:
    old = _pod()
    causes = validate_ephemeral_update(_with(old, _debugger(), _debugger()), old)
    assert ("spec.ephemeralContainers[1].name", "FieldValueDuplicate") in _fields(causes)


def test_a_target_may_be_a_container_and_empty_resources_are_no_resources() -> None:
    old = _pod()
    assert validate_ephemeral_update(_with(old, _debugger(targetContainerName="main", resources={})), old) == []


def test_a_static_pods_mirror_takes_none() -> None:
    old = _pod()
    old["metadata"]["annotations"] = {core_pods.MIRROR_ANNOTATION: "hash"}
    causes = validate_ephemeral_update(_with(old, _debugger()), old)
    assert _fields(causes) == [("", "FieldValueForbidden")]


# -- the pod itself -----------------------------------------------------------------------------


def test_a_pod_is_created_without_any() -> None:
    causes = validate(_with(_pod(), _debugger()), None)
    assert ("spec.ephemeralContainers", "FieldValueForbidden") in _fields(causes)
    assert "cannot be set on create" in next(c.message for c in causes if c.field == "spec.ephemeralContainers")


def test_a_plain_update_may_not_change_them() -> None:
    old = _pod()
    assert _fields(validate(_with(old, _debugger()), old)) == [("spec", "FieldValueForbidden")]
    with_one = _with(old, _debugger())
    assert _fields(validate(_with(old), with_one)) == [("spec", "FieldValueForbidden")]


def test_a_pod_stored_with_an_empty_list_may_still_be_updated() -> None:
    old = _pod()
    old["spec"]["ephemeralContainers"] = []  # as a pod created before its defaulting dropped it
    assert validate(_with(old), old) == []


def test_a_template_may_not_have_them() -> None:
    deployment = {
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": _with(_pod(), _debugger())["spec"]}}
    }
    causes = validate_template(deployment)
    assert ("spec.template.spec.ephemeralContainers", "FieldValueForbidden") in _fields(causes)


# -- through the registry: the subresource's validation replaces the pod update's ---------------


def test_the_registry_validates_the_write_by_the_subresource_and_stores_it() -> None:
    reg = registry(PODS, MemStorage())

    async def go() -> None:
        created = await reg.create("default", {"metadata": {"name": "p"}, "spec": {"containers": [_debugger("main")]}})
        sent = _with(created, _debugger())
        written, _ = await reg.update("default", "p", sent, subresource=EPHEMERAL_CONTAINERS)
        assert [c["name"] for c in written["spec"]["ephemeralContainers"]] == ["debugger"]
        assert written["metadata"]["generation"] == 2
        with pytest.raises(StatusError) as refused:
            await reg.update("default", "p", _with(written), subresource=EPHEMERAL_CONTAINERS)
        assert refused.value.code == 422
        with pytest.raises(StatusError) as plain:
            await reg.update("default", "p", _with(written, _debugger(), _debugger("debugger2")))
        assert plain.value.code == 422

    run(go())
