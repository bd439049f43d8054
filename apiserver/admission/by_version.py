"""What a plugin derives from a stored object, kept per version of that object.

Every pod create in a namespace reads the same few LimitRanges, ResourceQuotas and the
namespace's labels; parsing them once per resourceVersion instead of once per create is what
keeps these plugins cheap.  A new version (the object changed) is derived again at once; an
object without a resourceVersion (not stored yet) is derived every time and never kept.  The
oldest versions are dropped first, so memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")
KEPT = 4096


class ByVersion(Generic[T]):
    def __init__(self, derive: Callable[[Mapping[str, Any]], T], keep: int = KEPT) -> None:
        self._derive = derive
        self._keep = keep
        self._kept: dict[tuple[str, str, str], T] = {}

    def __call__(self, obj: Mapping[str, Any]) -> T:
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(version, str) or not version:
            return self._derive(obj)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")), version)
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = self._derive(obj)
            if len(self._kept) > self._keep:
                del self._kept[next(iter(self._kept))]
        return found
