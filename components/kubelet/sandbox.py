"""What sets a container's process apart from the host: its volume mounts, the pod's network
namespace and its resource limits.

The pod worker describes it (`Sandbox`), the runtime records it in the run's `spec.json`, and
the shim applies it in two steps.  `enter` runs in the shim before it starts the container: it
joins the pod's network namespace (inherited by the container) and creates missing mount
points; a failure is the container's StartError in its own words.  `child_preexec` runs in the
container's process between fork and exec: what must not touch the shim (a mount at /tmp would
hide the shim's own run directory; the shim's memory must not count against a limit).  It
reports a failure through a pipe, as subprocess says only "exception in preexec_fn".  `join`
puts a `kubectl exec` command or an exec probe into the namespaces of the container's running
process, so it sees what the container sees.

Mounts: the container gets a mount namespace of its own (private propagation, so nothing
leaks to the host), with each volume bind-mounted at its mountPath; read-only ones are
remounted so.  A mount point missing on the host is created there (a directory, or an empty
file for a file bind) and left behind: another pod's namespace may still mount on it.  The
working dir is entered after the mounts, so a workingDir inside a volume is the volume.
Mounts need root: a kubelet that is not root starts the container without them (`usable`
says so in the container's log), since every pod has its service account volume and no pod
would start otherwise.  A network namespace needs root too (the kubelet refuses
`--pod-network netns` without it).
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
    # (uid, gid, supplementary groups) the process takes before exec (security.py); None: as is
    user: tuple[int, int, tuple[int, ...]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mounts": [[m.source, m.target, m.read_only] for m in self.mounts],
            "netns": self.netns,
            "limits": dict(self.limits),
            "user": None if self.user is None else [self.user[0], self.user[1], list(self.user[2])],
        }

    @classmethod
    def from_json(cls, value: Any) -> Sandbox:
        if not isinstance(value, Mapping):
            return cls()
        mounts = tuple(Mount(str(s), str(t), bool(r)) for s, t, r in value.get("mounts") or ())
        netns = value.get("netns")
        limits = value.get("limits")
        user = value.get("user")
        run_as = (int(user[0]), int(user[1]), tuple(int(g) for g in user[2])) if isinstance(user, list) else None
        return cls(mounts, str(netns) if netns else None, limits if isinstance(limits, Mapping) else {}, run_as)


class SandboxError(Exception):
    """The sandbox could not be set up (the container does not start); the message says why."""


def usable(sandbox: Sandbox) -> tuple[Sandbox, str]:
    """The sandbox this process can set up, and a line for the container's log when it had to
    leave the mounts or the user out (not root)."""
    if os.geteuid() == 0 or (not sandbox.mounts and sandbox.user is None):
        return sandbox, ""
    notes = []
    if sandbox.mounts:
        paths = ", ".join(m.target for m in sandbox.mounts)
        notes.append(f"raftkube: volumes not mounted ({paths}): the kubelet does not run as root\n")
    if sandbox.user is not None:
        notes.append(f"raftkube: runs as uid {os.geteuid()}, not {sandbox.user[0]}: the kubelet does not run as root\n")
    return Sandbox((), sandbox.netns, sandbox.limits), "".join(notes)


def enter(sandbox: Sandbox) -> None:
    """In the shim, before it starts the container: join the pod's network, make mount points."""
    if not sandbox.mounts and sandbox.netns is None:
        return
    if os.geteuid() != 0:
        raise SandboxError("volume mounts and pod network namespaces need the kubelet to run as root")  # see usable
    try:
        if sandbox.netns is not None:
            linux.setns(sandbox.netns, linux.CLONE_NEWNET)
        for m in sandbox.mounts:
            _mount_point(m)
    except OSError as e:
        raise SandboxError(str(e)) from None


def _mount_point(m: Mount) -> None:
    if os.path.lexists(m.target):
        return
    if os.path.isdir(m.source):
        os.makedirs(m.target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(m.target), exist_ok=True)
        with open(m.target, "ab"):
            pass


def _mount_all(mounts: tuple[Mount, ...]) -> None:
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    for m in mounts:
        linux.mount(m.source, m.target, None, linux.MS_BIND | linux.MS_REC)
        if m.read_only:
            linux.mount(None, m.target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_REC)


def child_preexec(
    sandbox: Sandbox, cwd: str | None, report_fd: int, cgroup: Path | None = None
) -> Callable[[], None] | None:
    """What runs in the container's process before exec (None: nothing): its mounts (then the
    working dir is entered here: the caller passes no cwd to Popen), then its limits: it joins
    the run's `cgroup` when the shim made one, else takes them as rlimits (see limits.py), then
    its user and groups.  A failure's words go to `report_fd` before the exception ends the child."""
    apply_limits = limits.preexec(sandbox.limits, cgroup)
    if not sandbox.mounts and apply_limits is None and sandbox.user is None:
        return None

    def prepare() -> None:
        try:
            if sandbox.mounts:
                _mount_all(sandbox.mounts)
                if cwd:
                    os.chdir(cwd)
            if apply_limits is not None:
                apply_limits()
            if sandbox.user is not None:  # last: mounts and the cgroup need root
                uid, gid, groups = sandbox.user
                os.setgroups(list(groups))
                os.setgid(gid)
                os.setuid(uid)
        except OSError as e:
            os.write(report_fd, str(e).encode(errors="replace")[:4096])
            raise

    return prepare


def join(pid: int, cwd: str | None = None) -> Callable[[], None] | None:
    """A preexec that enters the network and mount namespaces of process `pid` where they are
    not this process's own (None when there is nothing to join).  Entering a mount namespace
    moves to its root, so the working dir `cwd` is entered again after."""
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
        if cwd:
            os.chdir(cwd)

    return enter_namespaces
