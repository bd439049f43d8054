"""Key-value requests: ranges, the write hot path (put, delete, txn), compaction, hashes.

Every request arrives decoded and type-checked (store/api); here it is checked against the
rules that need no log (etcd's order: empty key, range, txn limits, duplicate keys, lease
existence), then proposed in its canonical wire form, so that only what passed the checks
ever reaches the log.
"""

from __future__ import annotations

from store.api.cluster import HashKVRequest, HashKVResponse
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    TxnRequest,
)
from store.server.proposals import Done, Proposals
from store.server.reads import ReadIndex
from store.server.state import ReplicatedState

WriteRequest = PutRequest | DeleteRangeRequest | TxnRequest


class KVService:
    def __init__(self, state: ReplicatedState, proposals: Proposals, reads: ReadIndex) -> None:
        self.state = state
        self.proposals = proposals
        self.reads = reads

    async def range(self, req: RangeRequest) -> RangeResponse:
        self.state.validate_range(req)
        if not req.serializable:
            await self.reads.barrier()
        return self.state.kv.range(req)

    def write(self, req: WriteRequest, done: Done, forward: bool = False) -> None:
        """The hot path: checked and proposed right here, answered by the apply loop calling
        `done` (no coroutine per request).  A refused request raises StoreError.  `forward`:
        a follower hands it to the leader (Proposals.submit)."""
        if isinstance(req, PutRequest):
            # forwarded: the lease is checked where it is applied, not against this member's
            # possibly older state (a grant just made through another member)
            self.state.validate_put(req, check_lease=not forward)
        elif isinstance(req, DeleteRangeRequest):
            self.state.validate_delete(req)
        else:
            self.state.validate_txn(req)
        self.proposals.submit(req.kind, req.to_wire(), done, forward)

    async def compact(self, req: CompactionRequest, forward: bool = False) -> CompactionResponse:
        if not forward:  # forwarded: the revision is checked where it is applied (see write)
            self.state.validate_compact(req)
        return CompactionResponse.from_wire(await self.proposals.propose("compact", req.to_wire(), forward=forward))

    async def hash_kv(self, req: HashKVRequest) -> HashKVResponse:
        kv = self.state.kv
        h, compact = kv.hash_kv(req.revision)
        return HashKVResponse(h, compact, kv.current_revision)
