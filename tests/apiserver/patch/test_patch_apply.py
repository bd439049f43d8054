"""Server-side apply and field ownership: create, no-op re-apply, pruning what a manager stops
applying, conflicts and force, Update bookkeeping, bad configurations, and two properties of
a sole applier (idempotent; the object is what it last applied)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.patch import fieldpath
from apiserver.patch.apply import ApplyConflict, record_update, server_side_apply
from apiserver.patch.errors import PatchError
from apiserver.patch.schema import UNKNOWN, meta_for

DEPLOY = meta_for("apps", "v1", "Deployment")
T1, T2, T3, T4 = (f"2025-01-0{i}T00:00:00Z" for i in range(1, 5))


def config(
    replicas: int | None = 2, labels: dict[str, str] | None = None, *containers: dict[str, Any]
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": list(containers) or [{"name": "web", "image": "nginx:1.27"}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": spec,
    }


def body(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    return out


def owners(obj: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    return {
        (e["manager"], e["operation"]): {fieldpath.describe(p) for p in fieldpath.decode(e["fieldsV1"])}
        for e in obj["metadata"].get("managedFields", [])
    }


def apply(
    live: dict[str, Any] | None, cfg: dict[str, Any], manager: str = "kubectl", force: bool = False, now: str = T1
) -> dict[str, Any]:
    return server_side_apply(live, cfg, manager, force, DEPLOY, now)


def test_create_by_apply_gives_the_config_and_one_apply_entry() -> None:
    obj = apply(None, config())
    assert body(obj) == config()
    [entry] = obj["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "time", "fieldsType")} == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T1,
        "fieldsType": "FieldsV1",
    }
    fields = entry["fieldsV1"]
    assert fields["f:spec"]["f:replicas"] == {}
    assert fields["f:spec"]["f:selector"] == {}  # LabelSelector is an atomic map
    assert fields["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    assert "f:name" not in fields["f:metadata"]  # name, namespace, ... are never owned
    assert fields["f:metadata"] == {"f:labels": {"f:app": {}}}


def test_reapplying_the_same_config_is_a_complete_no_op() -> None:
    live = apply(None, config())
    assert apply(live, config(), now=T2) == live


def test_a_changed_config_updates_the_object_and_the_time() -> None:
    live = apply(None, config())
    out = apply(live, config(replicas=3), now=T2)
    assert out["spec"]["replicas"] == 3
    assert out["metadata"]["managedFields"][0]["time"] == T2


def test_a_field_dropped_from_the_config_is_removed_from_the_object() -> None:
    sidecar = {"name": "log", "image": "busybox"}
    live = apply(None, config(2, {"app": "web", "tier": "fe"}, {"name": "web", "image": "nginx"}, sidecar))
    out = apply(live, config(None, {"app": "web"}, {"name": "web", "image": "nginx"}), now=T2)
    assert "replicas" not in out["spec"]
    assert out["metadata"]["labels"] == {"app": "web"}
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "web", "image": "nginx"}]


def test_a_dropped_field_another_applier_also_owns_stays() -> None:
    live = apply(None, config(2, {"app": "web", "tier": "fe"}))
    shared = apply(
        live,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"tier": "fe"}}},
        "other",
    )
    assert owners(shared)[("other", "Apply")] == {".metadata.labels.tier"}
    out = apply(shared, config(2, {"app": "web"}), now=T2)
    assert out["metadata"]["labels"] == {"app": "web", "tier": "fe"}
    assert ".metadata.labels.tier" not in owners(out)[("kubectl", "Apply")]


def test_fields_set_by_others_are_kept_when_not_in_the_config() -> None:
    live = apply(None, config())
    edited = copy.deepcopy(live)
    edited["spec"]["paused"] = True
    edited = record_update(live, edited, "kubectl-edit", T2)
    out = apply(edited, config(), now=T3)
    assert out["spec"]["paused"] is True


def test_changing_a_field_an_updater_owns_conflicts_with_kubes_message() -> None:
    live = apply(None, config())
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 5
    scaled = record_update(live, scaled, "kubectl-client-side-apply", T2)
    with pytest.raises(ApplyConflict) as info:
        apply(scaled, config(replicas=2), now=T3)
    assert str(info.value) == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas'
    )
    assert info.value.conflicts == [("kubectl-client-side-apply", ".spec.replicas")]
    status = info.value.to_status_error().to_status()
    assert status["code"] == 409
    assert status["reason"] == "Conflict"
    assert status["details"]["causes"][0]["field"] == ".spec.replicas"


def test_force_takes_ownership() -> None:
    live = apply(None, config())
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 5
    scaled = record_update(live, scaled, "hpa", T2)
    assert ".spec.replicas" in owners(scaled)[("hpa", "Update")]
    out = apply(scaled, config(replicas=2), force=True, now=T3)
    assert out["spec"]["replicas"] == 2
    assert ("hpa", "Update") not in owners(out)  # it owned nothing else
    assert ".spec.replicas" in owners(out)[("kubectl", "Apply")]


def test_two_appliers_conflict_and_the_message_lists_each_field() -> None:
    live = apply(None, config(), "a")
    other = config(replicas=3, labels={"app": "db"})
    with pytest.raises(ApplyConflict) as info:
        apply(live, other, "b")
    assert info.value.conflicts == [("a", ".metadata.labels.app"), ("a", ".spec.replicas")]
    assert str(info.value) == (
        'Apply failed with 2 conflicts: conflicts with "a":\n- .metadata.labels.app\n- .spec.replicas'
    )


def test_applying_the_value_another_manager_set_shares_ownership() -> None:
    live = apply(None, config(), "a")
    out = apply(live, config(), "b")
    assert ".spec.replicas" in owners(out)[("a", "Apply")]
    assert ".spec.replicas" in owners(out)[("b", "Apply")]


def test_containers_merge_by_name_and_keep_live_order() -> None:
    web, log = {"name": "web", "image": "nginx"}, {"name": "log", "image": "busybox"}
    live = apply(None, config(2, None, web, log), "a")
    out = apply(live, config(2, None, {"name": "metrics", "image": "prom"}), "b")
    names = [c["name"] for c in out["spec"]["template"]["spec"]["containers"]]
    assert names == ["web", "log", "metrics"]


def test_record_update_on_create_owns_everything_but_identity() -> None:
    obj = record_update(None, config(), "kubectl-create", T1)
    [entry] = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["time"]) == ("kubectl-create", "Update", T1)
    fields = {fieldpath.describe(p) for p in fieldpath.decode(entry["fieldsV1"])}
    assert ".spec.replicas" in fields
    assert '.spec.template.spec.containers[name="web"]' in fields
    assert ".metadata.name" not in fields
    assert ".metadata.labels" in fields  # a map the write added is owned as such ("." in fieldsV1)


def test_record_update_moves_changed_fields_and_leaves_untracked_objects_alone() -> None:
    live = apply(None, config())
    new = copy.deepcopy(live)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    out = record_update(live, new, "kubectl-set", T2)
    image = '.spec.template.spec.containers[name="web"].image'
    assert image in owners(out)[("kubectl-set", "Update")]
    assert image not in owners(out)[("kubectl", "Apply")]
    untracked = body(live)
    assert "managedFields" not in record_update(untracked, config(replicas=4), "x", T2)["metadata"]


def test_record_update_without_changes_touches_nothing() -> None:
    live = record_update(None, config(), "kubectl-create", T1)
    same = copy.deepcopy(live)
    same["metadata"]["resourceVersion"] = "42"
    assert (
        record_update(live, same, "kubectl-create", T2)["metadata"]["managedFields"]
        == live["metadata"]["managedFields"]
    )


def test_a_client_resets_managed_fields_with_an_empty_entry() -> None:
    live = apply(None, config())
    new = copy.deepcopy(live)
    new["metadata"]["managedFields"] = [{}]
    new["spec"]["replicas"] = 7
    assert owners(record_update(live, new, "kubectl-edit", T2)) == {("kubectl-edit", "Update"): {".spec.replicas"}}
    new["metadata"]["managedFields"] = "junk"  # unreadable: the stored entries stay
    assert ("kubectl", "Apply") in owners(record_update(live, new, "kubectl-edit", T2))


def test_first_apply_to_an_untracked_object_credits_before_first_apply() -> None:
    untracked = body(apply(None, config()))
    untracked["spec"]["paused"] = True
    out = apply(untracked, config(replicas=2))
    assert ".spec.paused" in owners(out)[("before-first-apply", "Update")]
    assert out["spec"]["paused"] is True


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({**config(), "metadata": {"name": "d", "managedFields": [{}]}}, "metadata.managedFields must be nil"),
        ({"kind": "Deployment", "metadata": {"name": "d"}}, "apiVersion must be set"),
        ({"apiVersion": "apps/v1", "metadata": {"name": "d"}}, "kind must be set"),
        (config(2, None, {"image": "x"}), "none of the key fields"),
        (config(2, None, {"name": "a"}, {"name": "a"}), "duplicate entries"),
    ],
)
def test_bad_configurations_raise_patch_error(cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply(apply(None, config()), cfg)


def test_managed_fields_round_trip_through_fields_v1() -> None:
    obj = apply(None, config(2, None, {"name": "web", "image": "x", "ports": [{"containerPort": 80}]}))
    for entry in obj["metadata"]["managedFields"]:
        assert fieldpath.encode(fieldpath.decode(entry["fieldsV1"])) == entry["fieldsV1"]


# --- properties of a sole applier on a kind without schema ---------------------------------

keys = st.sampled_from(["a", "b", "c"])
leaves = st.none() | st.booleans() | st.integers(-2, 2) | st.text(alphabet="xy", max_size=2)
trees = st.recursive(
    leaves | st.lists(st.integers(0, 2), max_size=2),
    lambda inner: st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)
configs = st.fixed_dictionaries(
    {"apiVersion": st.just("example.com/v1"), "kind": st.just("Thing")}, optional={"spec": trees, "data": trees}
)


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


@settings(max_examples=200, deadline=None)
@given(configs)
def test_applying_the_same_config_twice_is_idempotent(cfg: dict[str, Any]) -> None:
    once = server_side_apply(None, cfg, "m", False, UNKNOWN, T1)
    assert server_side_apply(once, cfg, "m", False, UNKNOWN, T2) == once


@settings(max_examples=200, deadline=None)
@given(configs, configs)
def test_a_sole_applier_object_is_its_last_config(first: dict[str, Any], second: dict[str, Any]) -> None:
    live = server_side_apply(None, first, "m", False, UNKNOWN, T1)
    before = copy.deepcopy((live, second))
    out = server_side_apply(live, second, "m", False, UNKNOWN, T2)
    assert (live, second) == before  # inputs untouched
    out["metadata"].pop("managedFields", None)
    if out["metadata"] == {}:
        del out["metadata"]
    assert out == without_nulls(second)


hostile = st.recursive(
    leaves | st.sampled_from(["web", "TCP"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["name", "image", "containers", "ports", "containerPort", "spec", "template"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(hostile, hostile)
def test_hostile_configs_fail_only_with_patch_error_and_change_no_input(spec: Any, spec2: Any) -> None:
    first = apply(None, config())
    before = copy.deepcopy(first)
    live = first
    for s in (spec, spec2):
        cfg = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": s}
        with contextlib.suppress(PatchError):
            live = apply(live, cfg, force=True, now=T2)
    assert first == before


def test_a_deeply_nested_config_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(2000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(PatchError, match="nested more than"):
        server_side_apply(None, {"apiVersion": "v1", "kind": "X", "spec": deep}, "m", False, UNKNOWN, T1)
