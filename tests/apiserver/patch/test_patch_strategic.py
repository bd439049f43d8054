"""Strategic merge patch: the patches kubectl really sends, kube's own order cases, the
directives, hostile patches, and two properties (no schema = JSON merge patch; inputs are
never changed)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.patch.errors import PatchError
from apiserver.patch.merge_patch import apply_merge_patch as apply_json_merge_patch
from apiserver.patch.schema import UNKNOWN, Meta, meta_for
from apiserver.patch.strategic import apply_strategic_merge_patch as smp

DEPLOY = meta_for("apps", "v1", "Deployment")
NODE = meta_for("", "v1", "Node")
POD = meta_for("", "v1", "Pod")


def deployment(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": list(containers)}},
            **spec,
        },
    }


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


def pod_spec_patch(**fields: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": fields}}}


WEB = {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}]}
SIDECAR = {"name": "log", "image": "busybox", "args": ["tail"]}


# --- kubectl's cases -----------------------------------------------------------------------


def test_changing_one_image_keeps_the_other_container_and_its_fields() -> None:
    out = smp(deployment(WEB, SIDECAR), pod_spec_patch(containers=[{"name": "web", "image": "nginx:1.28"}]), DEPLOY)
    assert containers(out) == [{**WEB, "image": "nginx:1.28"}, SIDECAR]


def test_adding_a_container_puts_it_first_as_kube_does() -> None:
    out = smp(deployment(WEB), pod_spec_patch(containers=[{"name": "log", "image": "busybox"}]), DEPLOY)
    assert [c["name"] for c in containers(out)] == ["log", "web"]
    assert containers(out)[1] == WEB


def test_patch_delete_removes_the_container_with_that_name() -> None:
    patch = pod_spec_patch(containers=[{"$patch": "delete", "name": "log"}])
    assert containers(smp(deployment(WEB, SIDECAR), patch, DEPLOY)) == [WEB]


def test_kubectl_apply_body_with_set_element_order() -> None:
    # What `kubectl apply` (client side) sends when an image changes: research/kubectl-surface.md.
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "web"}],
                    "containers": [{"image": "nginx:1.28", "name": "web"}],
                }
            },
        },
    }
    out = smp(deployment(WEB), patch, DEPLOY)
    assert out["spec"]["replicas"] == 3
    assert containers(out) == [{**WEB, "image": "nginx:1.28"}]
    assert out["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    assert out["metadata"]["labels"] == {"app": "web"}
    assert "$setElementOrder/containers" not in out["spec"]["template"]["spec"]


def test_set_element_order_reorders_containers() -> None:
    patch = pod_spec_patch(**{"$setElementOrder/containers": [{"name": "log"}, {"name": "web"}]})
    assert [c["name"] for c in containers(smp(deployment(WEB, SIDECAR), patch, DEPLOY))] == ["log", "web"]


def test_set_element_order_with_a_new_container_in_the_middle() -> None:
    third = {"name": "metrics", "image": "prom"}
    patch = pod_spec_patch(
        **{"$setElementOrder/containers": [{"name": "web"}, {"name": "metrics"}, {"name": "log"}]},
        containers=[third],
    )
    out = containers(smp(deployment(WEB, SIDECAR), patch, DEPLOY))
    assert out == [WEB, third, SIDECAR]


def test_env_is_merged_by_name() -> None:
    web = {**WEB, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    patch = pod_spec_patch(
        containers=[{"name": "web", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]
    )
    env = containers(smp(deployment(web), patch, DEPLOY))[0]["env"]
    assert env == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]


def test_null_deletes_node_unschedulable() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "spec": {"unschedulable": True, "podCIDR": "10.0.0.0/24"},
    }
    out = smp(node, {"spec": {"unschedulable": None}}, NODE)
    assert out["spec"] == {"podCIDR": "10.0.0.0/24"}


def test_retain_keys_on_deployment_strategy_drops_rolling_update() -> None:
    obj = deployment(WEB, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert smp(obj, patch, DEPLOY)["spec"]["strategy"] == {"type": "Recreate"}


def test_without_retain_keys_the_strategy_merges() -> None:
    obj = deployment(WEB, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
    out = smp(obj, {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 2}}}}, DEPLOY)
    assert out["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}


def test_retain_keys_must_name_every_key_of_the_patch() -> None:
    obj = deployment(WEB, strategy={"type": "RollingUpdate"})
    with pytest.raises(PatchError, match=r"spec\.strategy: \$retainKeys must contain every key"):
        smp(obj, {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}, DEPLOY)


def test_tolerations_are_replaced_not_merged() -> None:
    pod = {"spec": {"tolerations": [{"key": "a", "operator": "Exists"}], "containers": [WEB]}}
    out = smp(pod, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}, POD)
    assert out["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_volumes_merge_by_name_and_retain_keys_inside_an_item() -> None:
    pod = {"spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "secret": {"secretName": "s"}}]}}
    patch = {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}]}}
    assert smp(pod, patch, POD)["spec"]["volumes"] == [
        {"name": "v", "configMap": {"name": "cm"}},
        {"name": "w", "secret": {"secretName": "s"}},
    ]


def test_finalizers_union_and_delete_from_primitive_list() -> None:
    obj = {"metadata": {"name": "x", "finalizers": ["a", "b"]}}
    assert smp(obj, {"metadata": {"finalizers": ["c"]}}, POD)["metadata"]["finalizers"] == ["c", "a", "b"]
    out = smp(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, POD)
    assert out["metadata"]["finalizers"] == ["b"]


def test_list_patch_replace_directive_replaces_a_merging_list() -> None:
    patch = pod_spec_patch(containers=[{"$patch": "replace"}, {"name": "only", "image": "x"}])
    assert containers(smp(deployment(WEB, SIDECAR), patch, DEPLOY)) == [{"name": "only", "image": "x"}]


def test_map_patch_replace_and_delete_directives() -> None:
    obj = deployment(WEB)
    out = smp(obj, {"metadata": {"labels": {"$patch": "replace", "tier": "db"}}}, DEPLOY)
    assert out["metadata"]["labels"] == {"tier": "db"}
    out = smp(obj, {"metadata": {"labels": {"$patch": "delete"}}}, DEPLOY)
    assert out["metadata"]["labels"] == {}
    out = smp(obj, {"metadata": {"labels": {"$patch": "merge", "tier": "db"}}}, DEPLOY)
    assert out["metadata"]["labels"] == {"app": "web", "tier": "db"}


def test_values_taken_whole_lose_directives_and_nulls() -> None:
    obj: dict[str, Any] = {"spec": {}}
    patch = {
        "spec": {
            "containers": [{"name": "a", "image": None, "$setElementOrder/env": []}, {"$patch": "delete", "name": "b"}]
        }
    }
    assert smp(obj, patch, POD)["spec"]["containers"] == [{"name": "a"}]


# --- kube's own order cases (strategicpatch/patch_test.go, three-way patch onto current) ---

TEST_SCHEMA = Meta(
    {
        "properties": {
            "mergingList": {
                "x-kubernetes-patch-strategy": "merge",
                "x-kubernetes-patch-merge-key": "name",
                "items": {"properties": {}},
            },
            "mergingIntList": {"x-kubernetes-patch-strategy": "merge", "items": {}},
        }
    },
    {},
)


def names(*ns: int, extra: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [{"name": n, **(extra or {}).get(n, {})} for n in ns]


@pytest.mark.parametrize(
    ("current", "patch", "result"),
    [
        (  # set elements order in a list with server-only items 2
            names(1, 2, 9, 3, 4),
            {"$setElementOrder/mergingList": names(2, 1, 4, 3)},
            names(2, 1, 9, 4, 3),
        ),
        (  # ... server-only items 3
            names(1, 2, 7, 9, 8, 3, 4),
            {"$setElementOrder/mergingList": names(2, 1, 4, 3)},
            names(2, 1, 7, 9, 8, 4, 3),
        ),
        (  # ... server-only items
            names(1, 3, 4, 2, 9),
            {"$setElementOrder/mergingList": names(4, 2, 3, 1)},
            names(4, 2, 3, 1, 9),
        ),
        (  # add multiple items in a list and preserve order
            names(1, 2),
            {"$setElementOrder/mergingList": names(1, 4, 2, 3), "mergingList": names(4, 3)},
            names(1, 4, 2, 3),
        ),
        (  # nested patch merge with empty list
            names(2),
            {"mergingList": names(1)},
            names(1, 2),
        ),
    ],
)
def test_kube_order_cases_for_lists_of_maps(current: Any, patch: dict[str, Any], result: Any) -> None:
    assert smp({"mergingList": current}, patch, TEST_SCHEMA) == {"mergingList": result}


@pytest.mark.parametrize(
    ("current", "patch", "result"),
    [
        (
            [1, 2, 3, 4],
            {"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]},
            [1, 2, 4],
        ),
        ([1, 2, 3, 3, 4], {"$deleteFromPrimitiveList/mergingIntList": [3]}, [1, 2, 4]),
        (
            [1, 2, 3, 4],
            {
                "$setElementOrder/mergingIntList": [1, 2, 4],
                "$deleteFromPrimitiveList/mergingIntList": [3],
                "mergingIntList": [4],
            },
            [1, 2, 4],
        ),
        ([1, 2], {"mergingIntList": [2, 3]}, [1, 2, 3]),
        ([1, 2, 4], {"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3]}, [1, 2, 3, 4]),
    ],
)
def test_kube_cases_for_lists_of_scalars(current: Any, patch: dict[str, Any], result: Any) -> None:
    assert smp({"mergingIntList": current}, patch, TEST_SCHEMA) == {"mergingIntList": result}


# --- bad patches ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"metadata": {"labels": {"$patch": "explode"}}}, r"metadata\.labels: unknown patch directive"),
        (pod_spec_patch(containers=[{"image": "x"}]), r"containers: a list item has no merge key 'name'"),
        (pod_spec_patch(containers=[{"$patch": "delete"}]), r"no merge key"),
        (pod_spec_patch(containers=[{"$patch": "merge", "name": "web"}]), r"not supported on list items"),
        (pod_spec_patch(containers=["web"]), r"not all of one kind"),
        (pod_spec_patch(**{"$setElementOrder/containers": {"name": "web"}}), r"must be a list"),
        (
            pod_spec_patch(**{"$setElementOrder/containers": [{"name": "log"}]}, containers=[{"name": "web"}]),
            r"does not match",
        ),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}, r"must be a list"),
        ({"metadata": {"$retainKeys": "name"}}, r"must be a list of field names"),
        ({"metadata": {"$setElementOrder/": []}}, r"names no field"),
    ],
)
def test_bad_patches_raise_patch_error_naming_the_field(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        smp(deployment(WEB, SIDECAR), patch, DEPLOY)


def test_a_patch_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(PatchError):
        smp(deployment(WEB), [{"op": "add"}], DEPLOY)  # type: ignore[arg-type]


def test_a_deeply_nested_patch_is_refused_not_a_recursion_error() -> None:
    patch: dict[str, Any] = {}
    inner = patch
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(PatchError, match="nested more than"):
        smp({}, patch, UNKNOWN)


# --- properties ----------------------------------------------------------------------------

keys = st.text(alphabet="abcd", min_size=1, max_size=2)
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.text(alphabet="xy", max_size=2)
# Inside lists no nulls: kube (and we) drop nulls from values taken whole, RFC 7386 keeps them there.
list_items = st.recursive(
    st.booleans() | st.integers(-3, 3) | st.text(alphabet="xy", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=6,
)
values = st.recursive(
    scalars | st.lists(list_items, max_size=3),
    lambda inner: st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
documents = st.dictionaries(keys, values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(documents, documents)
def test_without_schema_or_directives_it_is_json_merge_patch(original: dict[str, Any], patch: dict[str, Any]) -> None:
    assert smp(original, patch, UNKNOWN) == apply_json_merge_patch(original, patch)


directive_keys = st.sampled_from(
    [
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$deleteFromPrimitiveList/args",
        "containers",
        "name",
        "image",
        "args",
        "env",
    ]
)
hostile = st.recursive(
    scalars | st.sampled_from(["replace", "merge", "delete", "web", "log"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(directive_keys | keys, inner, max_size=4),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(directive_keys | keys, hostile, max_size=4))
def test_a_patch_never_mutates_its_inputs_and_fails_only_with_patch_error(spec_patch: dict[str, Any]) -> None:
    original = deployment(WEB, SIDECAR)
    patch = pod_spec_patch(**spec_patch)
    before = (copy.deepcopy(original), copy.deepcopy(patch))
    try:
        out = smp(original, patch, DEPLOY)
    except PatchError:
        out = None
    assert (original, patch) == before
    if out is not None:
        out["spec"]["replicas"] = 99  # the result shares nothing with the inputs
        assert original["spec"]["replicas"] == 1
