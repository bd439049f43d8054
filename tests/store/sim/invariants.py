"""Safety invariants of Raft, checked incrementally as the simulation runs.

Each check is cheap enough to run on every event, so a violation is reported at the step
that caused it, not at the end of the run:

* election safety: at most one leader per term;
* log matching: an entry is identified by (index, term) — every copy of it carries the same
  data and follows the same (index-1, term) entry, so by induction equal entries mean equal
  prefixes (checked on every persisted append);
* leader completeness: a new leader holds every entry committed so far;
* state machine safety: every node applies the same entry at each index;
* commit index, and persisted term and vote, never go back (across restarts, too);
* the Ready contract: a vote or an append acknowledgement leaves the node only after the
  state it promises is on disk;
* linearizable reads: a read index covers every write acknowledged before the read began;
* exactly once: an acknowledged proposal is applied once, on every node (checked at the end).
"""

from __future__ import annotations

from store.raft.types import NONE, Entry, EntryType, HardState, Message, MessageType


class InvariantViolation(AssertionError):
    """A safety property was broken; the message names the property and the evidence."""


class Checker:
    def __init__(self) -> None:
        self.leader_of_term: dict[int, int] = {}
        # (index, term) -> (data, term of the preceding entry in the log)
        self.entry_ids: dict[tuple[int, int], tuple[bytes, int]] = {}
        # index -> the entry applied there (by anyone)
        self.applied_at: dict[int, Entry] = {}
        self.max_applied = 0
        self.base_index = 0
        """Entries up to here came with the bootstrap snapshot, not from the log."""
        self.live_commit: dict[tuple[int, int], int] = {}  # (node, incarnation) -> commit

    @staticmethod
    def fail(prop: str, detail: str) -> None:
        raise InvariantViolation(f"{prop}: {detail}")

    # ---- election safety and leader completeness
    def on_leader(self, node: int, term: int, log_terms: dict[int, int], first_index: int, snap_index: int) -> None:
        prev = self.leader_of_term.setdefault(term, node)
        if prev != node:
            self.fail("election safety", f"nodes {prev} and {node} both leader in term {term}")
        for i in range(max(snap_index, self.base_index) + 1, self.max_applied + 1):
            t = self.applied_at[i].term
            if log_terms.get(i) != t:
                self.fail(
                    "leader completeness",
                    f"leader {node} of term {term} lacks committed entry {t}/{i} (has term {log_terms.get(i)})",
                )

    # ---- log matching (persisted appends)
    def on_persist_entries(self, node: int, entries: list[Entry], prev_term: int | None) -> None:
        """`prev_term` is the term the node's log holds just before entries[0] (None if compacted)."""
        for e in entries:
            key = (e.index, e.term)
            known = self.entry_ids.get(key)
            if known is None:
                if prev_term is not None:
                    self.entry_ids[key] = (e.data, prev_term)
            else:
                data, expected_prev = known
                if data != e.data:
                    self.fail("log matching", f"node {node}: entry {e.term}/{e.index} carries other data")
                if prev_term is not None and prev_term != expected_prev:
                    self.fail(
                        "log matching",
                        f"node {node}: entry {e.term}/{e.index} follows term {prev_term}, elsewhere {expected_prev}",
                    )
            prev_term = e.term

    # ---- durable state never goes back
    def on_persist_hard_state(self, node: int, old: HardState, new: HardState) -> None:
        if new.term < old.term:
            self.fail("durable term", f"node {node}: persisted term went back {old.term} -> {new.term}")
        if new.term == old.term and old.vote != NONE and new.vote != old.vote:
            self.fail("durable vote", f"node {node}: changed its vote in term {new.term} from {old.vote} to {new.vote}")
        if new.commit < old.commit:
            self.fail("durable commit", f"node {node}: persisted commit went back {old.commit} -> {new.commit}")

    def on_commit_index(self, node: int, incarnation: int, commit: int) -> None:
        key = (node, incarnation)
        prev = self.live_commit.get(key, 0)
        if commit < prev:
            self.fail("commit index", f"node {node}: commit went back {prev} -> {commit}")
        self.live_commit[key] = commit

    # ---- the Ready contract
    def on_send(self, node: int, m: Message, durable: HardState, durable_last: int) -> None:
        if m.type == MessageType.VOTE_RESP and not m.reject:
            if durable.term < m.term or (durable.term == m.term and durable.vote != m.to):
                self.fail(
                    "persist before send",
                    f"node {node} granted its vote to {m.to} in term {m.term} before persisting it ({durable})",
                )
        elif m.type == MessageType.APP_RESP and not m.reject:
            if m.index > durable_last:
                self.fail(
                    "persist before send",
                    f"node {node} acknowledged entries up to {m.index} with only {durable_last} on disk",
                )

    # ---- state machine safety
    def on_apply(self, node: int, e: Entry) -> None:
        known = self.applied_at.get(e.index)
        if known is None:
            if e.index != self.max_applied + 1:
                self.fail("state machine safety", f"node {node} applied {e.index} before anyone applied {e.index - 1}")
            self.applied_at[e.index] = e
            self.max_applied = e.index
        elif (known.term, known.type, known.data) != (e.term, e.type, e.data):
            self.fail(
                "state machine safety",
                f"node {node} applied {e.term}/{e.index} {e.data!r}, another node applied {known.term}/{e.index} "
                f"{known.data!r}",
            )

    def expected_state(self, index: int) -> list[bytes]:
        """The state machine every node must have after applying up to `index`."""
        return [
            self.applied_at[i].data for i in range(self.base_index + 1, index + 1) if is_proposal(self.applied_at[i])
        ]

    def on_bootstrap(self, index: int) -> None:
        self.base_index = self.max_applied = index

    def on_install_snapshot(self, node: int, index: int, state: list[bytes]) -> None:
        if index > self.max_applied:
            self.fail("state machine safety", f"node {node} installed a snapshot at {index}, beyond any applied entry")
        expected = self.expected_state(index)
        if state != expected:
            self.fail("state machine safety", f"node {node} installed a snapshot at {index} with different content")

    # ---- reads
    def on_read(self, node: int, read_index: int, acked_before: int) -> None:
        if read_index < acked_before:
            self.fail(
                "linearizable read",
                f"node {node} got read index {read_index}, but a write at {acked_before} was acknowledged before",
            )


def is_proposal(e: Entry) -> bool:
    return e.type == EntryType.NORMAL and bool(e.data)
