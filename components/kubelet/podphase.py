"""A pod's phase and conditions from the statuses of its containers, as kube's kubelet sets them.

Phase: Pending while an init container has not finished (or failed under restartPolicy
Never, which fails the pod) or a container has not started yet; Running once every
container has started and one runs, or all have stopped and the restart policy restarts
them; Succeeded when all stopped with exit code 0 and nothing restarts them; Failed when one
did not.  An init container that restarts with `restartPolicy: Always` (a sidecar) never
holds initialization back once it has started.

Conditions, each (type, status, reason, message) as kube words them:
  Initialized       False "ContainersNotInitialized" until every init container succeeded
  ContainersReady   False "ContainersNotReady" while one is unready or has no status yet
  Ready             ContainersReady, and every readiness gate's condition True
  PodReadyToStartContainers  the pod's sandbox (process group, network) exists
A Succeeded pod's Initialized is True and its readiness False, all for "PodCompleted"; a
Failed pod's readiness is False for "PodFailed".  A pod whose regular containers ever started
stays Initialized (a sidecar or init container restarting does not undo it).
`lastTransitionTime` changes only when a condition's status does (`merge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from machinery.objects import Obj

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
COMPLETED = "PodCompleted"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" or "False"
    reason: str = ""
    message: str = ""


def _by_name(statuses: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(s.get("name")): s for s in statuses if isinstance(s, Mapping)}


def _state(status: Mapping[str, Any], which: str = "state") -> tuple[str, Mapping[str, Any]]:
    """("running" | "terminated" | "waiting" | "", its details) of a container status."""
    state = status.get(which)
    if isinstance(state, Mapping):
        for kind in ("running", "terminated", "waiting"):
            details = state.get(kind)
            if isinstance(details, Mapping):
                return kind, details
    return "", {}


def _exit_code(details: Mapping[str, Any]) -> int:
    code = details.get("exitCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else -1


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def _names(containers: Any) -> list[Mapping[str, Any]]:
    return [c for c in containers or () if isinstance(c, Mapping)]


def phase(spec: Mapping[str, Any], init_statuses: Sequence[Obj], statuses: Sequence[Obj], terminal: bool) -> str:
    """The pod's phase.  `terminal`: the kubelet is done with the pod (its deletion, or a
    deadline): what has stopped will not be restarted whatever the policy says."""
    policy = spec.get("restartPolicy") or "Always"
    inits = _by_name(init_statuses)
    pending_init = failed_init = 0
    for c in _names(spec.get("initContainers")):
        if _is_sidecar(c):
            continue
        st = inits.get(str(c.get("name")))
        kind, details = _state(st) if st is not None else ("", {})
        if kind == "terminated":
            failed_init += _exit_code(details) != 0
        elif kind == "waiting" and st is not None and _state(st, "lastState")[0] == "terminated":
            failed_init += _exit_code(_state(st, "lastState")[1]) != 0
        else:
            pending_init += 1
    mains = _by_name(statuses)
    unknown = running = waiting = stopped = succeeded = 0
    for c in _names(spec.get("containers")):
        st = mains.get(str(c.get("name")))
        kind, details = _state(st) if st is not None else ("", {})
        if kind == "running":
            running += 1
        elif kind == "terminated":
            stopped += 1
            succeeded += _exit_code(details) == 0
        elif kind == "waiting":
            if st is not None and _state(st, "lastState")[0] == "terminated":
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1
    if failed_init and policy == "Never":
        return FAILED
    if (pending_init and not _any_main_started(statuses)) or waiting:
        return PENDING
    if running and not unknown:
        return RUNNING
    if stopped and not running and not unknown:
        if terminal:
            return SUCCEEDED if stopped == succeeded else FAILED
        if policy == "Always":
            return RUNNING  # all of them are being restarted
        if stopped == succeeded:
            return SUCCEEDED
        return FAILED if policy == "Never" else RUNNING  # OnFailure restarts the failed ones
    return PENDING


def _any_main_started(statuses: Sequence[Obj]) -> bool:
    """Whether a regular container ever started (its sidecars restarting must not make the
    pod Pending again)."""
    for st in statuses:
        if isinstance(st, Mapping) and (_state(st)[0] in ("running", "terminated") or st.get("started")):
            return True
    return False


def _listed(names: list[str], what: str) -> str:
    return f"containers with {what} status: [{' '.join(names)}]"


def initialized(
    spec: Mapping[str, Any], init_statuses: Sequence[Obj], statuses: Sequence[Obj], pod_phase: str
) -> Condition:
    inits = _by_name(init_statuses)
    unknown, incomplete = [], []
    for c in _names(spec.get("initContainers")):
        name = str(c.get("name"))
        st = inits.get(name)
        if st is None:
            unknown.append(name)
        elif _is_sidecar(c):
            if st.get("started") is not True:
                incomplete.append(name)
        else:
            kind, details = _state(st)
            if kind != "terminated" or _exit_code(details) != 0:
                incomplete.append(name)
    if pod_phase == SUCCEEDED and not unknown:
        return Condition("Initialized", "True", COMPLETED)
    if _any_main_started(statuses):
        return Condition("Initialized", "True")  # it was initialized once: a restart changes nothing
    messages = [_listed(unknown, "unknown")] if unknown else []
    if incomplete:
        messages.append(_listed(incomplete, "incomplete"))
    if messages:
        return Condition("Initialized", "False", "ContainersNotInitialized", ", ".join(messages))
    return Condition("Initialized", "True")


def containers_ready(
    spec: Mapping[str, Any], init_statuses: Sequence[Obj], statuses: Sequence[Obj], pod_phase: str
) -> Condition:
    inits, mains = _by_name(init_statuses), _by_name(statuses)
    unknown, unready = [], []
    for c in _names(spec.get("initContainers")):
        st = inits.get(str(c.get("name")))
        if _is_sidecar(c) and st is not None and st.get("ready") is not True:
            unready.append(str(c.get("name")))  # a sidecar serves the pod: it must be ready too
    for c in _names(spec.get("containers")):
        name = str(c.get("name"))
        st = mains.get(name)
        if st is None:
            unknown.append(name)
        elif st.get("ready") is not True:
            unready.append(name)
    if pod_phase == SUCCEEDED and not unknown:
        return Condition("ContainersReady", "False", COMPLETED)
    if pod_phase == FAILED:
        return Condition("ContainersReady", "False", "PodFailed")
    messages = [_listed(unknown, "unknown")] if unknown else []
    if unready:
        messages.append(_listed(unready, "unready"))
    if messages:
        return Condition("ContainersReady", "False", "ContainersNotReady", ", ".join(messages))
    return Condition("ContainersReady", "True")


def ready(
    spec: Mapping[str, Any], init_statuses: Sequence[Obj], statuses: Sequence[Obj], pod_phase: str, held: Sequence[Obj]
) -> Condition:
    """Ready: ContainersReady, then every readiness gate's condition (among `held`, the pod's
    current conditions, which other controllers set) True."""
    base = containers_ready(spec, init_statuses, statuses, pod_phase)
    if base.status != "True":
        return Condition("Ready", base.status, base.reason, base.message)
    by_type = {str(c.get("type")): c for c in held if isinstance(c, Mapping)}
    unmet = []
    for gate in spec.get("readinessGates") or ():
        kind = str(gate.get("conditionType")) if isinstance(gate, Mapping) else ""
        cond = by_type.get(kind)
        if cond is None:
            unmet.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif cond.get("status") != "True":
            unmet.append(f'the status of pod readiness gate "{kind}" is not "True", but {cond.get("status")}')
    if unmet:
        return Condition("Ready", "False", "ReadinessGatesNotReady", ", ".join(unmet))
    return Condition("Ready", "True")


def conditions(
    spec: Mapping[str, Any],
    init_statuses: Sequence[Obj],
    statuses: Sequence[Obj],
    pod_phase: str,
    held: Sequence[Obj],
    sandbox_ready: bool,
) -> list[Condition]:
    """The conditions the kubelet owns, in kube's order.  PodScheduled among them: a pod the
    kubelet runs is scheduled, whether a scheduler bound it or it came with spec.nodeName (kube's
    generateAPIPodStatus says so on every status; clients that list pods by node expect it)."""
    return [
        Condition("PodReadyToStartContainers", "True" if sandbox_ready else "False"),
        initialized(spec, init_statuses, statuses, pod_phase),
        ready(spec, init_statuses, statuses, pod_phase, held),
        containers_ready(spec, init_statuses, statuses, pod_phase),
        Condition("PodScheduled", "True"),
    ]


def merge(held: Sequence[Obj], computed: Sequence[Condition], now: str) -> list[Obj]:
    """The pod's conditions with the kubelet's replaced: `lastTransitionTime` kept while a
    condition's status stays, `now` when it changes; conditions of other owners (PodScheduled,
    readiness gates) kept as they are."""
    old = {str(c.get("type")): c for c in held if isinstance(c, Mapping)}
    mine = {c.type for c in computed}
    out: list[Obj] = [dict(c) for c in held if isinstance(c, Mapping) and c.get("type") not in mine]
    for c in computed:
        before = old.get(c.type)
        since = before.get("lastTransitionTime") if before and before.get("status") == c.status else None
        cond: Obj = {"type": c.type, "status": c.status, "lastProbeTime": None, "lastTransitionTime": since or now}
        if c.reason:
            cond["reason"] = c.reason
        if c.message:
            cond["message"] = c.message
        out.append(cond)
    return out
