"""A `hostPath` volume: a file or directory of the node itself, checked (and made, for the
`...OrCreate` types) as kube's hostPath plugin does at SetUp (pkg/volume/hostpath).

The path must be absolute with no `..` element.  The type decides what the path must be:
unset checks nothing (a missing path is made a directory, as containerd makes a missing bind
source), `DirectoryOrCreate` makes a missing directory (0755, with its parents), `FileOrCreate`
a missing empty file (0644, its parent must exist), and `Directory`, `File`, `Socket`,
`CharDevice`, `BlockDevice` must already be that; a failure is kube's "hostPath type check
failed" sentence.  Symlinks are followed, as kube's stat does.  Whether a pod may use the
node's files at all is PodSecurity's call at the apiserver, not the kubelet's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any

from components.kubelet.volumes import VolumeError

_KINDS = {
    "Directory": (stat.S_ISDIR, "a directory"),
    "File": (stat.S_ISREG, "a file"),
    "Socket": (stat.S_ISSOCK, "a socket file"),
    "CharDevice": (stat.S_ISCHR, "a character device"),
    "BlockDevice": (stat.S_ISBLK, "a block device"),
}
_CREATES = {"DirectoryOrCreate": "Directory", "FileOrCreate": "File"}


def path_of(source: Any, where: str) -> str:
    """The volume's host path, refused when it is not absolute or steps back."""
    path = source.get("path") if isinstance(source, Mapping) else None
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise VolumeError(f"{where}.path: must be an absolute path, got {path!r}")
    if ".." in path.split("/"):
        raise VolumeError(f"invalid HostPath `{path}`: must not contain '..'")
    return path


def set_up(source: Any, where: str) -> str:
    """kube's hostPathMounter.SetUp: the path checked against its type, made when the type
    says so; the path.  VolumeError in kube's words when it is not what the type asks."""
    path = path_of(source, where)
    kind = source.get("type") or ""
    if kind == "":
        if not os.path.exists(path):
            os.makedirs(path, mode=0o755, exist_ok=True)
        return path
    if not isinstance(kind, str) or (kind not in _KINDS and kind not in _CREATES):
        raise VolumeError(f"{kind} is an invalid volume type")
    if kind in _CREATES and not os.path.exists(path):
        if kind == "DirectoryOrCreate":
            os.makedirs(path, mode=0o755, exist_ok=True)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    is_kind, what = _KINDS[_CREATES.get(kind, kind)]
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if not is_kind(mode):
        raise VolumeError(f"hostPath type check failed: {path} is not {what}")
    return path
