"""A simulated member: a RawNode, a fake disk, and a toy replicated state machine.

The disk is a `MemoryStorage` written only in the "persist" step of a Ready, so it holds
exactly what a real member would have fsynced.  A crash throws away the RawNode and the
state machine; a restart rebuilds both from the disk alone.
"""

from __future__ import annotations

import random

from store.raft import Canary, Config, MemoryStorage, RawNode
from store.raft.types import ConfState, HardState, Snapshot

SEP = b"|"


def encode_state(payloads: list[bytes]) -> bytes:
    return SEP.join(payloads)


def decode_state(data: bytes) -> list[bytes]:
    return data.split(SEP) if data else []


class SimNode:
    def __init__(
        self,
        node_id: int,
        rng: random.Random,
        canaries: frozenset[Canary],
        election_tick: int,
        max_inflight: int,
        max_size_per_msg: int,
    ) -> None:
        self.id = node_id
        self.rng = rng
        self.canaries = canaries
        self.election_tick = election_tick
        self.max_inflight = max_inflight
        self.max_size_per_msg = max_size_per_msg
        self.disk = MemoryStorage()
        self.raw: RawNode | None = None
        self.sm: list[bytes] = []
        """Applied proposal payloads, in log order (the replicated state)."""
        self.applied = 0
        self.incarnation = 0
        # Persisted hard state as last written: for the "never goes back" checks.
        self.durable_hs = HardState()

    @property
    def alive(self) -> bool:
        return self.raw is not None

    def start(self) -> RawNode:
        """(Re)start from the disk only, as a member process would after a crash."""
        snap = self.disk.snapshot()
        self.sm = decode_state(snap.data)
        self.applied = snap.metadata.index
        self.raw = RawNode(
            Config(
                id=self.id,
                storage=self.disk,
                rng=self.rng,
                election_tick=self.election_tick,
                heartbeat_tick=1,
                applied=self.applied,
                max_inflight_msgs=self.max_inflight,
                max_size_per_msg=self.max_size_per_msg,
                canaries=self.canaries,
            )
        )
        self.incarnation += 1
        return self.raw

    def crash(self) -> None:
        self.raw = None
        self.sm = []
        self.applied = 0

    def make_snapshot(self, conf_state: ConfState) -> Snapshot | None:
        """Snapshot the state machine at the applied index and compact the log before it."""
        if self.applied <= self.disk.snapshot().metadata.index:
            return None
        snap = self.disk.create_snapshot(self.applied, conf_state, encode_state(self.sm))
        self.disk.compact(self.applied)
        return snap
