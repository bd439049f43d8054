"""A pod's phase and conditions from its container statuses, case by case as kube's kubelet
reports them, and never a crash on statuses of the wrong shape."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet import podphase as pp
from components.kubelet.podphase import Condition
from machinery.objects import Obj


def spec(*names: str, inits: tuple[str, ...] = (), policy: str = "Always", **extra: Any) -> Obj:
    return {
        "restartPolicy": policy,
        "containers": [{"name": n} for n in names],
        "initContainers": [{"name": n} for n in inits],
        **extra,
    }


def running(name: str, ready: bool = True) -> Obj:
    return {"name": name, "ready": ready, "started": True, "state": {"running": {"startedAt": "t"}}}


def exited(name: str, code: int) -> Obj:
    return {"name": name, "ready": False, "started": False, "state": {"terminated": {"exitCode": code}}}


def backing_off(name: str, last_code: int) -> Obj:
    return {
        "name": name,
        "ready": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": last_code}},
    }


def creating(name: str) -> Obj:
    return {"name": name, "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}


def view(s: Obj, inits: list[Obj], mains: list[Obj], terminal: bool = False, held: list[Obj] | None = None) -> Any:
    phase = pp.phase(s, inits, mains, terminal)
    conds = {c.type: c for c in pp.conditions(s, inits, mains, phase, held or [], sandbox_ready=True)}
    return phase, conds


def test_nothing_reported_yet_is_pending_with_unknown_containers() -> None:
    phase, c = view(spec("a", "b"), [], [])
    assert phase == "Pending"
    assert c["Initialized"] == Condition("Initialized", "True")
    assert c["ContainersReady"] == Condition(
        "ContainersReady", "False", "ContainersNotReady", "containers with unknown status: [a b]"
    )
    assert c["Ready"] == Condition("Ready", "False", "ContainersNotReady", "containers with unknown status: [a b]")


def test_a_pod_the_kubelet_runs_says_it_is_scheduled_last_in_kubes_order() -> None:
    """Bound by a scheduler or given spec.nodeName, and whatever a stale view held."""
    held = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    conds = pp.conditions(spec("a"), [], [running("a")], "Running", held, sandbox_ready=True)
    kinds = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert [c.type for c in conds] == kinds
    assert conds[-1] == Condition("PodScheduled", "True")


def test_init_containers_hold_the_pod_pending_in_order() -> None:
    s = spec("app", inits=("first", "second"))
    phase, c = view(s, [exited("first", 0), running("second")], [creating("app")])
    assert phase == "Pending"
    assert c["Initialized"] == Condition(
        "Initialized", "False", "ContainersNotInitialized", "containers with incomplete status: [second]"
    )
    phase, c = view(s, [exited("first", 0), exited("second", 0)], [running("app")])
    assert phase == "Running" and c["Initialized"].status == "True" and c["Ready"].status == "True"


def test_a_failed_init_container_fails_the_pod_only_under_never() -> None:
    s = spec("app", inits=("init",), policy="Never")
    assert pp.phase(s, [exited("init", 1)], [], False) == "Failed"
    s = spec("app", inits=("init",), policy="OnFailure")
    assert pp.phase(s, [backing_off("init", 1)], [], False) == "Pending"  # it is retried


def test_running_with_an_unready_container() -> None:
    phase, c = view(spec("a", "b"), [], [running("a"), running("b", ready=False)])
    assert phase == "Running"
    assert c["ContainersReady"].message == "containers with unready status: [b]"
    assert c["Ready"].reason == "ContainersNotReady"


def test_everything_exited_by_restart_policy() -> None:
    ok, bad = [exited("a", 0), exited("b", 0)], [exited("a", 0), exited("b", 2)]
    assert pp.phase(spec("a", "b", policy="Never"), [], ok, False) == "Succeeded"
    assert pp.phase(spec("a", "b", policy="Never"), [], bad, False) == "Failed"
    assert pp.phase(spec("a", "b", policy="OnFailure"), [], ok, False) == "Succeeded"
    assert pp.phase(spec("a", "b", policy="OnFailure"), [], bad, False) == "Running"  # b restarts
    assert pp.phase(spec("a", "b", policy="Always"), [], ok, False) == "Running"  # both restart
    # a pod being deleted is done whatever the policy says
    assert pp.phase(spec("a", "b", policy="Always"), [], ok, True) == "Succeeded"
    assert pp.phase(spec("a", "b", policy="Always"), [], bad, True) == "Failed"


def test_a_crash_looping_container_keeps_the_pod_running() -> None:
    phase, c = view(spec("a"), [], [backing_off("a", 1)])
    assert phase == "Running" and c["Ready"].status == "False"


def test_completed_and_failed_pods_say_so_in_their_conditions() -> None:
    s = spec("a", inits=("i",), policy="Never")
    phase, c = view(s, [exited("i", 0)], [exited("a", 0)])
    assert phase == "Succeeded"
    assert c["Initialized"] == Condition("Initialized", "True", "PodCompleted")
    assert c["ContainersReady"] == Condition("ContainersReady", "False", "PodCompleted")
    assert c["Ready"] == Condition("Ready", "False", "PodCompleted")
    phase, c = view(s, [exited("i", 0)], [exited("a", 3)])
    assert phase == "Failed" and c["Ready"] == Condition("Ready", "False", "PodFailed")


def test_a_sidecar_counts_as_initialized_once_started_and_must_be_ready() -> None:
    s = {
        "restartPolicy": "Always",
        "containers": [{"name": "app"}],
        "initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
    }
    phase, c = view(s, [running("proxy", ready=False) | {"started": False}], [])
    assert phase == "Pending" and c["Initialized"].message == "containers with incomplete status: [proxy]"
    phase, c = view(s, [running("proxy", ready=False)], [running("app")])
    assert phase == "Running" and c["Initialized"].status == "True"
    assert c["ContainersReady"].message == "containers with unready status: [proxy]"


def test_readiness_gates() -> None:
    s = spec("a", readinessGates=[{"conditionType": "lb/ready"}, {"conditionType": "dns/ready"}])
    held = [{"type": "lb/ready", "status": "False"}]
    _, c = view(s, [], [running("a")], held=held)
    assert c["ContainersReady"].status == "True"
    assert c["Ready"] == Condition(
        "Ready",
        "False",
        "ReadinessGatesNotReady",
        'the status of pod readiness gate "lb/ready" is not "True", but False, '
        'corresponding condition of pod readiness gate "dns/ready" does not exist.',
    )
    held = [{"type": "lb/ready", "status": "True"}, {"type": "dns/ready", "status": "True"}]
    assert view(s, [], [running("a")], held=held)[1]["Ready"].status == "True"


def test_merge_keeps_transition_times_and_other_owners_conditions() -> None:
    held = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "t1", "reason": "ContainersNotReady"},
        {"type": "Initialized", "status": "True", "lastTransitionTime": "t1"},
    ]
    computed = [Condition("Initialized", "True"), Condition("Ready", "True")]
    out = {c["type"]: c for c in pp.merge(held, computed, now="t2")}
    assert out["PodScheduled"] == held[0]
    assert out["Initialized"]["lastTransitionTime"] == "t1"  # unchanged status: time kept
    assert out["Ready"] == {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "t2"}


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["running", "terminated", "waiting", "exitCode", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)
statuses = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["a", "b", "i"])},
        optional={"state": junk, "lastState": junk, "ready": junk, "started": junk},
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(statuses, statuses, st.sampled_from(["Always", "OnFailure", "Never", None]), st.booleans())
def test_statuses_of_any_shape_give_a_phase_and_conditions(
    inits: list[Obj], mains: list[Obj], policy: Any, terminal: bool
) -> None:
    s = {"restartPolicy": policy, "containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}
    phase = pp.phase(s, inits, mains, terminal)
    assert phase in ("Pending", "Running", "Succeeded", "Failed")
    for c in pp.conditions(s, inits, mains, phase, [], sandbox_ready=False):
        assert c.status in ("True", "False")
