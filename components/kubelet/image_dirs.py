"""A container's writable copy of the image directories it changes.

An image's files belong to each container's own writable layer: the httpd image's
container may move its web root's index.html away (conformance's StatefulSet specs do, to
make a pod unready) and back, and no other container sees it.  Our containers are processes
on the node's filesystem, so the image table names the few such files an image has
(`ImageEntry.writable`, with their text) and each run of a container gets its own copy of
their directories, bound at their paths in its mount namespace, under the container's
volumes (a volume mounted there lies over it, as over an image's directory).

The copies live in the pod's directory, `<pod>/image/<container>/<attempt>/<n>`, and go with
the pod; older runs' are removed as container_tmp removes old /tmp directories.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from components.kubelet.container_tmp import fresh_run_dir
from components.kubelet.sandbox import Mount


def mounts_for(
    pod_dir: Path, container: str, attempt: int, files: tuple[tuple[str, str], ...], *, read_only: bool = False
) -> tuple[Mount, ...]:
    """Run `attempt`'s writable directories holding `files` ((path in the image, text); a path
    ending in `/` names an empty directory), made and filled now, one mount per directory, in
    the order the files name them (`read_only`: bound read-only, for readOnlyRootFilesystem)."""
    if not files:
        return ()
    run_dir = fresh_run_dir(pod_dir / "image" / container / str(attempt))
    folders: dict[str, Path] = {}
    for path, text in files:
        directory = posixpath.dirname(path)  # `/var/lib/etcd/`: the directory itself, empty
        if directory not in folders:
            folders[directory] = run_dir / str(len(folders))
            folders[directory].mkdir()
        if not path.endswith("/"):
            (folders[directory] / posixpath.basename(path)).write_text(text)
    return tuple(Mount(str(host), directory, read_only) for directory, host in folders.items())
