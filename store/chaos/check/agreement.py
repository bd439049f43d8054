"""applied-agreement: members applied the same entries, and nothing is missing from the evidence.

Every other check reads the replay of the merged apply logs, so this one guards their
premise: one entry per index (no conflicting copies), no index that no member logged (an
evidence gap: the replay would silently skip a write), and revisions members computed equal
to what the replay computes from the same data.
"""

from __future__ import annotations

from store.chaos.check.common import short
from store.chaos.check.replay import Replay
from store.chaos.history import Applied, Violation

CHECK = "applied-agreement"


def check_agreement(applied: Applied, replay: Replay) -> list[Violation]:
    out = [Violation(CHECK, f"conflicting applies: {c}") for c in applied.conflicts]
    out.extend(_gaps(applied))
    for entry, replayed in replay.revision_mismatches:
        out.append(
            Violation(
                CHECK,
                f"index {entry.index} (term {entry.term}, applied at {entry.at:.3f} by members {entry.members}): "
                f"members logged revision {entry.revision} after it, the replay computes {replayed}",
                at=entry.at,
            )
        )
    for entry in replay.unreadable:
        out.append(
            Violation(CHECK, f"index {entry.index}: entry data cannot be decoded: {short(entry.data, 60)}", at=entry.at)
        )
    return out


def _gaps(applied: Applied) -> list[Violation]:
    """Runs of indexes in 2..max that no member logged."""
    if not applied.entries:
        return []
    out: list[Violation] = []
    last = max(applied.entries)
    start = None
    for index in range(2, last + 2):
        missing = index <= last and index not in applied.entries
        if missing and start is None:
            start = index
        elif not missing and start is not None:
            span = f"index {start}" if start == index - 1 else f"indexes {start}..{index - 1}"
            out.append(
                Violation(
                    CHECK,
                    f"evidence gap: no member logged {span} (of 2..{last}); the replay cannot check what they did",
                )
            )
            start = None
    return out
