"""member-hashes: at the end of a run every member holds the same KV state.

Members report (hash, revision, compact revision); a hash only compares at one revision, so
different revisions are reported too (the run should have let members converge first).
"""

from __future__ import annotations

from store.chaos.history import Violation

CHECK = "member-hashes"


def check_hashes(final_hashes: dict[int, tuple[int, int, int]]) -> list[Violation]:
    if len(final_hashes) < 2:
        return []
    members = sorted(final_hashes)
    ref = members[0]
    h0, rev0, comp0 = final_hashes[ref]
    out = []
    for m in members[1:]:
        h, rev, comp = final_hashes[m]
        if rev != rev0:
            out.append(Violation(CHECK, f"member {ref} hashed revision {rev0}, member {m} revision {rev}"))
        elif (h, comp) != (h0, comp0):
            out.append(
                Violation(
                    CHECK,
                    f"at revision {rev}: member {ref} hash {h0:#010x} (compact {comp0}), "
                    f"member {m} hash {h:#010x} (compact {comp})",
                )
            )
    return out
