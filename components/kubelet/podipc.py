"""A pod's own IPC namespace, shared by its containers and by nobody else, as kube gives every
pod that does not ask for `hostIPC` (the pause container holds it there).

Its System V shared memory, semaphores and message queues are the pod's, and so are the IPC
sysctls a pod may set (`kernel.shm_rmid_forced`, sandbox.py writes them), which would otherwise
change the node's.  The namespace is a file: util-linux's `unshare --ipc=FILE` bind-mounts the
new namespace there, the shim of each container joins it with setns (sandbox.py), and it stays
while no process is in it.  The file lives in the pod's directory (`<root>/pods/<uid>/ipc`),
so it goes where the pod's tmpfs volumes go: every mount under that directory is taken off
before the directory is removed (tmpfs.remove and unmount_under, at the pod's removal, for an
orphan and at `raftkube down`).  A kubelet restarted finds the file mounted and keeps it.
Making one needs root; a kubelet that is not root leaves its pods in its own IPC namespace.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

UNSHARE_TIMEOUT_S = 10.0
FILE_NAME = "ipc"


class PodIpcError(Exception):
    """The pod's IPC namespace could not be made; the message says why."""


def path_of(pod_dir: Path) -> Path:
    return pod_dir / FILE_NAME


def is_namespace(path: Path) -> bool:
    """Whether `path` has a namespace mounted on it (made before this kubelet started)."""
    return os.path.ismount(path)


def ensure(pod_dir: Path) -> str:
    """The pod's IPC namespace file, made when it is not there yet."""
    path = path_of(pod_dir)
    if is_namespace(path):
        return str(path)
    pod_dir.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)  # unshare binds over a file that exists
    try:
        done = subprocess.run(
            ["unshare", f"--ipc={path}", "true"],
            capture_output=True,
            timeout=UNSHARE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise PodIpcError(f"unshare --ipc: {e}") from None
    if done.returncode != 0:
        words = done.stderr.decode(errors="replace").strip()[-500:]
        raise PodIpcError(f"unshare --ipc exited {done.returncode}: {words}")
    return str(path)


def usable() -> bool:
    """Whether this kubelet can give pods an IPC namespace (it is root)."""
    return os.geteuid() == 0
