"""Removing the directories of this node's deleted local volumes (the handshake is described in
`machinery/local_volumes`): the names the controller listed on the Node are removed under the
node's local-volume directory, and the list is cleared but for what could not be removed.

Only names the provisioner could have made are touched (the annotation is writable by anyone
who may patch Nodes), each only as a direct child of the volume directory; a symlink there is
unlinked, never followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
from pathlib import Path

from components.client.rest import ConflictError, RestClient
from machinery import local_volumes
from machinery.objects import metadata

log = logging.getLogger("raftkube.kubelet")


def remove(directory: Path, name: str) -> bool:
    """`directory/name` gone (True also when it was not there); False when it could not be."""
    if not local_volumes.VOLUME_NAME.fullmatch(name):
        return True  # nothing of ours: never touched
    path = directory / name
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    except FileNotFoundError:
        return True
    except OSError as err:
        log.warning("removing the released local volume %s failed: %s", path, err)
        return False
    return True


async def remove_released_once(client: RestClient, node_name: str, directory: Path) -> list[str]:
    """One pass: the listed directories removed, the list cleared (at the Node's version read, so
    a name the controller adds meanwhile is kept for the next pass).  Returns the names removed."""
    node = await client.get(f"/api/v1/nodes/{node_name}")
    annotations = metadata(node).get("annotations") or {}
    if local_volumes.RELEASED_ANNOTATION not in annotations:
        return []
    names = local_volumes.released(annotations)
    outcome = [(name, await asyncio.to_thread(remove, directory, name)) for name in names]
    kept = [name for name, removed in outcome if not removed]
    value = json.dumps(kept) if kept else None
    patch = {
        "metadata": {
            "resourceVersion": metadata(node).get("resourceVersion"),
            "annotations": {local_volumes.RELEASED_ANNOTATION: value},
        }
    }
    # on a conflict the controller added a name: the next pass sees both (removing again is harmless)
    with contextlib.suppress(ConflictError):
        await client.patch(f"/api/v1/nodes/{node_name}", patch)
    return [name for name, removed in outcome if removed]
