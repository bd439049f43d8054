"""A pod's volumes on the node, and the mounts its containers ask for.

Each volume is a directory under the kubelet's root, `pods/<uid>/volumes/<name>`: an emptyDir
is an empty directory that lives as long as the pod; one with `medium: Memory` is a tmpfs
mounted there (tmpfs.py), when the kubelet is root (kube's would fail the mount otherwise; a
kubelet that is not root, a supported test mode, keeps a plain directory), and any other medium
(HugePages) is refused;
configMap, secret, downwardAPI and projected volumes hold their files (`volumes.files_of`),
written atomically and written again whenever their sources change, as kube's kubelet
refreshes them, so a running container sees a ConfigMap update.  A hostPath volume is the
node's own file or directory, checked against its type (hostpath.py), nothing under the pod.
`mounts` turns a container's `volumeMounts` into sandbox mounts: the volume (or its `subPath`,
or its `subPathExpr` expanded with the container's environment) at `mountPath`, read-only when
asked, and always for the volumes kube mounts read-only (all but emptyDir and hostPath).  A
missing sub-path directory of an emptyDir or hostPath is made inside the volume; a sub-path
that leads out of it is refused.  `hosts_mount` is kube's kubelet-managed /etc/hosts: the file
`pods/<uid>/etc-hosts` (etchosts.py), bound at /etc/hosts, so the node's own is never written.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from components.kubelet import etchosts, hostpath, resolv, tmpfs
from components.kubelet.envvars import EnvError, Sources, expand_sub_path
from components.kubelet.sandbox import Mount
from components.kubelet.volumes import Files, VolumeError, check_path, files_of, write_atomically
from machinery.objects import Obj

_NO_ENV: Mapping[str, str] = MappingProxyType({})
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS label, as the apiserver checks it


class PodVolumes:
    def __init__(self, base: Path, *, mounts_tmpfs: bool | None = None) -> None:
        self.base = base  # pods/<uid>/volumes
        # a Memory emptyDir is a tmpfs only where mounting is allowed: a kubelet that is root
        self.mounts_tmpfs = os.geteuid() == 0 if mounts_tmpfs is None else mounts_tmpfs
        self._written: dict[str, Files | None] = {}  # what each volume was last made of
        self._claimed: dict[str, str] = {}  # volume name -> the bound claim's host directory

    def _volumes(self, pod: Obj) -> dict[str, tuple[int, Obj]]:
        out: dict[str, tuple[int, Obj]] = {}
        for i, volume in enumerate((pod.get("spec") or {}).get("volumes") or ()):
            name = volume.get("name") if isinstance(volume, dict) else None
            if not isinstance(name, str) or not _NAME.match(name) or len(name) > 63:
                raise VolumeError(f"spec.volumes[{i}].name: must be a DNS label, got {name!r}")
            out[name] = (i, volume)
        return out

    def sync(self, pod: Obj, sources: Sources) -> None:
        """Make every volume of the pod, and rewrite those whose files changed."""
        for name, (i, volume) in self._volumes(pod).items():
            claim = volume.get("persistentVolumeClaim")
            if isinstance(claim, dict):
                claim_name = str(claim.get("claimName") or "")
                path = sources.claims.get(claim_name)
                if path is None:  # the pod waits for its volume, as kube's FailedMount
                    raise VolumeError(f"spec.volumes[{i}].persistentVolumeClaim: claim {claim_name!r} is not bound")
                hostpath.set_up({"path": path, "type": "DirectoryOrCreate"}, f"spec.volumes[{i}].persistentVolumeClaim")
                self._claimed[name] = path
                continue
            if volume.get("hostPath") is not None:
                hostpath.set_up(volume["hostPath"], f"spec.volumes[{i}].hostPath")  # each sync, as kube's
                continue
            files = files_of(volume, pod, sources, f"spec.volumes[{i}]")
            if name in self._written and self._written[name] == files:
                continue
            target = self.base / name
            if files is None:
                where = f"spec.volumes[{i}].emptyDir"
                memory = tmpfs.medium_of(volume["emptyDir"], where) == tmpfs.MEMORY and self.mounts_tmpfs
                size = tmpfs.size_of(volume["emptyDir"], pod, sources.allocatable, where)  # checked on any medium
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(0o777)  # kube's emptyDir: any user of the pod may write
                if memory:
                    tmpfs.set_up(target, size)
            else:
                write_atomically(target, files)
            self._written[name] = files

    def mounts(self, pod: Obj, container: Obj, where: str, env: Mapping[str, str] = _NO_ENV) -> tuple[Mount, ...]:
        """The container's volumeMounts as mounts; VolumeError names the field at fault.  `env`
        is the container's environment, which a `subPathExpr` is expanded with."""
        volumes = self._volumes(pod)
        out: list[Mount] = []
        for j, vm in enumerate(container.get("volumeMounts") or ()):
            here = f"{where}.volumeMounts[{j}]"
            if not isinstance(vm, dict):
                raise VolumeError(f"{here}: must be an object")
            name = vm.get("name")
            if not isinstance(name, str) or name not in volumes:
                raise VolumeError(f"{here}.name: no volume {name!r} in spec.volumes")
            volume = volumes[name][1]
            claimed = self._claimed.get(name) if isinstance(volume.get("persistentVolumeClaim"), dict) else None
            host = volume.get("hostPath") is not None or claimed is not None
            if claimed is not None:
                volume_path = Path(claimed)
            elif host:
                volume_path = Path(hostpath.path_of(volume["hostPath"], f"spec.volumes[{volumes[name][0]}].hostPath"))
            else:
                volume_path = self.base / str(name)
            source = volume_path
            sub, field = _sub_path(vm, env, here)
            if sub:
                source = _inside(volume_path, sub, volume.get("emptyDir") is not None or host, field)
            target = _mount_path(vm.get("mountPath"), f"{here}.mountPath")
            claim_read_only = (volume.get("persistentVolumeClaim") or {}).get("readOnly") is True
            read_only = vm.get("readOnly") is True or claim_read_only or (volume.get("emptyDir") is None and not host)
            out.append(Mount(str(source), target, read_only))
        return tuple(out)

    def hosts_mount(self, pod: Obj, pod_ips: Sequence[str], node_hosts: Path = Path(etchosts.PATH)) -> Mount:
        """kube's makeHostsMount: the pod's hosts file written (again, when it changed: the
        pod's IP arrives with its network) and bound read-write at /etc/hosts."""
        path = self.base.parent / "etc-hosts"
        node = node_hosts.read_text(errors="replace") if etchosts.host_network(pod) else ""
        text = etchosts.content(pod, pod_ips, node).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != text:
            # in place, as kube writes it: the containers already running have this inode bound
            path.write_bytes(text)
            path.chmod(0o644)
        return Mount(str(path), etchosts.PATH, False)

    def resolv_mount(
        self, pod: Obj, cluster: resolv.ClusterDNS | None, node_resolv: Path = Path(resolv.HOST_RESOLV_CONF)
    ) -> Mount:
        """The pod's resolv.conf (resolv.py), written when it changed and bound read-only at
        /etc/resolv.conf (kube's runtimes bind the sandbox's file so)."""
        path = self.base.parent / "resolv.conf"
        try:
            node = node_resolv.read_text(errors="replace")
        except OSError:
            node = ""
        text = resolv.content(pod, cluster, node).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != text:
            path.write_bytes(text)
            path.chmod(0o644)
        return Mount(str(path), resolv.PATH, True)

    def remove(self) -> None:
        """The pod is gone: its volumes go with it, its tmpfs mounts first."""
        tmpfs.remove(self.base.parent)


def _sub_path(vm: Obj, env: Mapping[str, str], here: str) -> tuple[str, str]:
    """(the relative path a mount takes inside its volume, "" for the whole volume; the field it
    came from).  `subPath` is taken as written; `subPathExpr` is expanded with the container's
    environment and then checked as kube's kubelet checks it (makeMounts): an absolute path or
    a `..` element is refused in kube's words, since the expansion is only known now."""
    sub, expression = vm.get("subPath") or "", vm.get("subPathExpr") or ""
    if sub and expression:
        raise VolumeError(f"{here}.subPathExpr: subPathExpr and subPath are mutually exclusive")
    if sub:
        if not isinstance(sub, str):
            raise VolumeError(f"{here}.subPath: must be a string, got {sub!r}")
        return check_path(sub, f"{here}.subPath"), f"{here}.subPath"
    if not expression:
        return "", ""
    field = f"{here}.subPathExpr"
    if not isinstance(expression, str):
        raise VolumeError(f"{field}: must be a string, got {expression!r}")
    try:
        expanded = expand_sub_path(expression, env)
    except EnvError as e:
        raise VolumeError(f"{field}: {e}") from None
    if expanded.startswith("/"):
        raise VolumeError(f"{field}: error SubPath `{expanded}` must not be an absolute path")
    if ".." in expanded.split("/"):
        raise VolumeError(f"{field}: unable to provision SubPath `{expanded}`: must not contain '..'")
    if "\0" in expanded:
        raise VolumeError(f"{field}: unable to provision SubPath {expanded!r}: must not contain a NUL byte")
    normal = posixpath.normpath(expanded)
    return ("" if normal == "." else normal), field


def _inside(volume: Path, sub: str, make: bool, field: str) -> Path:
    """`sub` under the volume's directory (checked with its links resolved), refused when it leads out of the
    volume (a symlink a container left in it must not reach the host's files: kube's
    CVE-2017-1002101).  When it is missing and `make` (an emptyDir), it is made as kube's
    SafeMakeDir makes it: one directory at a time, never through a link, with the volume's own
    mode so that the pod's users may write there."""
    volume_dir = os.path.realpath(volume).rstrip(os.sep)  # a hostPath may be /
    real = os.path.realpath(volume / sub)
    if not real.startswith(volume_dir + os.sep):
        raise VolumeError(f"{field}: {sub!r} leads out of volume {volume.name!r}")
    if os.path.lexists(real):
        return volume / sub
    if not make:
        raise VolumeError(f"{field}: {sub!r} does not exist in volume {volume.name!r}")
    mode = os.stat(volume_dir or os.sep).st_mode & 0o7777
    fd = os.open(volume_dir or os.sep, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in os.path.relpath(real, volume_dir).split(os.sep):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, mode, dir_fd=fd)
            try:  # a link put here since `realpath` looked is not followed
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                raise VolumeError(f"{field}: {sub!r} leads out of volume {volume.name!r}") from None
            os.close(fd)
            fd = inner
            os.fchmod(fd, mode)  # the umask took some of it
    finally:
        os.close(fd)
    return volume / sub


def _mount_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise VolumeError(f"{where}: must be an absolute path, got {value!r}")
    if ".." in value.split("/") or "\0" in value:
        raise VolumeError(f"{where}: must not contain '..', got {value!r}")
    path = "/" + posixpath.normpath(value).lstrip("/")
    if path == "/":
        raise VolumeError(f"{where}: cannot mount over /")
    return path
