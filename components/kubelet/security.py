"""Who a container's process runs as, from the pod's and the container's securityContext, as
kube's kubelet decides it (kuberuntime's determineEffectiveSecurityContext and verifyRunAsNonRoot).

- uid: the container's `runAsUser`, else the pod's, else the image's user, which for the images
  a process runtime stands in for is root (None here: the kubelet's own user, unchanged);
- gid: `runAsGroup` the same way, else 0 (the primary group of an image user that has no entry);
- supplementary groups: the pod's `supplementalGroups`, then its `fsGroup`;
- `runAsNonRoot: true` refuses a container that would run as uid 0 (CreateContainerConfigError
  with kube's words), checked before anything starts;
- no new privileges (`no_new_privs`): `allowPrivilegeEscalation: false` sets the process's
  no_new_privs flag, so that a setuid program it runs keeps its caller's uid, as kube's runtime
  does (unset or true leave it off; kube's validation refuses false with privileged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machinery.objects import Obj, as_dict

MAX_ID = 2**31 - 1  # kube validates ids as non-negative int64; the kernel takes 32-bit ones


class SecurityContextError(Exception):
    """The container cannot run as its securityContext says (kube's CreateContainerConfigError)."""


@dataclass(frozen=True, slots=True)
class RunAs:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()


def _id(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ID:
        raise SecurityContextError(f"{where}: must be an integer from 0 to {MAX_ID}, got {value!r}")
    return value


def _first(container_sc: Obj, pod_sc: Obj, key: str, where: str) -> int | None:
    own = _id(container_sc.get(key), f"{where}.securityContext.{key}")
    return own if own is not None else _id(pod_sc.get(key), f"spec.securityContext.{key}")


def run_as(pod: Obj, container: Obj, where: str = "container") -> RunAs | None:
    """The user, group and groups the container runs as; None: as the kubelet runs (root)."""
    pod_sc = as_dict(as_dict(pod.get("spec")).get("securityContext"))
    own_sc = as_dict(container.get("securityContext"))
    uid = _first(own_sc, pod_sc, "runAsUser", where)
    gid = _first(own_sc, pod_sc, "runAsGroup", where)
    non_root = own_sc.get("runAsNonRoot")
    if non_root is None:
        non_root = pod_sc.get("runAsNonRoot")
    if non_root is True and not uid:
        meta = as_dict(pod.get("metadata"))
        who = f"pod: {meta.get('name')}_{meta.get('namespace')}({meta.get('uid')}), container: {container.get('name')}"
        if uid == 0:
            raise SecurityContextError(f"container's runAsUser breaks non-root policy ({who})")
        raise SecurityContextError(f"container has runAsNonRoot and image will run as root ({who})")
    groups: list[int] = []
    for i, g in enumerate(pod_sc.get("supplementalGroups") or ()):
        found = _id(g, f"spec.securityContext.supplementalGroups[{i}]")
        if found is not None and found not in groups:
            groups.append(found)
    fs_group = _id(pod_sc.get("fsGroup"), "spec.securityContext.fsGroup")
    if fs_group is not None and fs_group not in groups:
        groups.append(fs_group)
    if uid is None and gid is None and not groups:
        return None
    return RunAs(uid if uid is not None else 0, gid if gid is not None else 0, tuple(groups))


def no_new_privs(container: Obj) -> bool:
    """Whether the container's process may not gain privileges through exec."""
    return as_dict(container.get("securityContext")).get("allowPrivilegeEscalation") is False
