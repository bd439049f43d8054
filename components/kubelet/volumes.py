"""The files of a pod's `configMap`, `secret`, `downwardAPI` and `projected` volumes, and how
they are written so that a container never sees a half-updated volume.

`files_of` is pure: the volume's spec and the pod (and the ConfigMaps and Secrets, through
`Sources`) give {relative path: (content, mode)}.  Every key, or only the listed `items`
(each with its own path and mode); `defaultMode` 0644; an optional source that is missing
gives no files, a required one is refused with kube's words.  Paths are checked at the edge:
relative, no `.` or `..` element, nothing empty, no top element starting with `..`.

`write_atomically` writes them as kube's AtomicWriter does: into a fresh timestamped
directory, then one rename of a `..data` symlink switches every file at once; the paths
users see are symlinks through `..data`.  A reader holding a file open keeps the old version.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.kubelet.envvars import EnvError, Sources, field_ref, resource_ref
from machinery.objects import Obj

Files = dict[str, tuple[bytes, int]]
DEFAULT_MODE = 0o644
DATA = "..data"
DEFAULT_TOKEN_SECONDS = 3600


class VolumeError(Exception):
    """The volume cannot be set up (the pod does not start); the message names the field."""


def check_path(path: Any, where: str) -> str:
    """A file path inside a volume: relative, no `..` element, no empty element."""
    if not isinstance(path, str) or not path:
        raise VolumeError(f"{where}: must be a non-empty string")
    if path.startswith("/"):
        raise VolumeError(f"{where}: must be a relative path, got {path!r}")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts) or parts[0].startswith(".."):
        # `..x` at the top is refused too: the writer's own `..data` and stamps live there
        raise VolumeError(f"{where}: must not contain '.', '..' or empty elements, got {path!r}")
    return path


def _mode(value: Any, default: int, where: str) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0o777:
        raise VolumeError(f"{where}: must be an integer from 0 to 0777, got {value!r}")
    return value


def _key_data(obj: Obj, secret: bool) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    data = obj.get("data")
    for k, v in (data if isinstance(data, Mapping) else {}).items():
        if secret:
            try:
                out[str(k)] = base64.b64decode(str(v), validate=True)
            except (binascii.Error, ValueError):
                continue
        else:
            out[str(k)] = str(v).encode()
    if not secret and isinstance(obj.get("binaryData"), Mapping):
        for k, v in obj["binaryData"].items():
            try:
                out[str(k)] = base64.b64decode(str(v), validate=True)
            except (binascii.Error, ValueError):
                continue
    return out


def _keyed(pod: Obj, source: Any, kind: str, sources: Sources, default: int, where: str) -> Files:
    """A configMap or secret source: every key, or its `items`."""
    if not isinstance(source, Mapping):
        raise VolumeError(f"{where}: must be an object")
    secret = kind == "Secret"
    name = str(source.get("secretName" if secret and "secretName" in source else "name") or "")
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    mode = _mode(source.get("defaultMode"), default, f"{where}.defaultMode")
    obj = (sources.secret if secret else sources.config_map)(namespace, name)
    if obj is None:
        if source.get("optional") is True:
            return {}
        raise VolumeError(f'{kind.lower()} "{name}" not found')
    data = _key_data(obj, secret)
    items = source.get("items")
    if items is None:
        return {check_path(k, f"{where}: key {k!r}"): (v, mode) for k, v in data.items()}
    if not isinstance(items, list):
        raise VolumeError(f"{where}.items: must be a list")
    files: Files = {}
    for i, item in enumerate(items):
        here = f"{where}.items[{i}]"
        if not isinstance(item, Mapping):
            raise VolumeError(f"{here}: must be an object")
        key = str(item.get("key") or "")
        if key not in data:
            if source.get("optional") is True:
                continue
            raise VolumeError(f"{here}.key: couldn't find key {key} in {kind} {namespace}/{name}")
        files[check_path(item.get("path"), f"{here}.path")] = (data[key], _mode(item.get("mode"), mode, f"{here}.mode"))
    return files


def _downward(pod: Obj, source: Any, allocatable: Mapping[str, Any], default: int, where: str) -> Files:
    if not isinstance(source, Mapping):
        raise VolumeError(f"{where}: must be an object")
    mode = _mode(source.get("defaultMode"), default, f"{where}.defaultMode")
    items = source.get("items") or []
    if not isinstance(items, list):
        raise VolumeError(f"{where}.items: must be a list")
    containers = {str(c.get("name")): c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)}
    files: Files = {}
    for i, item in enumerate(items):
        here = f"{where}.items[{i}]"
        if not isinstance(item, Mapping):
            raise VolumeError(f"{here}: must be an object")
        path = check_path(item.get("path"), f"{here}.path")
        try:
            if isinstance(item.get("fieldRef"), Mapping):
                field_path = str(item["fieldRef"].get("fieldPath") or "")
                value = _downward_field(pod, field_path, here)
            elif isinstance(item.get("resourceFieldRef"), Mapping):
                ref = item["resourceFieldRef"]
                container = containers.get(str(ref.get("containerName") or ""))
                if container is None:
                    raise VolumeError(
                        f"{here}.resourceFieldRef.containerName: no container {ref.get('containerName')!r}"
                    )
                value = resource_ref(container, ref, here, allocatable)
            else:
                raise VolumeError(f"{here}: needs a fieldRef or a resourceFieldRef")
        except EnvError as e:
            raise VolumeError(str(e)) from None
        files[path] = (value.encode(), _mode(item.get("mode"), mode, f"{here}.mode"))
    return files


def _downward_field(pod: Obj, path: str, where: str) -> str:
    """As env's fieldRef, plus whole label and annotation sets (`key="value"` lines, sorted)."""
    if path in ("metadata.labels", "metadata.annotations"):
        values = (pod.get("metadata") or {}).get(path.split(".")[1]) or {}
        return "\n".join(f"{k}={_go_quote(str(v))}" for k, v in sorted(values.items()))
    return field_ref(pod, path, where)


def _go_quote(text: str) -> str:
    """Go's strconv.Quote for the common case (what kube writes for label values)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def files_of(volume: Mapping[str, Any], pod: Obj, sources: Sources, where: str) -> Files | None:
    """The volume's files, or None for a volume that is a plain directory (emptyDir)."""
    if volume.get("emptyDir") is not None:
        return None
    if volume.get("configMap") is not None:
        return _keyed(pod, volume["configMap"], "ConfigMap", sources, DEFAULT_MODE, f"{where}.configMap")
    if volume.get("secret") is not None:
        return _keyed(pod, volume["secret"], "Secret", sources, DEFAULT_MODE, f"{where}.secret")
    if volume.get("downwardAPI") is not None:
        return _downward(pod, volume["downwardAPI"], sources.allocatable, DEFAULT_MODE, f"{where}.downwardAPI")
    if volume.get("projected") is not None:
        return _projected(pod, volume["projected"], sources, f"{where}.projected")
    raise VolumeError(f"{where}: unsupported volume type (emptyDir, configMap, secret, downwardAPI, projected)")


def _projected(pod: Obj, spec: Any, sources: Sources, where: str) -> Files:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("sources") or [], list):
        raise VolumeError(f"{where}.sources: must be a list")
    mode = _mode(spec.get("defaultMode"), DEFAULT_MODE, f"{where}.defaultMode")
    files: Files = {}
    for i, src in enumerate(spec.get("sources") or []):
        here = f"{where}.sources[{i}]"
        if not isinstance(src, Mapping):
            raise VolumeError(f"{here}: must be an object")
        if src.get("configMap") is not None:
            files.update(_keyed(pod, src["configMap"], "ConfigMap", sources, mode, f"{here}.configMap"))
        elif src.get("secret") is not None:
            files.update(_keyed(pod, src["secret"], "Secret", sources, mode, f"{here}.secret"))
        elif src.get("downwardAPI") is not None:
            files.update(_downward(pod, src["downwardAPI"], sources.allocatable, mode, f"{here}.downwardAPI"))
        elif isinstance(src.get("serviceAccountToken"), Mapping):
            files.update(_token(src["serviceAccountToken"], sources, mode, f"{here}.serviceAccountToken"))
        else:
            raise VolumeError(f"{here}: unsupported projection")
    return files


def _token(spec: Mapping[str, Any], sources: Sources, mode: int, where: str) -> Files:
    """The pod's service account token, which the kubelet asked the apiserver for (tokens.py)."""
    seconds = spec.get("expirationSeconds")
    if not (isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0):
        seconds = DEFAULT_TOKEN_SECONDS
    token = sources.token(str(spec.get("audience") or ""), seconds)
    if not token:
        raise VolumeError(f"{where}: no service account token (the TokenRequest failed)")
    return {check_path(spec.get("path"), f"{where}.path"): (token.encode(), mode)}


def write_atomically(target: Path, files: Files) -> None:
    """Make `target` show exactly `files`, switching from the old set to the new in one rename."""
    target.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + f"{time.monotonic_ns()}"
    fresh = target / stamp
    fresh.mkdir(mode=0o755)
    for rel, (content, mode) in files.items():
        path = fresh / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            os.write(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(path, mode)  # the umask must not narrow what the pod asked for
    data_link = target / DATA
    old = os.readlink(data_link) if data_link.is_symlink() else None
    tmp_link = target / "..data_tmp"
    if tmp_link.is_symlink():
        tmp_link.unlink()
    os.symlink(stamp, tmp_link)
    os.replace(tmp_link, data_link)  # the switch: readers see the old set or the new, never a mix
    wanted = {rel.split("/", 1)[0] for rel in files}
    for entry in os.listdir(target):
        if entry.startswith(".."):
            continue
        if entry not in wanted:
            (target / entry).unlink()  # a file the new set no longer has
    for top in wanted:
        link = target / top
        if not link.is_symlink():
            os.symlink(f"{DATA}/{top}", link)
    if old is not None and old != stamp:
        shutil.rmtree(target / old, ignore_errors=True)
