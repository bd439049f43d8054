"""The rollout arithmetic of `_workload_rollout`, without I/O: fenceposts and their rounding,
how far the new replicaset grows and the old ones shrink, proportional scaling, the template
hash, revisions and conditions."""

from __future__ import annotations

from typing import Any

from components.controllers import _workload_rollout as ro

T0 = "2024-01-01T00:00:00Z"


def deployment(replicas: int, surge: Any = "25%", unavailable: Any = "25%", **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "metadata": {"name": "web", "generation": 1},
        "spec": {
            "replicas": replicas,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}},
            "progressDeadlineSeconds": 600,
        },
        "status": extra.pop("status", {}),
    }
    d["spec"].update(extra)
    return d


def rs(name: str, replicas: int, available: int | None = None, created: str = T0, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name, "creationTimestamp": created, "annotations": dict(annotations)},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "availableReplicas": replicas if available is None else available},
    }


def test_fenceposts_round_surge_up_and_unavailability_down() -> None:
    assert ro.fenceposts(deployment(10)) == (3, 2)  # 2.5 -> 3 and 2
    assert ro.fenceposts(deployment(4, 1, "25%")) == (1, 1)
    assert ro.fenceposts(deployment(3, 0, "10%")) == (0, 1)  # both zero would never progress
    assert ro.max_unavailable(deployment(2, 0, 5)) == 2  # never more than the replicas
    recreate = deployment(3)
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    assert (ro.max_surge(recreate), ro.max_unavailable(recreate)) == (0, 0)


def test_new_replicaset_grows_within_the_surge() -> None:
    d = deployment(4, 1, 1)
    old, new = rs("old", 4), rs("new", 0)
    assert ro.new_rs_replicas(d, [old, new], new) == 1  # 4 + 1 surge
    old2 = rs("old", 3)
    old2["status"]["replicas"] = 4  # scaled down, a pod not yet deleted: no room yet
    assert ro.new_rs_replicas(d, [old2, rs("new", 1)], rs("new", 1)) == 1
    assert ro.new_rs_replicas(d, [rs("old", 3), rs("new", 1)], rs("new", 1)) == 2


def test_old_replicasets_shrink_within_unavailability() -> None:
    d = deployment(4, 1, 1)
    # 5 pods, 1 new not yet available: one available old pod may go (4 available, 3 needed)
    plan = ro.old_scale_down(d, [rs("old", 4)], rs("new", 1, available=0))
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("old", 3)]
    # once that is done, nothing more until the new pod is available
    assert ro.old_scale_down(d, [rs("old", 3, available=4)], rs("new", 1, available=0)) == []
    plan = ro.old_scale_down(d, [rs("old", 4)], rs("new", 1, available=1))
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("old", 2)]  # 5 available, 3 needed
    # unhealthy old pods go first, before any available one
    plan = ro.old_scale_down(d, [rs("a", 2, available=0, created="2024-01-01T00:00:00Z"), rs("b", 3)], rs("new", 0))
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("a", 0)]


def test_proportional_scaling_spreads_the_change() -> None:
    d = deployment(20, "25%", "25%", status={"replicas": 13})
    old = rs("old", 8, created="2024-01-01T00:00:00Z", **{ro.MAX_REPLICAS: "13", ro.DESIRED_REPLICAS: "10"})
    new = rs("new", 5, created="2024-01-02T00:00:00Z", **{ro.MAX_REPLICAS: "13", ro.DESIRED_REPLICAS: "10"})
    assert ro.is_scaling_event(d, [old, new])
    sizes = {r["metadata"]["name"]: n for r, n in ro.proportional_sizes(d, new, [old])}
    assert sizes == {"old": 15, "new": 10}  # 25 allowed (20 + 5 surge), shares kept
    down = deployment(5, "25%", "25%", status={"replicas": 13})
    sizes = {r["metadata"]["name"]: n for r, n in ro.proportional_sizes(down, new, [old])}
    assert sum(sizes.values()) == 7 and sizes["old"] > sizes["new"]  # 5 + 2 surge
    lone = {r["metadata"]["name"]: n for r, n in ro.proportional_sizes(d, rs("new", 10), [rs("old", 0)])}
    assert lone == {"new": 20}


def test_template_hash_and_equality_ignore_the_hash_label_and_nulls() -> None:
    assert ro.fnv32a(b"") == 0x811C9DC5 and ro.fnv32a(b"a") == 0xE40C292C  # the FNV-1a test vectors
    assert ro.safe_encode("0") == "4"  # byte 48 % 27 = 21 in kube's alphabet
    assert set(ro.safe_encode("4294967295")) <= set("bcdfghjklmnpqrstvwxz2456789")
    t = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}
    with_null = {"metadata": {"labels": {"app": "web"}, "creationTimestamp": None}, "spec": t["spec"]}
    assert ro.template_hash(t, None) == ro.template_hash(with_null, None)
    assert ro.template_hash(t, None) != ro.template_hash(t, 1)
    hashed = {"metadata": {"labels": {"app": "web", ro.HASH_LABEL: "abc"}}, "spec": t["spec"]}
    assert ro.equal_ignore_hash(hashed, with_null)
    assert not ro.equal_ignore_hash(hashed, {**t, "spec": {"containers": [{"name": "d"}]}})


def test_revisions_are_raised_and_remembered() -> None:
    d = deployment(3)
    d["metadata"]["annotations"] = {
        "team": "a",
        ro.REVISION: "9",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    made = ro.new_rs_annotations(d, {}, 1, exists=False)
    assert made == {"team": "a", ro.REVISION: "1", ro.DESIRED_REPLICAS: "3", ro.MAX_REPLICAS: "4"}
    reused = ro.new_rs_annotations(d, {ro.REVISION: "1"}, 3, exists=True)
    assert reused[ro.REVISION] == "3" and reused[ro.REVISION_HISTORY] == "1"
    assert ro.new_rs_annotations(d, {ro.REVISION: "5"}, 3, exists=True)[ro.REVISION] == "5"  # never lowered


def test_conditions_progress_complete_and_time_out() -> None:
    d = deployment(2, status={"replicas": 0, "updatedReplicas": 0})
    new = rs("new", 2, available=0)
    st, after = ro.rollout_status(d, [new], new, 1000.0, "t1")
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Progressing"]["reason"] == ro.RS_UPDATED and conds["Available"]["reason"] == ro.MIN_UNAVAILABLE
    d["status"] = st
    d["status"]["conditions"] = [
        {**c, "lastUpdateTime": "1970-01-01T00:16:40Z"} if c["type"] == "Progressing" else c for c in st["conditions"]
    ]
    _, after = ro.rollout_status(d, [new], new, 1000.0, "t1")
    assert after is not None and 600 <= after <= 602  # look again when the deadline passes
    st, _ = ro.rollout_status(d, [new], new, 1000.0 + 601, "t2")
    assert ro.get_condition(st, "Progressing")["reason"] == ro.TIMED_OUT  # type: ignore[index]
    done = rs("new", 2)
    st, after = ro.rollout_status(d, [done], done, 1000.0, "t3")
    assert ro.get_condition(st, "Progressing")["reason"] == ro.NEW_RS_AVAILABLE  # type: ignore[index]
    assert ro.get_condition(st, "Available")["reason"] == ro.MIN_AVAILABLE and after is None  # type: ignore[index]
