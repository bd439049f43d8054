"""A memory-backed emptyDir (`emptyDir.medium: Memory`): a tmpfs the kubelet mounts on the node
at the volume's directory, as kube's emptyDir plugin does (setupTmpfs), so that what the pod
writes there is memory, statfs reports tmpfs inside the container, and it goes with the pod.

The size is kube 1.33's (SizeMemoryBackedVolumes, calculateEmptyDirMemorySize): the node's
allocatable memory, lowered to the pod's memory limit when every container sets one (what the
pod's cgroup would be held to), lowered to the volume's `sizeLimit` when that is smaller still.
A `sizeLimit` above what the pod may use is no error, it is just not the size; one that is not
a quantity or is negative is refused naming the field, as kube's validation refuses it.  With
no allocatable known yet, the node's physical memory stands in for it.  The mode is tmpfs's own
1777, which kube keeps too (it passes only `size=`): permission bits 0777, so any user of the
pod may write, with the sticky bit of /tmp.

Setting up is idempotent: a volume directory that is a mount point already is left as it is (a
container restart, a kubelet restart: no second mount over the first).  `unmount_under` takes
every mount below a directory off before that directory is removed: an rmtree over a live tmpfs
would empty it and leave the mount, and its memory, behind.  Mounting needs root; podvolumes.py
keeps a plain directory for a kubelet that is not root.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.kubelet import linux
from components.kubelet.volumes import VolumeError
from machinery.objects import Obj
from machinery.podresources import pod_limits
from machinery.quantity import Quantity, QuantityError, parse_quantity

log = logging.getLogger(__name__)

MEMORY = "Memory"
MEDIA = ("", MEMORY)  # HugePages is not served: no hugetlbfs pages are set aside on our nodes
MOUNTINFO = Path("/proc/self/mountinfo")
TMPFS_MAGIC = 0x01021994  # statfs f_type of a tmpfs (what agnhost's mounttest checks)
MODE = 0o1777


def medium_of(empty_dir: Any, where: str) -> str:
    """The emptyDir's medium ("" or "Memory"); VolumeError for any other (kube's "unknown
    storage medium", or HugePages, which this kubelet does not set up)."""
    if not isinstance(empty_dir, Mapping):
        raise VolumeError(f"{where}: must be an object")
    medium = empty_dir.get("medium") or ""
    if medium not in MEDIA:
        raise VolumeError(f'{where}.medium: unsupported value {medium!r}: supported values: "", "{MEMORY}"')
    return str(medium)


def size_of(empty_dir: Mapping[str, Any], pod: Obj, allocatable: Mapping[str, Any], where: str) -> int:
    """The tmpfs's size in bytes (kube's rule, above); VolumeError naming `sizeLimit` when it is
    not a quantity or is negative."""
    size = _bytes(allocatable.get("memory")) or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    spec = pod.get("spec") or {}
    containers = [c for field in ("containers", "initContainers") for c in spec.get(field) or () if isinstance(c, dict)]
    if containers and all(_bytes(((c.get("resources") or {}).get("limits") or {}).get("memory")) for c in containers):
        size = min(size, _bytes(pod_limits(spec).get("memory")) or size)
    raw = empty_dir.get("sizeLimit")
    if raw is None:
        return size
    try:
        limit = parse_quantity(raw)
    except QuantityError as e:
        raise VolumeError(f"{where}.sizeLimit: {e}") from None
    if limit.nanos < 0:
        raise VolumeError(f"{where}.sizeLimit: must be greater than or equal to 0, got {raw!r}")
    return min(size, _bytes(limit) or size)  # 0 is no limit, as kube reads it


def _bytes(value: Quantity | Any) -> int:
    """A memory quantity in whole bytes (rounded up, as kube's Value()); 0 when absent or unreadable."""
    if not isinstance(value, Quantity):
        try:
            value = parse_quantity(value)
        except (QuantityError, TypeError):
            return 0
    return max(0, math.ceil(value.value))


def set_up(path: Path, size: int) -> None:
    """`path` a tmpfs of `size` bytes, unless it is a mount point already."""
    path.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(path):
        return
    linux.mount("tmpfs", str(path), "tmpfs", 0, f"mode={MODE:o},size={size}")


def mount_points_under(directory: Path, mountinfo: str) -> list[str]:
    """The mount points strictly below `directory` in `/proc/self/mountinfo` text, deepest
    first (the order they can come off in); one mounted twice over is there twice."""
    top = os.path.realpath(directory).rstrip(os.sep) + os.sep
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4:
            # mountinfo writes space, tab, newline and backslash as octal escapes
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point.startswith(top):
                points.append(point)
    return sorted(points, key=lambda p: (-p.count(os.sep), p))


def unmount_under(directory: Path, mountinfo: Path = MOUNTINFO) -> None:
    """Take every mount below `directory` off (detached: a process still inside does not keep
    it from going), so that removing the directory removes files, not a live mount's contents."""
    try:
        text = mountinfo.read_text()
    except OSError:
        return
    for point in mount_points_under(directory, text):
        try:
            linux.umount2(point, linux.MNT_DETACH)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOENT):  # gone already
                log.warning("%s stays mounted: %s", point, e)


def remove(directory: Path) -> None:
    """Remove a pod's directory, the tmpfs mounts in it first."""
    unmount_under(directory)
    shutil.rmtree(directory, ignore_errors=True)
