"""What sets a container's process apart from the host: its volume mounts, the pod's network
and IPC namespaces, the pod's sysctls, its hostname and its resource limits.

The pod worker describes it (`Sandbox`), the runtime records it in the run's `spec.json`, and
the shim applies it in two steps.  `enter` runs in the shim before it starts the container: it
joins the pod's IPC and network namespaces (inherited by the container) and writes the pod's
sysctls there; a failure is the container's StartError in its own words.  `child_preexec` runs in the
container's process between fork and exec: what must not touch the shim (a mount at /tmp would
hide the shim's own run directory; the shim's memory must not count against a limit).  It
reports a failure through a pipe, as subprocess says only "exception in preexec_fn".  `join`
puts a `kubectl exec` command or an exec probe into the namespaces of the container's running
process, so it sees what the container sees.

Sysctls (`spec.securityContext.sysctls`) are written by every container's shim, in the pod's
namespaces (the same values each time): each must be safe (machinery/sysctls.py: kube's
kubelet refuses others unless told to allow them, and this one has no such flag) and live in a
namespace the pod has of its own, an IPC one (podipc.py) for `kernel.shm*` and the like, a
network one (`pod_network = "netns"`) for `net.*`; anything else would change the node, and is
the container's StartError naming the sysctl.

Mounts: the container gets a mount namespace of its own (private propagation, so nothing
leaks to the host), with each volume bind-mounted at its mountPath; read-only ones are
remounted so.  Every source is opened before the first mount, so a mount over a path (a
hostPath /etc/hosts and the managed file bound over it) cannot change what a later source is.
A mount point missing on the host is made inside the namespace, never on the host's disk:
its nearest existing directory is shadowed there by a tmpfs that shows the same entries (each
bound back from the original) plus the new mount point (`_shadow`).  Inside a volume the mount
point is made in the volume, as a container runtime makes it in the container's files.  A
missing path right under / cannot be made in a shadow of / (a tmpfs mounted over / hides
nothing from a process whose root is already /), so the container gets a root of its own
(`_new_root`): a tmpfs showing every entry of /, moved over / and entered, in which the mount
point is made, as a container runtime enters its image's root.  An entry of the host's / of
the wrong kind for a mount (a directory /test-volume where a subPath binds a file: a bind of a
file over a directory, or of a directory over a file, fails with ENOTDIR) is left out of that
root, and the mount point made in its place.  The working dir is entered after the mounts, so
a workingDir inside a volume is the volume.
A read-only root (`readOnlyRootFilesystem`) is every mount of the namespace but the volumes
(and what lies under them) and the kernel's /proc, /sys and /dev, remounted read-only once the
volumes are in place (`_read_only_root`): the host's / and what is mounted on it are the
container's root filesystem here, and they stay writable for the host.
The hostname: a pod's containers see the pod's (spec.hostname or its name, as kube's runtimes
set it), in a UTS namespace of the container's own made before anything else (a hostNetwork
pod keeps the node's); `kubectl exec` joins it.  Programs that name themselves by it
(agnhost serve-hostname answers with it: conformance's "serve a basic image on each replica")
see the pod, not the machine.
Mounts need root: a kubelet that is not root starts the container without them (`usable`
says so in the container's log), since every pod has its service account volume and no pod
would start otherwise.  A network namespace needs root too (the kubelet refuses
`--pod-network netns` without it).
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.kubelet import limits, linux
from machinery import sysctls as sysctl_names


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
    ipcns: str | None = None  # the pod's IPC namespace file (podipc.py); None: the kubelet's
    sysctls: tuple[tuple[str, str], ...] = ()  # the pod's (name, value), in its order
    no_new_privs: bool = False  # allowPrivilegeEscalation: false (security.py)
    capabilities: frozenset[int] | None = None  # its bounding set (security.py); None: the kubelet's
    read_only_root: bool = False  # readOnlyRootFilesystem (security.py)
    hostname: str | None = None  # the pod's hostname, in a UTS namespace of its own; None: the node's

    def to_json(self) -> dict[str, Any]:
        return {
            "mounts": [[m.source, m.target, m.read_only] for m in self.mounts],
            "netns": self.netns,
            "limits": dict(self.limits),
            "user": None if self.user is None else [self.user[0], self.user[1], list(self.user[2])],
            "ipcns": self.ipcns,
            "sysctls": [list(pair) for pair in self.sysctls],
            "no_new_privs": self.no_new_privs,
            "capabilities": None if self.capabilities is None else sorted(self.capabilities),
            "read_only_root": self.read_only_root,
            "hostname": self.hostname,
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
        ipcns = value.get("ipcns")
        pairs = tuple((str(n), str(v)) for n, v in value.get("sysctls") or ())
        caps = value.get("capabilities")
        return cls(
            mounts,
            str(netns) if netns else None,
            limits if isinstance(limits, Mapping) else {},
            run_as,
            str(ipcns) if ipcns else None,
            pairs,
            value.get("no_new_privs") is True,
            None if caps is None else frozenset(int(c) for c in caps),
            value.get("read_only_root") is True,
            str(value["hostname"]) if value.get("hostname") else None,
        )


class SandboxError(Exception):
    """The sandbox could not be set up (the container does not start); the message says why."""


def usable(sandbox: Sandbox) -> tuple[Sandbox, str]:
    """The sandbox this process can set up, and a line for the container's log when it had to
    leave the mounts, the user or the sysctls out (not root)."""
    if os.geteuid() == 0 or (
        not sandbox.mounts
        and sandbox.user is None
        and not sandbox.sysctls
        and not sandbox.read_only_root
        and sandbox.hostname is None
    ):
        return sandbox, ""
    notes = []
    if sandbox.mounts:
        paths = ", ".join(m.target for m in sandbox.mounts)
        notes.append(f"raftkube: volumes not mounted ({paths}): the kubelet does not run as root\n")
    if sandbox.user is not None:
        notes.append(f"raftkube: runs as uid {os.geteuid()}, not {sandbox.user[0]}: the kubelet does not run as root\n")
    if sandbox.sysctls:
        names = ", ".join(name for name, _ in sandbox.sysctls)
        notes.append(f"raftkube: sysctls not set ({names}): the kubelet does not run as root\n")
    if sandbox.read_only_root:
        notes.append("raftkube: the root filesystem is not read-only: the kubelet does not run as root\n")
    if sandbox.hostname is not None:
        notes.append(f"raftkube: hostname is the node's, not {sandbox.hostname}: the kubelet does not run as root\n")
    # a kubelet that is not root has no capability to give away, nor CAP_SETPCAP to drop one
    return Sandbox((), sandbox.netns, sandbox.limits, no_new_privs=sandbox.no_new_privs), "".join(notes)


def enter(sandbox: Sandbox) -> None:
    """In the shim, before it starts the container: join the pod's IPC and network namespaces
    and write the pod's sysctls in them."""
    if not sandbox.mounts and sandbox.netns is None and sandbox.ipcns is None and not sandbox.sysctls:
        return
    if os.geteuid() != 0:
        raise SandboxError("volume mounts and pod namespaces need the kubelet to run as root")  # see usable
    try:
        if sandbox.ipcns is not None:
            linux.setns(sandbox.ipcns, linux.CLONE_NEWIPC)
        if sandbox.netns is not None:
            linux.setns(sandbox.netns, linux.CLONE_NEWNET)
    except OSError as e:
        raise SandboxError(str(e)) from None
    for name, value in sandbox.sysctls:
        _set_sysctl(name, value, sandbox)


def _set_sysctl(name: str, value: str, sandbox: Sandbox) -> None:
    """Write one of the pod's sysctls, in the pod's own namespace; SandboxError naming it when
    it is not safe, would change the node, or the kernel refuses it."""
    where = f"spec.securityContext.sysctls: {name}"
    if not sysctl_names.is_safe(name):
        raise SandboxError(f"{where}: forbidden sysctl, not in the kubelet's safe set (no unsafe sysctl is allowed)")
    namespace = sysctl_names.namespace_of(name)
    if namespace is None:
        raise SandboxError(f"{where}: not namespaced: setting it would change the node")
    if namespace == "ipc" and sandbox.ipcns is None:
        raise SandboxError(f"{where}: the pod has no IPC namespace of its own (hostIPC)")
    if namespace == "net" and sandbox.netns is None:
        raise SandboxError(
            f"{where}: the pod has no network namespace of its own: pods share the node's network"
            ' unless the kubelet runs with pod_network = "netns"'
        )
    try:
        with open(sysctl_names.proc_path(name), "w") as f:
            f.write(value)
    except OSError as e:
        raise SandboxError(f"{where}: cannot be set to {value!r}: {e.strerror}") from None


def _mount_all(mounts: tuple[Mount, ...], read_only_root: bool = False) -> None:
    """In the container's process: a private mount namespace with every mount in it (and the
    rest read-only when `read_only_root`)."""
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    sources: list[int] = []  # opened in the new namespace: a bind takes its source from there
    try:
        for m in mounts:
            try:
                sources.append(os.open(m.source, os.O_PATH | os.O_CLOEXEC))
            except OSError as e:
                raise OSError(e.errno, f"mount {m.target}: {m.source}: {e.strerror}") from None
        made: dict[str, bool] = {}  # paths this namespace may write in: True a volume, False a shadow
        for m, fd in zip(mounts, sources, strict=True):
            source = f"/proc/self/fd/{fd}"
            _mount_point(m.target, os.path.isdir(source), made)
            linux.mount(source, m.target, None, linux.MS_BIND | linux.MS_REC)
            if m.read_only:
                linux.mount(None, m.target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_REC)
            made[m.target] = True
        if read_only_root:
            _read_only_root({m.target for m in mounts})
    finally:
        for fd in sources:
            os.close(fd)


KERNEL_FILESYSTEMS = ("/proc", "/sys", "/dev")  # a container runtime's own mounts: never the image's files
_KEPT_FLAGS = {"nosuid": linux.MS_NOSUID, "nodev": linux.MS_NODEV, "noexec": linux.MS_NOEXEC}


def _read_only_root(volumes: set[str]) -> None:
    """Remount read-only every mount of this namespace that is not a volume (nor under one) nor
    a kernel filesystem, keeping its nosuid/nodev/noexec.  The last mount at a path is the one
    seen there, and a bind remount changes that one alone."""
    for target, options in _mounts():
        if any(_within(target, top) for top in (*volumes, *KERNEL_FILESYSTEMS)):
            continue
        if "ro" in options:
            continue
        flags = linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY
        for name, flag in _KEPT_FLAGS.items():
            if name in options:
                flags |= flag
        try:
            linux.mount(None, target, None, flags)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EINVAL):  # gone, or hidden under a later mount
                raise OSError(e.errno, f"read-only root: remount {target}: {e.strerror}") from None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of each mount of this namespace, as /proc/self/mountinfo
    lists them (octal escapes in paths decoded)."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6:
                continue
            target = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            out.append((target, set(fields[5].split(","))))
    return out


def _mount_point(target: str, directory: bool, made: dict[str, bool]) -> None:
    """Make `target` exist in this namespace (a directory, or an empty file for a file bind)
    without writing the host's disk: in a volume (or a shadow, or a root of our own) it is made
    there; elsewhere its nearest existing directory is shadowed first, or for a path right under
    / the namespace gets a root of its own."""
    if os.path.lexists(target):
        parent = os.path.dirname(target)
        if os.path.isdir(target) == directory or parent != "/" or target in made:
            return  # a kind that does not fit elsewhere is the mount's own error (ENOTDIR), as in kube
        if "/" in made:  # the root is ours already: take the leftover out of it
            _take_out(target)
        else:
            _new_root(leave_out=os.path.basename(target))
            made["/"] = False
    parent = os.path.dirname(target)
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    owner = max((p for p in made if parent == p or parent.startswith(p.rstrip("/") + "/")), key=len, default=None)
    if parent == "/":
        if "/" not in made:
            _new_root(leave_out=None)
            made["/"] = False
    elif not (owner is not None and (made[owner] or owner == parent)):
        _shadow(parent)
        made[parent] = False
    if directory:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


def _shadow(directory: str) -> None:
    """Cover `directory` (in this namespace only) with a tmpfs that shows what it showed: each
    entry bound back from the original (with what is mounted under it), each symlink made again.
    What is then created in it lives in the tmpfs, not on the host."""
    original = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        info = os.stat(directory)
        entries = os.listdir(directory)
        linux.mount("tmpfs", directory, "tmpfs", 0, _tmpfs_options(info))
        for name in entries:
            _show(original, name, directory)
    finally:
        os.close(original)


def _new_root(leave_out: str | None) -> None:
    """Give this namespace a root of its own: a tmpfs showing every entry of / (bound back, with
    what is mounted under it) except `leave_out`, moved over / and entered (chroot).  A process
    that joins the namespace later (`join`) starts at that top mount, so it sees the same.  The
    tmpfs is filled while mounted on a directory that is bound back only after the move (else
    its bind would take the tmpfs along): `leave_out` itself when it is a directory, which is
    never bound back."""
    original = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        info = os.fstat(original)
        entries = [name for name in os.listdir("/") if name != leave_out]
        candidates = [leave_out, *entries] if leave_out is not None else entries
        directories = [n for n in candidates if n != "proc" and _is_directory(f"/{n}")]
        if not directories:
            raise OSError(errno.ENOTDIR, "no directory under / to build a container's root in")
        scratch = directories[0]
        linux.mount("tmpfs", f"/{scratch}", "tmpfs", 0, _tmpfs_options(info))
        for name in entries:
            if name == scratch:
                os.mkdir(f"/{scratch}/{name}")  # bound once the tmpfs has left it
            else:
                _show(original, name, f"/{scratch}")
        os.chdir(f"/{scratch}")
        linux.mount(".", "/", None, linux.MS_MOVE)
        os.chroot(".")
        os.chdir("/")
        if scratch != leave_out:
            linux.mount(f"/proc/self/fd/{original}/{scratch}", f"/{scratch}", None, linux.MS_BIND | linux.MS_REC)
    finally:
        os.close(original)


def _take_out(path: str) -> None:
    """Remove what `_new_root` shows at `path`: a symlink made again, or an entry bound back."""
    if not stat.S_ISLNK(os.lstat(path).st_mode):
        linux.umount2(path, linux.MNT_DETACH)
    if _is_directory(path):
        os.rmdir(path)
    else:
        os.unlink(path)


def _is_directory(path: str) -> bool:
    """A directory itself, not a link to one (False when it is gone)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _tmpfs_options(info: os.stat_result) -> str:
    return f"mode={info.st_mode & 0o7777:o},uid={info.st_uid},gid={info.st_gid}"


def _show(original: int, name: str, directory: str) -> None:
    """Show entry `name` of the directory open as `original` in `directory`: a symlink made
    again, anything else made empty and the original bound over it."""
    was, here = f"/proc/self/fd/{original}/{name}", os.path.join(directory, name)
    try:
        mode = os.lstat(was).st_mode
        if stat.S_ISLNK(mode):
            os.symlink(os.readlink(was), here)
            return
        if stat.S_ISDIR(mode):
            os.mkdir(here)
        else:
            os.close(os.open(here, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except FileNotFoundError:
        return  # gone since it was listed
    linux.mount(was, here, None, linux.MS_BIND | linux.MS_REC)


def child_preexec(
    sandbox: Sandbox, cwd: str | None, report_fd: int, cgroup: Path | None = None
) -> Callable[[], None] | None:
    """What runs in the container's process before exec (None: nothing): its mounts (then the
    working dir is entered here: the caller passes no cwd to Popen), then its limits: it joins
    the run's `cgroup` when the shim made one, else takes them as rlimits (see limits.py), then
    its capabilities (the ones it may not have leave the bounding set), its user and groups,
    then no new privileges.  A failure's words go to `report_fd` before the exception ends the
    child."""
    apply_limits = limits.preexec(sandbox.limits, cgroup)
    drop: list[int] = []
    if sandbox.capabilities is not None:
        drop = sorted(linux.bounding_set() - sandbox.capabilities)
    if (
        not sandbox.mounts
        and not sandbox.read_only_root
        and sandbox.hostname is None
        and apply_limits is None
        and sandbox.user is None
        and not sandbox.no_new_privs
        and not drop
    ):
        return None

    def prepare() -> None:
        try:
            if sandbox.hostname is not None:  # first: it needs CAP_SYS_ADMIN, which may be dropped below
                linux.unshare(linux.CLONE_NEWUTS)
                socket.sethostname(sandbox.hostname)
            if sandbox.mounts or sandbox.read_only_root:
                _mount_all(sandbox.mounts, sandbox.read_only_root)
                if cwd:
                    os.chdir(cwd)
            if apply_limits is not None:
                apply_limits()
            if drop:  # after the mounts and the cgroup, which need what it drops
                linux.drop_from_bounding_set(drop)
            if sandbox.user is not None:  # last: mounts and the cgroup need root
                uid, gid, groups = sandbox.user
                os.setgroups(list(groups))
                os.setgid(gid)
                os.setuid(uid)
            if sandbox.no_new_privs:
                linux.set_no_new_privs()
        except OSError as e:
            os.write(report_fd, str(e).encode(errors="replace")[:4096])
            raise

    return prepare


def join(pid: int, cwd: str | None = None) -> Callable[[], None] | None:
    """A preexec that enters the IPC, UTS, network and mount namespaces of process `pid` where they are
    not this process's own, and takes its bounding set and its no_new_privs flag (None when there
    is nothing to take).  Entering a mount namespace moves to its root, so the working dir `cwd` is
    entered again after."""
    kinds = []
    namespaces = (
        ("ipc", linux.CLONE_NEWIPC),
        ("uts", linux.CLONE_NEWUTS),
        ("net", linux.CLONE_NEWNET),
        ("mnt", linux.CLONE_NEWNS),
    )
    for name, flag in namespaces:
        try:
            if os.stat(f"/proc/{pid}/ns/{name}").st_ino != os.stat(f"/proc/self/ns/{name}").st_ino:
                kinds.append((f"/proc/{pid}/ns/{name}", flag))
        except OSError:
            continue  # gone, or not ours to look at: run beside it as before
    no_new_privs = _has_no_new_privs(pid)
    try:
        drop = sorted(linux.bounding_set() - linux.bounding_set(pid))
    except OSError:
        drop = []  # gone
    if not kinds and not no_new_privs and not drop:
        return None

    def enter_namespaces() -> None:
        for path, flag in kinds:
            linux.setns(path, flag)
        if cwd:
            os.chdir(cwd)
        if drop:
            linux.drop_from_bounding_set(drop)
        if no_new_privs:
            linux.set_no_new_privs()

    return enter_namespaces


def _has_no_new_privs(pid: int) -> bool:
    """Whether process `pid` runs with no_new_privs (False when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return any(line.split() == ["NoNewPrivs:", "1"] for line in status.splitlines())
