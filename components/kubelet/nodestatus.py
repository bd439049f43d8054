"""The Node a kubelet registers and the status it posts, as kube's kubelet writes them.

`register` builds the Node: kube's well-known labels, capacity from the node's config and
allocatable as capacity less what is reserved for the system, addresses, nodeInfo, the
kubelet's port and the four conditions.  `conditions` gives the conditions for what the
kubelet observes (each with kube's reason and message); `merge_conditions` stamps them:
`lastHeartbeatTime` on every post, `lastTransitionTime` only when a status changes.
`needs_post` says whether a status differs from the last one posted in anything but
heartbeats (posted at once), else it waits for the periodic post (every minute): the Lease,
renewed every 10 s, is the heartbeat the node lifecycle controller watches.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from machinery.objects import Obj
from machinery.quantity import QuantityError, canonical, parse_quantity

STATUS_PERIOD_S = 60.0
LEASE_RENEW_S = 10.0
KUBELET_VERSION = "v1.33.0-raftkube"
# (type, reason and message when healthy, reason and message when not)
_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
     "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
     "KubeletHasDiskPressure", "kubelet has disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available",
     "KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
)  # fmt: skip


class NodeConfigError(ValueError):
    """A node setting that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class NodeConfig:
    name: str
    address: str  # the InternalIP the apiserver reaches the kubelet on
    port: int  # the kubelet's HTTPS port
    capacity: Mapping[str, str] = field(default_factory=lambda: {"cpu": "4", "memory": "8Gi", "pods": "110"})
    reserved: Mapping[str, str] = field(default_factory=dict)  # system-reserved + kube-reserved
    labels: Mapping[str, str] = field(default_factory=dict)
    runtime: str = "process"


@dataclass(frozen=True, slots=True)
class Observed:
    """What the kubelet sees of its node right now."""

    memory_pressure: bool = False
    disk_pressure: bool = False
    pid_pressure: bool = False
    runtime_ready: bool = True
    runtime_problem: str = ""


def _quantities(values: Mapping[str, str], where: str) -> dict[str, Any]:
    out = {}
    for name, text in values.items():
        try:
            out[name] = parse_quantity(text)
        except QuantityError as e:
            raise NodeConfigError(f"{where}.{name}: {e}") from None
    return out


def allocatable(config: NodeConfig) -> dict[str, str]:
    """Capacity less the reservations, never below zero (kube's node allocatable)."""
    capacity = _quantities(config.capacity, "capacity")
    reserved = _quantities(config.reserved, "reserved")
    for name in reserved:
        if name not in capacity:
            raise NodeConfigError(f"reserved.{name}: not a resource of the node's capacity")
    out = {}
    for name, q in capacity.items():
        left = q - reserved[name] if name in reserved else q
        out[name] = canonical(left) if left.value > 0 else "0"
    return out


def conditions(observed: Observed) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of the four conditions, in kube's order."""
    pressure = (observed.memory_pressure, observed.disk_pressure, observed.pid_pressure)
    out = [
        (kind, "True" if under else "False", bad if under else good, bad_msg if under else good_msg)
        for (kind, good, good_msg, bad, bad_msg), under in zip(_CONDITIONS, pressure, strict=True)
    ]
    if observed.runtime_ready:
        out.append(("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    else:
        out.append(("Ready", "False", "KubeletNotReady", observed.runtime_problem or "container runtime is down"))
    return out


def merge_conditions(held: Sequence[Obj], observed: Observed, now: str) -> list[Obj]:
    old = {str(c.get("type")): c for c in held if isinstance(c, Mapping)}
    out = []
    for kind, status, reason, message in conditions(observed):
        before = old.get(kind)
        since = before.get("lastTransitionTime") if before and before.get("status") == status else None
        out.append(
            {
                "type": kind,
                "status": status,
                "lastHeartbeatTime": now,
                "lastTransitionTime": since or now,
                "reason": reason,
                "message": message,
            }
        )
    return out


def register(config: NodeConfig, observed: Observed, now: str) -> Obj:
    """The Node object the kubelet creates (or updates to) when it starts."""
    if not config.name:
        raise NodeConfigError("name: must not be empty")
    if not 0 < config.port < 65536:
        raise NodeConfigError(f"port: must be from 1 to 65535, got {config.port}")
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    labels = {
        "kubernetes.io/hostname": config.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": arch,
        **config.labels,
    }
    capacity = {name: canonical(q) for name, q in _quantities(config.capacity, "capacity").items()}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": config.name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable(config),
            "addresses": [
                {"type": "InternalIP", "address": config.address},
                {"type": "Hostname", "address": config.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
            "nodeInfo": {
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": arch,
                "osImage": platform.freedesktop_os_release().get("PRETTY_NAME", "Linux")
                if _has_os_release()
                else "Linux",
                "kernelVersion": platform.release(),
                "containerRuntimeVersion": f"raftkube-{config.runtime}://{KUBELET_VERSION.lstrip('v')}",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "conditions": merge_conditions([], observed, now),
        },
    }


def _has_os_release() -> bool:
    try:
        platform.freedesktop_os_release()
    except OSError:
        return False
    return True


def needs_post(posted: Mapping[str, Any] | None, status: Mapping[str, Any], since_post_s: float) -> bool:
    """Post now: something but heartbeats changed, or the periodic post is due."""
    if posted is None or since_post_s >= STATUS_PERIOD_S:
        return True
    return _without_heartbeats(posted) != _without_heartbeats(status)


def _without_heartbeats(status: Mapping[str, Any]) -> Obj:
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastHeartbeatTime"}
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    ]
    return out
