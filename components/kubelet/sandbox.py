"""What sets a container's process apart from the host: its volume mounts, the pod's network
namespace and its resource limits.

The pod worker describes it (`Sandbox`), the runtime records it in the run's `spec.json`, and
the shim applies it: `enter` in the shim itself before it starts the container (namespaces are
inherited, and a failure here is reported as the container's StartError with its words), and
`child_preexec` in the container's process between fork and exec (what must not apply to the
shim: its limits).  `join` puts a `kubectl exec` command or an exec probe into the
namespaces of the container's running process, so it sees what the container sees.

Mounts: the shim takes a mount namespace of its own (private propagation, so nothing leaks to
the host), then bind-mounts each volume at its mountPath; read-only ones are remounted so.  A
mount point that does not exist on the host is created there (a directory, or an empty file
for a file bind) and left behind: another pod's namespace may still mount on it.
Everything here needs root; without it a pod that asks for mounts does not start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.kubelet import limits, linux


@dataclass(frozen=True, slots=True)
class Mount:
    source: str  # the host path (a volume's directory, or a path under it for a subPath)
    target: str  # the absolute path in the container
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Sandbox:
    mounts: tuple[Mount, ...] = ()
    netns: str | None = None  # the network namespace file to join; None: the host's network
    limits: Mapping[str, Any] = field(default_factory=dict)  # see limits.py

    def to_json(self) -> dict[str, Any]:
        return {
            "mounts": [[m.source, m.target, m.read_only] for m in self.mounts],
            "netns": self.netns,
            "limits": dict(self.limits),
        }

    @classmethod
    def from_json(cls, value: Any) -> Sandbox:
        if not isinstance(value, Mapping):
            return cls()
        mounts = tuple(Mount(str(s), str(t), bool(r)) for s, t, r in value.get("mounts") or ())
        netns = value.get("netns")
        limits = value.get("limits")
        return cls(mounts, str(netns) if netns else None, limits if isinstance(limits, Mapping) else {})


class SandboxError(Exception):
    """The sandbox could not be set up (the container does not start); the message says why."""


def enter(sandbox: Sandbox) -> None:
    """In the shim, before it starts the container: join the pod's network, mount the volumes."""
    if not sandbox.mounts and sandbox.netns is None:
        return
    if os.geteuid() != 0:
        raise SandboxError("volume mounts and pod network namespaces need the kubelet to run as root")
    try:
        if sandbox.netns is not None:
            linux.setns(sandbox.netns, linux.CLONE_NEWNET)
        if sandbox.mounts:
            linux.unshare(linux.CLONE_NEWNS)
            linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
            for m in sandbox.mounts:
                _bind(m)
    except OSError as e:
        raise SandboxError(str(e)) from None


def _bind(m: Mount) -> None:
    if not os.path.exists(m.target):
        if os.path.isdir(m.source):
            os.makedirs(m.target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(m.target), exist_ok=True)
            with open(m.target, "ab"):
                pass
    linux.mount(m.source, m.target, None, linux.MS_BIND | linux.MS_REC)
    if m.read_only:
        linux.mount(None, m.target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY)


def child_preexec(sandbox: Sandbox, cgroup: Path | None = None) -> Callable[[], None] | None:
    """What runs in the container's process before exec (None: nothing): it joins the run's
    `cgroup` when the shim made one, else takes its limits as rlimits (see limits.py)."""
    return limits.preexec(sandbox.limits, cgroup)


def join(pid: int) -> Callable[[], None] | None:
    """A preexec that enters the network and mount namespaces of process `pid` where they are
    not this process's own (None when there is nothing to join)."""
    kinds = []
    for name, flag in (("net", linux.CLONE_NEWNET), ("mnt", linux.CLONE_NEWNS)):
        try:
            if os.stat(f"/proc/{pid}/ns/{name}").st_ino != os.stat(f"/proc/self/ns/{name}").st_ino:
                kinds.append((f"/proc/{pid}/ns/{name}", flag))
        except OSError:
            continue  # gone, or not ours to look at: run beside it as before
    if not kinds:
        return None

    def enter_namespaces() -> None:
        for path, flag in kinds:
            linux.setns(path, flag)

    return enter_namespaces
