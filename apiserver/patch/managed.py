"""`metadata.managedFields`: decoding entries into field sets per manager, and back.

A manager is identified as kube does: appliers by (name, "Apply", subresource) whatever the
apiVersion they applied with; updaters by (name, "Update", apiVersion, subresource).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apiserver.patch import fieldpath
from apiserver.patch.errors import PatchError
from apiserver.patch.fieldpath import Path

APPLY = "Apply"
UPDATE = "Update"

MAX_UPDATE_MANAGERS = 10
"""kube merges the oldest update entries beyond this many into `ancient-changes`."""

# Fields no manager ever owns (kube's stripMetaManager).
NEVER_OWNED: frozenset[Path] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", "f:" + name)
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)


@dataclass(frozen=True, order=True)
class ManagerKey:
    manager: str
    operation: str
    api_version: str  # "" for appliers
    subresource: str = ""

    def describe(self) -> str:
        """How kube names a manager in a conflict message."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


@dataclass
class Entry:
    """What one manager owns, at which apiVersion, since when."""

    fields: set[Path]
    api_version: str
    time: str | None


Managers = dict[ManagerKey, Entry]


def key_for(manager: str, operation: str, api_version: str, subresource: str = "") -> ManagerKey:
    return ManagerKey(manager, operation, "" if operation == APPLY else api_version, subresource)


def decode_entries(entries: Any) -> Managers:
    """Managers from a `managedFields` list; PatchError naming the bad entry."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise PatchError("metadata.managedFields must be a list")
    out: Managers = {}
    for i, entry in enumerate(entries):
        where = f"metadata.managedFields[{i}]"
        if not isinstance(entry, dict):
            raise PatchError(f"{where} must be an object")
        if not entry.get("fieldsV1"):
            continue  # owns nothing: how clients reset managedFields (`[{}]`)
        manager, operation = entry.get("manager", ""), entry.get("operation", "")
        api_version, subresource = entry.get("apiVersion", ""), entry.get("subresource", "")
        time = entry.get("time")
        if not all(isinstance(v, str) for v in (manager, operation, api_version, subresource)):
            raise PatchError(f"{where}: manager, operation, apiVersion and subresource must be strings")
        if operation not in (APPLY, UPDATE):
            raise PatchError(f"{where}.operation must be Apply or Update, not {operation!r}")
        if time is not None and not isinstance(time, str):
            raise PatchError(f"{where}.time must be a string")
        if entry.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise PatchError(f"{where}.fieldsType must be FieldsV1")
        fields = fieldpath.decode(entry.get("fieldsV1") or {}, f"{where}.fieldsV1")
        key = key_for(manager, operation, api_version, subresource)
        if key in out:
            out[key].fields |= fields
        else:
            out[key] = Entry(fields, api_version, time)
    return out


def encode_entries(managers: Managers) -> list[dict[str, Any]]:
    """The `managedFields` list, in kube's order (appliers first, then by time and name)."""
    rows = []
    for key, entry in managers.items():
        if not entry.fields:
            continue
        row: dict[str, Any] = {"manager": key.manager, "operation": key.operation, "apiVersion": entry.api_version}
        if entry.time is not None:
            row["time"] = entry.time
        row["fieldsType"] = "FieldsV1"
        row["fieldsV1"] = fieldpath.encode(entry.fields)
        if key.subresource:
            row["subresource"] = key.subresource
        rows.append(row)
    rows.sort(
        key=lambda r: (r["operation"], r.get("time", ""), r["manager"], r["apiVersion"], r.get("subresource", ""))
    )
    return rows


def cap_update_managers(managers: Managers) -> None:
    """Fold the oldest update entries into one `ancient-changes` entry per apiVersion."""
    updaters = [k for k in managers if k.operation == UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda k: (managers[k].time or "", k))
    for key in updaters:
        entry = managers[key]
        bucket = key_for("ancient-changes", UPDATE, entry.api_version)
        if bucket == key:
            continue
        del managers[key]
        if bucket in managers:
            managers[bucket].fields |= entry.fields
            managers[bucket].time = max(managers[bucket].time or "", entry.time or "") or None
        else:
            managers[bucket] = Entry(set(entry.fields), entry.api_version, entry.time)
        if sum(1 for k in managers if k.operation == UPDATE) <= MAX_UPDATE_MANAGERS:
            return
