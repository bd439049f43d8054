"""core/v1 Pod: the unit the scheduler places and the kubelet runs."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.age import human_duration
from apiserver.errors import Cause
from apiserver.http.kubelet_proxy import ATTACH, EXEC, PORT_FORWARD
from apiserver.http.subresources.binding import BindingHandler
from apiserver.http.subresources.eviction import EvictionHandler
from apiserver.http.subresources.kubelet import PodLogHandler, PodStreamHandler
from apiserver.http.subresources.object_view import ObjectViewHandler, status_view
from apiserver.http.subresources.pod_proxy import PodProxyHandler
from apiserver.registry.strategy import OWNER_REFERENCES, UpdateStrategy
from apiserver.resources._podspec import default_pod_only, default_pod_spec, validate_pod_spec
from apiserver.resources._shared import ensure, has_condition
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, dicts, get, mapping, number, text
from machinery.qos import qos_class
from machinery.timestamps import parse_time

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def default(pod: Obj) -> None:
    spec = ensure(pod, "spec")
    if spec is not None:
        default_pod_spec(spec)
        default_pod_only(spec)
        if spec.get("ephemeralContainers") in (None, []):
            # none is no field (Go's omitempty), whether left out, null or empty: a write of
            # none through pods/ephemeralcontainers changes nothing and moves no generation
            spec.pop("ephemeralContainers", None)
    status = ensure(pod, "status")
    if status is not None:
        status.setdefault("phase", "Pending")
        if spec is not None:
            status.setdefault("qosClass", qos_class(spec))


# What an update may change in a pod's spec (as kube-apiserver allows): anything else is Forbidden.
_UPDATABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _mutable_stripped(spec: Any, node_name_settable: bool) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = {k: val for k, val in spec.items() if k not in ("activeDeadlineSeconds", "tolerations")}
    out.pop("terminationGracePeriodSeconds", None)
    if out.get("ephemeralContainers") in (None, []):
        out.pop("ephemeralContainers", None)  # an empty list is none (pods stored before it was dropped have one)
    if node_name_settable:
        out.pop("nodeName", None)
    for group in ("containers", "initContainers"):
        if isinstance(out.get(group), list):
            out[group] = [
                {k: val for k, val in c.items() if k != "image"} if isinstance(c, dict) else c for c in out[group]
            ]
    return out


def validate(pod: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(pod, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += validate_pod_spec(pod.get("spec"), "spec")
    causes += v.validate_enum(get(pod, "status.phase"), "status.phase", PHASES)
    if old is None and get(pod, "spec.ephemeralContainers"):
        # only pods/ephemeralcontainers adds them, to a pod that exists
        causes.append(v.forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if old is not None:
        # spec.ephemeralContainers is not among what an update may change (pods/ephemeralcontainers
        # changes it, with validation of its own)
        settable = not text(old, "spec.nodeName")
        if _mutable_stripped(pod.get("spec"), settable) != _mutable_stripped(old.get("spec"), settable):
            causes.append(v.forbidden("spec", _UPDATABLE))
    return causes


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def validate_ephemeral_update(pod: Obj, old: Obj) -> list[Cause]:
    """kube's ValidatePodEphemeralContainersUpdate: the pod is valid as a whole (the new
    containers by the rules of ephemeral containers), and those it had are all still there,
    unchanged (by name: a patch may reorder them).  A static pod's mirror takes none."""
    if MIRROR_ANNOTATION in mapping(old, "metadata.annotations"):
        return [v.forbidden("", "static pods do not support ephemeral containers")]
    causes = v.validate_object_meta(pod, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += validate_pod_spec(pod.get("spec"), "spec")
    field = "spec.ephemeralContainers"
    new_by_name = {text(c, "name"): c for c in dicts(pod, field)}
    for previous in dicts(old, field):
        name = text(previous, "name")
        if name not in new_by_name:
            causes.append(v.forbidden(field, f'existing ephemeral containers "{name}" may not be removed\n'))
        elif new_by_name[name] != previous:
            causes.append(v.forbidden(field, f'existing ephemeral containers "{name}" may not be changed\n'))
    return causes


# kube's podEphemeralContainersStrategy: the stored pod, with the request's
# spec.ephemeralContainers (its metadata, the rest of its spec and its status are ignored);
# defaulted, and a change moves the generation (conformance 'Ephemeral Containers' reads 2)
EPHEMERAL_CONTAINERS = UpdateStrategy(
    "ephemeralcontainers",
    takes=("spec", "ephemeralContainers"),
    moves_generation=True,
    validate=validate_ephemeral_update,
)


def pod_ip(pod: Obj) -> str:
    ips = dicts(pod, "status.podIPs")
    return text(ips[0], "ip") if ips else text(pod, "status.podIP")


def fields(pod: Obj) -> dict[str, str]:
    return {
        "spec.nodeName": text(pod, "spec.nodeName"),
        "spec.restartPolicy": text(pod, "spec.restartPolicy"),
        "spec.schedulerName": text(pod, "spec.schedulerName"),
        "spec.serviceAccountName": text(pod, "spec.serviceAccountName"),
        "spec.hostNetwork": "true" if get(pod, "spec.hostNetwork") is True else "false",
        "status.phase": text(pod, "status.phase"),
        "status.podIP": pod_ip(pod),
        "status.nominatedNodeName": text(pod, "status.nominatedNodeName"),
    }


def _later(current: float | None, status: Obj) -> float | None:
    finished = parse_time(get(status, "lastState.terminated.finishedAt"))
    if finished is not None and (current is None or finished > current):
        return finished
    return current


def _terminated_reason(term: Obj, prefix: str = "") -> str:
    if text(term, "reason"):
        return prefix + text(term, "reason")
    if number(term, "signal"):
        return f"{prefix}Signal:{number(term, 'signal')}"
    return f"{prefix}ExitCode:{number(term, 'exitCode')}"


def summary(pod: Obj, now: float) -> tuple[str, str, str]:
    """(Ready, Status, Restarts) as `kubectl get pods` shows them: the first failing or waiting init
    container, else the last container's waiting/terminated reason, Terminating once deleted."""
    spec, status = mapping(pod, "spec"), mapping(pod, "status")
    total = len(dicts(spec, "containers"))
    ready = 0
    phase = text(status, "phase")
    reason = text(status, "reason") or phase
    for cond in dicts(status, "conditions"):
        if text(cond, "type") == "PodScheduled" and text(cond, "reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {text(c, "name"): c for c in dicts(spec, "initContainers")}
    total += sum(1 for c in init_specs.values() if text(c, "restartPolicy") == "Always")

    restarts = sidecar_restarts = 0
    last_restart: float | None = None
    last_sidecar_restart: float | None = None
    initializing = False
    for i, cs in enumerate(dicts(status, "initContainerStatuses")):
        restarts += number(cs, "restartCount")
        last_restart = _later(last_restart, cs)
        sidecar = text(init_specs.get(text(cs, "name")), "restartPolicy") == "Always"
        if sidecar:
            sidecar_restarts += number(cs, "restartCount")
            last_sidecar_restart = _later(last_sidecar_restart, cs)
        term = get(cs, "state.terminated")
        waiting_reason = text(cs, "state.waiting.reason")
        if isinstance(term, dict) and number(term, "exitCode") == 0:
            continue
        if sidecar and cs.get("started") is True:
            ready += 1 if cs.get("ready") is True else 0
            continue
        if isinstance(term, dict):
            reason = _terminated_reason(term, "Init:")
        elif waiting_reason and waiting_reason != "PodInitializing":
            reason = "Init:" + waiting_reason
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or has_condition(pod, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        for cs in reversed(dicts(status, "containerStatuses")):
            restarts += number(cs, "restartCount")
            last_restart = _later(last_restart, cs)
            term = get(cs, "state.terminated")
            if text(cs, "state.waiting.reason"):
                reason = text(cs, "state.waiting.reason")
            elif isinstance(term, dict):
                reason = _terminated_reason(term)
            elif cs.get("ready") is True and isinstance(get(cs, "state.running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if has_condition(pod, "Ready") else "NotReady"

    if get(pod, "metadata.deletionTimestamp"):
        if text(status, "reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    shown = str(restarts)
    if restarts and last_restart is not None:
        shown = f"{restarts} ({human_duration(now - last_restart)} ago)"
    return f"{ready}/{total}", reason, shown


def row(pod: Obj, now: float) -> list[Any]:
    ready, reason, restarts = summary(pod, now)
    gates = dicts(pod, "spec.readinessGates")
    readiness = "<none>"
    if gates:
        true_conditions = 0
        conditions = dicts(pod, "status.conditions")
        for gate in gates:
            match = next((c for c in conditions if text(c, "type") == text(gate, "conditionType")), None)
            if match is not None and text(match, "status") == "True":
                true_conditions += 1
        readiness = f"{true_conditions}/{len(gates)}"
    return [
        ready,
        reason,
        restarts,
        pod_ip(pod) or "<none>",
        text(pod, "spec.nodeName") or "<none>",
        text(pod, "status.nominatedNodeName") or "<none>",
        readiness,
    ]


def row_conditions(pod: Obj) -> list[dict[str, str]]:
    """kube marks finished pods' rows Completed (a client may hide them)."""
    phase = text(pod, "status.phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return []


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Pod",
    plural="pods",
    singular="pod",
    namespaced=True,
    empty_status={},
    short_names=("po",),
    categories=("all",),
    subresources=(
        Subresource("attach", "PodAttachOptions", verbs=("create", "get"), handler=PodStreamHandler(ATTACH)),
        Subresource("binding", "Binding", verbs=("create",), handler=BindingHandler()),
        Subresource("ephemeralcontainers", "Pod", handler=ObjectViewHandler(EPHEMERAL_CONTAINERS)),
        Subresource("eviction", "Eviction", group="policy", version="v1", verbs=("create",), handler=EvictionHandler()),
        Subresource("exec", "PodExecOptions", verbs=("create", "get"), handler=PodStreamHandler(EXEC)),
        Subresource("log", "Pod", verbs=("get",), handler=PodLogHandler()),
        Subresource(
            "portforward", "PodPortForwardOptions", verbs=("create", "get"), handler=PodStreamHandler(PORT_FORWARD)
        ),
        Subresource(
            "proxy", "PodProxyOptions", verbs=("create", "delete", "get", "patch", "update"), handler=PodProxyHandler()
        ),
        Subresource("status", "Pod", handler=status_view(OWNER_REFERENCES)),
    ),
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=(
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    columns=(
        Column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
        Column("Status", description="The aggregate status of the containers in this pod."),
        Column(
            "Restarts",
            description="The number of times the containers in this pod have been restarted and when the last "
            "container in this pod has restarted.",
        ),
        Column(
            "IP", priority=1, description="podIP address allocated to the pod. Routable at least within the cluster."
        ),
        Column("Node", priority=1, description="NodeName indicates in which node this pod is scheduled."),
        Column(
            "Nominated Node",
            priority=1,
            description="nominatedNodeName is set only when this pod preempts other pods on the node.",
        ),
        Column("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated."),
    ),
    row=row,
    row_conditions=row_conditions,
    graceful=True,
    return_deleted=True,
)
