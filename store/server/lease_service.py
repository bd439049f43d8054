"""Lease requests.  Grants and revocations go through the log; keep-alives and time-to-live
are answered by the leader alone, whose clock is the one that expires leases."""

from __future__ import annotations

import random
from collections.abc import Callable

from store.api import errors as E
from store.api.lease import (
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseIdRequest,
    LeaseKeepAliveResponse,
    LeaseLeasesResponse,
    LeaseRevokeResponse,
    LeaseTimeToLiveRequest,
    LeaseTimeToLiveResponse,
)
from store.server.clock import Clock
from store.server.node import RaftNode
from store.server.proposals import Proposals
from store.server.reads import ReadIndex
from store.server.state import ReplicatedState


class LeaseService:
    def __init__(
        self,
        state: ReplicatedState,
        node: RaftNode,
        proposals: Proposals,
        reads: ReadIndex,
        clock: Clock,
        leader_error: Callable[[], E.StoreError],
    ) -> None:
        self.state = state
        self.node = node
        self.proposals = proposals
        self.reads = reads
        self.clock = clock
        self.leader_error = leader_error
        self._rng = random.Random()

    async def grant(self, req: LeaseGrantRequest, forward: bool = False) -> LeaseGrantResponse:
        lease_id = req.id or self._new_lease_id()
        self.state.validate_lease_grant(lease_id, req.ttl)
        # The log carries [id, ttl]: the id is chosen here, so every member grants the same.
        return LeaseGrantResponse.from_wire(
            await self.proposals.propose("lease_grant", [lease_id, req.ttl], forward=forward)
        )

    def _new_lease_id(self) -> int:
        while True:
            lease_id = self._rng.getrandbits(62) | 1
            if not self.state.lessor.exists(lease_id):
                return lease_id

    async def revoke(self, req: LeaseIdRequest, forward: bool = False) -> LeaseRevokeResponse:
        # forwarded: the lease is looked for where the revoke is applied, not in this member's
        # possibly older state
        if not forward and not self.state.lessor.exists(req.id):
            raise E.LeaseNotFoundError(req.id)
        return LeaseRevokeResponse.from_wire(await self.proposals.propose("lease_revoke", [req.id], forward=forward))

    async def keepalive(self, req: LeaseIdRequest) -> LeaseKeepAliveResponse:
        return self.keepalive_now(req)

    def keepalive_now(self, req: LeaseIdRequest) -> LeaseKeepAliveResponse:
        """The keep-alive, answered at once (a stream of them needs no task each)."""
        if not self.node.is_leader:
            raise self.leader_error()
        ttl = self.state.lessor.renew(req.id, self.clock.monotonic())
        return LeaseKeepAliveResponse(self.state.kv.current_revision, req.id, ttl)

    async def time_to_live(self, req: LeaseTimeToLiveRequest) -> LeaseTimeToLiveResponse:
        if not self.node.is_leader:
            raise self.leader_error()  # only the leader's clock knows the remaining time
        return self.state.lease_time_to_live(req.id, req.keys, self.clock.monotonic())

    async def leases(self, req: object) -> LeaseLeasesResponse:
        await self.reads.barrier()
        return LeaseLeasesResponse(self.state.lessor.leases())

    def expire(self) -> None:
        """On each tick, as leader: propose the revocation of every lease that ran out.  The
        lessor reports each once, and again after a while if its revocation was lost."""
        if not self.node.is_leader:
            return
        for lease_id in self.state.lessor.expired(self.clock.monotonic()):
            self.proposals.propose_internal("lease_revoke", [lease_id])
