"""A container's own /tmp, as its image's filesystem would give it.

In a real node each container runs on a root filesystem of its own, so what one container
writes to /tmp no other container sees, not even its pod's others, and a restarted container
starts with an empty /tmp.  Our containers are processes on the node's filesystem, so without
this they all shared the node's /tmp: a pod deleting /tmp/health removed another pod's
(conformance's exec-probe specs run side by side and each writes /tmp/health).

Each run of a container gets an empty directory, mode 1777 as /tmp is (the container may run
as any user), bound at /tmp first in its mount namespace, so volumes mounted under /tmp appear
inside it.  The directories live in the pod's directory, `<pod>/tmp/<container>/<attempt>`,
and go with the pod; a container's directories older than its previous run are removed when
a new one starts, as the runtime removes an old container's writable layer.

A container with readOnlyRootFilesystem gets none: its /tmp is read-only, as in kube, unless
a volume is mounted there.  Files a container should share with the node go through a
hostPath volume, as in kube.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from components.kubelet.sandbox import Mount

TARGET = "/tmp"


def path_of(pod_dir: Path, container: str, attempt: int) -> Path:
    return pod_dir / "tmp" / container / str(attempt)


def mount_for(pod_dir: Path, container: str, attempt: int) -> Mount:
    """The mount of run `attempt`'s empty /tmp, its directory made now (and its container's
    directories older than the previous run removed)."""
    path = fresh_run_dir(path_of(pod_dir, container, attempt))
    path.chmod(0o1777)
    return Mount(str(path), TARGET, False)


def fresh_run_dir(path: Path) -> Path:
    """`path` (`.../<container>/<attempt>`) made empty, and its container's directories older
    than the previous run removed: a run's writable layer lives one run past its end, for its
    logs' and termination message's sake, as the runtime keeps an exited container."""
    attempt = int(path.name)
    for old in path.parent.iterdir() if path.parent.is_dir() else ():
        if old.name.isdigit() and int(old.name) < attempt - 1:
            shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)  # a run that never started may have left it
    path.mkdir(parents=True)
    return path
