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
  does (unset or true leave it off; kube's validation refuses false with privileged);
- capabilities (`capabilities`): a container that is not `privileged` keeps only the container
  runtime's default set (containerd's: CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW,
  SETGID, SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE), changed by
  `securityContext.capabilities` as containerd changes it: `add: [ALL]` starts from every one,
  `drop: [ALL]` from none, then the named ones are added, then the named ones dropped.  The set
  is the process's bounding set: a root process keeps just those across exec (no NET_ADMIN: it
  cannot add a link to the node's network), a non-root one has none anyway.  An unknown name is
  refused naming the field (runc refuses it too).
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


def read_only_root(container: Obj) -> bool:
    """Whether the container's root filesystem is read-only (its volumes stay as mounted)."""
    return as_dict(container.get("securityContext")).get("readOnlyRootFilesystem") is True


def no_new_privs(container: Obj) -> bool:
    """Whether the container's process may not gain privileges through exec."""
    return as_dict(container.get("securityContext")).get("allowPrivilegeEscalation") is False


CAPABILITIES: dict[str, int] = {
    name: number
    for number, name in enumerate(
        (
            "CHOWN",
            "DAC_OVERRIDE",
            "DAC_READ_SEARCH",
            "FOWNER",
            "FSETID",
            "KILL",
            "SETGID",
            "SETUID",
            "SETPCAP",
            "LINUX_IMMUTABLE",
            "NET_BIND_SERVICE",
            "NET_BROADCAST",
            "NET_ADMIN",
            "NET_RAW",
            "IPC_LOCK",
            "IPC_OWNER",
            "SYS_MODULE",
            "SYS_RAWIO",
            "SYS_CHROOT",
            "SYS_PTRACE",
            "SYS_PACCT",
            "SYS_ADMIN",
            "SYS_BOOT",
            "SYS_NICE",
            "SYS_RESOURCE",
            "SYS_TIME",
            "SYS_TTY_CONFIG",
            "MKNOD",
            "LEASE",
            "AUDIT_WRITE",
            "AUDIT_CONTROL",
            "SETFCAP",
            "MAC_OVERRIDE",
            "MAC_ADMIN",
            "SYSLOG",
            "WAKE_ALARM",
            "BLOCK_SUSPEND",
            "AUDIT_READ",
            "PERFMON",
            "BPF",
            "CHECKPOINT_RESTORE",
        )
    )
}  # linux/capability.h's numbers, by the names kube writes (no CAP_ prefix)
DEFAULT_CAPABILITIES = frozenset(
    CAPABILITIES[name]
    for name in (
        "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
        "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
    )
)  # fmt: skip


def capabilities(container: Obj, where: str = "container") -> frozenset[int] | None:
    """The capabilities the container's process may have (its bounding set); None: every one
    (a privileged container)."""
    context = as_dict(container.get("securityContext"))
    if context.get("privileged") is True:
        return None
    asked = as_dict(context.get("capabilities"))
    field = f"{where}.securityContext.capabilities"
    add, drop = _names(asked.get("add"), f"{field}.add"), _names(asked.get("drop"), f"{field}.drop")
    kept = set(DEFAULT_CAPABILITIES)
    if "ALL" in add:
        kept = set(CAPABILITIES.values())
    if "ALL" in drop:
        kept = set()
    kept |= {CAPABILITIES[name] for name in add if name != "ALL"}
    kept -= {CAPABILITIES[name] for name in drop if name != "ALL"}
    return frozenset(kept)


def _names(value: Any, field: str) -> list[str]:
    """Capability names as kube writes them (`NET_ADMIN`; `CAP_NET_ADMIN` and any case are
    taken too, as containerd takes them), each known or `ALL`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SecurityContextError(f"{field}: must be a list of capability names, got {value!r}")
    names = []
    for i, raw in enumerate(value):
        name = raw.upper().removeprefix("CAP_") if isinstance(raw, str) else None
        if name is None or (name != "ALL" and name not in CAPABILITIES):
            raise SecurityContextError(f"{field}[{i}]: unknown capability {raw!r}")
        names.append(name)
    return names
