"""Duplicate keys in a JSON body, named as kube's strict decoder names them (`duplicate field
"spec.replicas"`), for `fieldValidation=Strict`.

orjson keeps the last of two equal keys, as Go's decoder does, so what is stored is what kube
stores; only naming them needs a second parse, by the standard library with a hook that notes
each object's repeated keys.  It runs only when the client asked for Strict (kube also warns about
them under the default Warn; a second parse of every body would double the decode's cost, so we
do not), on a body the size limits have already bounded.
"""

from __future__ import annotations

import json
from typing import Any

from apiserver.pruning import MAX_REPORTED


class _Object(dict[str, Any]):
    """A decoded JSON object that remembers which of its keys came more than once."""

    __slots__ = ("repeated",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.repeated: list[str] = []
        for key, value in pairs:
            if key in self and key not in self.repeated:
                self.repeated.append(key)
            self[key] = value


def duplicate_paths(body: bytes) -> list[str]:
    """The paths of repeated keys in document order (at most MAX_REPORTED); [] when the body is
    not JSON that the standard library reads (the main decoder has judged it already)."""
    try:
        tree = json.loads(body, object_pairs_hook=_Object)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", tree)]
    while stack and len(found) < MAX_REPORTED:
        path, node = stack.pop()
        if isinstance(node, _Object):
            found.extend(f"{path}.{k}" if path else k for k in node.repeated)
            stack.extend(reversed([(f"{path}.{k}" if path else k, v) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(node)]))
    return found[:MAX_REPORTED]


def duplicate_field_texts(paths: list[str]) -> list[str]:
    return [f'duplicate field "{p}"' for p in paths]
