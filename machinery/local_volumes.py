"""The built-in local volumes: what the persistentvolume controller and the kubelets agree on.

A kubelet that keeps files announces, on its Node, the directory it keeps local volumes in;
the controller makes a claim's volume a hostPath under the directory of the node it chose
(`raftkube.io/local-path`, the provisioner of the default StorageClass `standard`).

A deleted volume's directory is removed by its node, told through the Node: before deleting a
Released volume (reclaim policy Delete) the controller adds its name to the node's
`raftkube.io/released-local-volumes` annotation (a JSON list); the kubelet removes those
directories under its local-volume directory and clears the annotation.  The Node carries the
message because a kubelet may read its own Node but not, by kube's Node authorizer, a volume
no pod of its uses (and a deleted one not at all).
"""

from __future__ import annotations

import json
import re
from typing import Any

PROVISIONER = "raftkube.io/local-path"
VOLUME_DIR_ANNOTATION = "raftkube.io/local-volume-dir"
RELEASED_ANNOTATION = "raftkube.io/released-local-volumes"
VOLUME_DIR_NAME = "local-volumes"  # under the kubelet's root dir
# what the provisioner names a volume (`pvc-<claim uid>`): the only names a kubelet removes
VOLUME_NAME = re.compile(r"pvc-[a-z0-9][a-z0-9-]{0,62}")
MAX_RELEASED = 1000  # names one annotation carries; more wait for the node to catch up


def released(annotations: Any) -> list[str]:
    """The volume names an annotation value lists, only well-formed ones (it is user-writable)."""
    raw = annotations.get(RELEASED_ANNOTATION) if isinstance(annotations, dict) else None
    try:
        names = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names[:MAX_RELEASED] if isinstance(n, str) and VOLUME_NAME.fullmatch(n)]
