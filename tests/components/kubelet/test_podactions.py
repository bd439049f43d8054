"""The pod worker's plan, case by case: init containers in order, sidecars, restart policies
with the crash back-off, probe failures, spec changes, deletion; and a simulated run that
drives a pod to its end by carrying the plans out."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.backoff import CrashBackOff
from components.kubelet.podactions import Kill, Seen, Start, plan, spec_hash
from machinery.objects import Obj


def pod(*mains: str, inits: tuple[str, ...] = (), policy: str = "Always", **meta: Any) -> Obj:
    return {
        "metadata": {"name": "p", "uid": "u1", **meta},
        "spec": {
            "restartPolicy": policy,
            "containers": [{"name": n, "command": [n]} for n in mains],
            "initContainers": [{"name": n, "command": [n]} for n in inits],
        },
    }


def run(name: str, p: Obj) -> Seen:
    c = next(c for c in p["spec"]["containers"] + p["spec"]["initContainers"] if c["name"] == name)
    return Seen(running=True, spec_hash=spec_hash(c))


def exited(code: int, at: float = 0.0) -> Seen:
    return Seen(running=False, exit_code=code, finished_at=at)


def test_a_new_pod_starts_its_first_init_container_only() -> None:
    p = pod("app", inits=("a", "b"))
    assert plan(p, {}, CrashBackOff(), 0.0).starts == [Start("a", init=True)]
    assert plan(p, {"a": run("a", p)}, CrashBackOff(), 0.0).starts == []  # wait for it
    assert plan(p, {"a": exited(0)}, CrashBackOff(), 0.0).starts == [Start("b", init=True)]
    assert plan(p, {"a": exited(0), "b": exited(0)}, CrashBackOff(), 0.0).starts == [Start("app")]


def test_a_failed_init_container_is_retried_with_back_off_or_fails_the_pod() -> None:
    p, b = pod("app", inits=("a",)), CrashBackOff()
    assert plan(p, {"a": exited(1, at=0.0)}, b, 0.0).starts == [Start("a", init=True)]  # first retry at once
    waiting = plan(p, {"a": exited(1, at=5.0)}, b, 6.0)
    assert waiting.starts == [] and waiting.wake_in == 9.0  # 10 s from when it finished
    never = plan(pod("app", inits=("a",), policy="Never"), {"a": exited(1)}, CrashBackOff(), 0.0)
    assert never.failed and never.starts == []


def test_a_sidecar_starts_and_the_next_waits_until_it_has_started() -> None:
    p = pod("app", inits=("proxy",))
    p["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    up = run("proxy", p)
    assert (
        plan(p, {"proxy": Seen(running=True, spec_hash=up.spec_hash, started=False)}, CrashBackOff(), 0.0).starts == []
    )
    assert plan(p, {"proxy": up}, CrashBackOff(), 0.0).starts == [Start("app")]
    # a sidecar that exited is restarted even under a policy that would not restart main containers
    p["spec"]["restartPolicy"] = "Never"
    assert plan(p, {"proxy": exited(0), "app": run("app", p)}, CrashBackOff(), 0.0).starts == [
        Start("proxy", init=True)
    ]


def test_restart_policies_decide_what_exits_come_back() -> None:
    for policy, code, again in (
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 2, True),
        ("Never", 1, False),
    ):
        p = pod("app", policy=policy)
        got = plan(p, {"app": exited(code)}, CrashBackOff(), 0.0).starts
        assert got == ([Start("app")] if again else []), (policy, code)


def test_probe_failures_kill_and_spec_changes_kill_and_start() -> None:
    p = pod("app", policy="Always")
    failing = Seen(running=True, spec_hash=run("app", p).spec_hash, probe_failed="liveness")
    out = plan(p, {"app": failing}, CrashBackOff(), 0.0)
    assert out.kills == [Kill("app", "Container app failed liveness probe, will be restarted")] and out.starts == []
    p_never = pod("app", policy="Never")
    out = plan(
        p_never,
        {"app": Seen(running=True, spec_hash=run("app", p_never).spec_hash, probe_failed="startup")},
        CrashBackOff(),
        0.0,
    )
    assert out.kills == [Kill("app", "Container app failed startup probe")]
    stale = Seen(running=True, spec_hash="old")
    out = plan(p_never, {"app": stale}, CrashBackOff(), 0.0)
    assert out.kills == [Kill("app", "Container app definition changed, will be restarted")]
    assert out.starts == [Start("app")]  # whatever the policy


def test_a_deleted_or_finished_pod_only_has_its_running_containers_killed() -> None:
    p = pod("a", "b", deletionTimestamp="t")
    out = plan(p, {"a": run("a", p), "b": exited(0)}, CrashBackOff(), 0.0)
    assert out.kills == [Kill("a", "Stopping container a")] and out.starts == []
    done = pod("a", policy="Never")
    done["status"] = {"phase": "Succeeded"}
    assert plan(done, {}, CrashBackOff(), 0.0).starts == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=1, max_size=3),  # exit codes of the init containers' first runs
    st.lists(st.integers(0, 2), min_size=1, max_size=3),  # exit codes of the main containers
    st.sampled_from(["Always", "OnFailure", "Never"]),
)
def test_carrying_plans_out_never_runs_two_inits_at_once_nor_a_main_before_init(
    init_codes: list[int], main_codes: list[int], policy: str
) -> None:
    """Simulate a runtime: each start runs for 1 s, then exits with the scripted code (0 on
    retries); check the ordering invariants at every step and that the pod settles."""
    inits = tuple(f"i{k}" for k in range(len(init_codes)))
    mains = tuple(f"m{k}" for k in range(len(main_codes)))
    p = pod(*mains, inits=inits, policy=policy)
    codes = dict(zip(inits + mains, init_codes + main_codes, strict=True))
    backoff, seen, ends, now = CrashBackOff(), dict[str, Seen](), dict[str, float](), 0.0
    for _ in range(200):
        for name, end in list(ends.items()):
            if end <= now:
                seen[name] = Seen(running=False, exit_code=codes[name], finished_at=end)
                codes[name] = 0  # a retry succeeds
                del ends[name]
        out = plan(p, seen, backoff, now)
        if out.failed:
            assert policy == "Never" and any(init_codes)
            return
        for s in out.starts:
            seen[s.container] = Seen(running=True, spec_hash=spec_hash({"name": s.container, "command": [s.container]}))
            ends[s.container] = now + 1.0
        running_inits = [n for n in inits if seen.get(n, Seen(False)).running]
        assert len(running_inits) <= 1
        if any(seen.get(m, Seen(False)).running for m in mains):
            assert all(seen.get(i) is not None and seen[i].exit_code == 0 for i in inits)
        if not out.starts and not ends and out.wake_in is None:
            break  # settled: nothing runs and nothing will start
        now += min([e - now for e in ends.values()] + ([out.wake_in] if out.wake_in else []) + [1.0])
    else:
        assert policy == "Always"  # only Always restarts forever


def test_an_ephemeral_container_starts_once_even_during_init_and_never_again() -> None:
    p = pod("app", inits=("a",), policy="Always")
    p["spec"]["ephemeralContainers"] = [{"name": "debugger", "command": ["sh"]}]
    # kube starts it before the init containers: a pod stuck in init can be debugged
    assert plan(p, {}, CrashBackOff(), 0.0).starts == [Start("debugger"), Start("a", init=True)]
    running = {"a": exited(0), "app": run("app", p), "debugger": Seen(running=True, spec_hash="not-its-hash")}
    assert plan(p, running, CrashBackOff(), 0.0).kills == []  # no spec check: it cannot change
    for code in (0, 1):  # whatever the pod's policy and its exit, it stays exited
        done = plan(p, {**running, "debugger": exited(code)}, CrashBackOff(), 100.0)
        assert done.starts == [] and done.kills == []
    deleted = pod("app", policy="Always", deletionTimestamp="2026-01-01T00:00:00Z")
    deleted["spec"]["ephemeralContainers"] = p["spec"]["ephemeralContainers"]
    assert Kill("debugger", "Stopping container debugger") in plan(deleted, running, CrashBackOff(), 0.0).kills
