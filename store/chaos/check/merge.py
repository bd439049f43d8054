"""Merging members' apply logs into one `Applied`: what the cluster really applied, by index.

Every member logs each entry it applies; a restarted member applies some indexes again.
That is normal as long as every copy of an index carries the same term, type, data and
resulting revision: any difference is a safety violation of Raft (or of our apply), kept in
`conflicts` for the applied-agreement check.
"""

from __future__ import annotations

from typing import Any

from store.chaos.check.common import short
from store.chaos.history import Applied, AppliedEntry
from store.server.apply_log import SNAPSHOT_INSTALLED, SNAPSHOT_LOADED


def merge_apply_logs(logs: dict[int, list[list[Any]]]) -> Applied:
    """member id -> its records ([index, term, type, data, revision, at]) -> the merged view."""
    applied = Applied()
    entries = applied.entries
    for member in sorted(logs):
        revisions = applied.revisions_by_member.setdefault(member, [])
        for index, term, entry_type, data, revision, at in logs[member]:
            data = bytes(data or b"")
            revisions.append((at, revision))
            if entry_type in (SNAPSHOT_INSTALLED, SNAPSHOT_LOADED):
                applied.restores.append((member, index, revision, at))
                continue
            seen = entries.get(index)
            if seen is None:
                entries[index] = AppliedEntry(index, term, entry_type, data, revision, at, [member])
                continue
            if (seen.term, seen.entry_type, seen.data, seen.revision) != (term, entry_type, data, revision):
                applied.conflicts.append(
                    f"index {index}: members {seen.members} applied term {seen.term} type {seen.entry_type} "
                    f"data {short(seen.data, 60)} -> revision {seen.revision} (at {seen.at:.3f}), but member "
                    f"{member} applied term {term} type {entry_type} data {short(data, 60)} -> revision "
                    f"{revision} (at {at:.3f})"
                )
            seen.at = min(seen.at, at)
            if member not in seen.members:
                seen.members.append(member)
    applied.entries = dict(sorted(entries.items()))
    return applied
