"""A pod's volumes on the node, and the mounts its containers ask for.

Each volume is a directory under the kubelet's root, `pods/<uid>/volumes/<name>`: an emptyDir
is an empty directory that lives as long as the pod (a medium of Memory is a directory too);
configMap, secret, downwardAPI and projected volumes hold their files (`volumes.files_of`),
written atomically and written again whenever their sources change, as kube's kubelet
refreshes them, so a running container sees a ConfigMap update.  `mounts` turns a container's
`volumeMounts` into sandbox mounts: the volume (or its `subPath`) at `mountPath`, read-only
when asked, and always for the volumes kube mounts read-only (all but emptyDir).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

from components.kubelet.envvars import Sources
from components.kubelet.sandbox import Mount
from components.kubelet.volumes import Files, VolumeError, check_path, files_of, write_atomically
from machinery.objects import Obj

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS label, as the apiserver checks it


class PodVolumes:
    def __init__(self, base: Path) -> None:
        self.base = base  # pods/<uid>/volumes
        self._written: dict[str, Files | None] = {}  # what each volume was last made of

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
            files = files_of(volume, pod, sources, f"spec.volumes[{i}]")
            if name in self._written and self._written[name] == files:
                continue
            target = self.base / name
            if files is None:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(0o777)  # kube's emptyDir: any user of the pod may write
            else:
                write_atomically(target, files)
            self._written[name] = files

    def mounts(self, pod: Obj, container: Obj, where: str) -> tuple[Mount, ...]:
        """The container's volumeMounts as mounts; VolumeError names the field at fault."""
        volumes = self._volumes(pod)
        out: list[Mount] = []
        for j, vm in enumerate(container.get("volumeMounts") or ()):
            here = f"{where}.volumeMounts[{j}]"
            if not isinstance(vm, dict):
                raise VolumeError(f"{here}: must be an object")
            name = vm.get("name")
            if not isinstance(name, str) or name not in volumes:
                raise VolumeError(f"{here}.name: no volume {name!r} in spec.volumes")
            source = self.base / str(name)
            sub = vm.get("subPath") or ""
            if sub:
                if not isinstance(sub, str):
                    raise VolumeError(f"{here}.subPath: must be a string, got {sub!r}")
                source = source / check_path(sub, f"{here}.subPath")
                volume_dir = os.path.realpath(self.base / name)
                if not os.path.realpath(source).startswith(volume_dir + os.sep):
                    # a symlink a container left in its volume must not reach the host's files
                    raise VolumeError(f"{here}.subPath: {sub!r} leads out of volume {name!r}")
                if volumes[name][1].get("emptyDir") is not None:
                    source.mkdir(parents=True, exist_ok=True)  # kube makes a missing subPath dir
                elif not source.exists():
                    raise VolumeError(f"{here}.subPath: {sub!r} does not exist in volume {name!r}")
            target = _mount_path(vm.get("mountPath"), f"{here}.mountPath")
            read_only = vm.get("readOnly") is True or volumes[name][1].get("emptyDir") is None
            out.append(Mount(str(source), target, read_only))
        return tuple(out)

    def remove(self) -> None:
        """The pod is gone: its volumes go with it."""
        shutil.rmtree(self.base.parent, ignore_errors=True)


def _mount_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise VolumeError(f"{where}: must be an absolute path, got {value!r}")
    if ".." in value.split("/") or "\0" in value:
        raise VolumeError(f"{where}: must not contain '..', got {value!r}")
    path = "/" + posixpath.normpath(value).lstrip("/")
    if path == "/":
        raise VolumeError(f"{where}: cannot mount over /")
    return path
