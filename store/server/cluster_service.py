"""Cluster requests: status, the member list, membership changes, leadership moves, backups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from store.api import errors as E
from store.api.cluster import (
    EMPTY,
    Empty,
    MemberAddRequest,
    MemberIdRequest,
    MemberInfo,
    MemberListResponse,
    MemberUpdateRequest,
    StatusResponse,
)
from store.raft import ConfChangeType
from store.server.node import RaftNode
from store.server.proposals import Proposals
from store.server.reads import ReadIndex
from store.server.state import ReplicatedState
from store.server.status import MemberStatus

PROMOTE_READY = 0.9
"""A learner is promoted once it holds this share of the committed log."""


class ClusterService:
    def __init__(
        self,
        state: ReplicatedState,
        node: RaftNode,
        proposals: Proposals,
        reads: ReadIndex,
        status: MemberStatus,
        timeout: float,
        leader_error: Callable[[], E.StoreError],
    ) -> None:
        self.state = state
        self.node = node
        self.proposals = proposals
        self.reads = reads
        self.member_status = status
        self.timeout = timeout
        self.leader_error = leader_error

    async def status(self, req: Empty) -> StatusResponse:
        return self.member_status.status()

    async def members(self, req: Empty) -> MemberListResponse:
        await self.reads.barrier()
        return MemberListResponse(self.member_status.members_with_roles())

    async def member_add(self, req: MemberAddRequest) -> MemberInfo:
        """Add a member.  Its name may be empty (etcd's MemberAdd: "unstarted" until it is
        given one with `member_update`)."""
        self._check_unused(0, req.name, req.peer_url, req.client_url)
        # No add can be in flight here: the Raft core refuses a second membership change
        # until the pending one is applied, so the state alone knows every ID given out.
        new_id = self.state.next_member_id()
        info = MemberInfo(new_id, req.name, req.peer_url, req.client_url, req.http_url, req.is_learner)
        kind = ConfChangeType.ADD_LEARNER if req.is_learner else ConfChangeType.ADD_NODE
        await self.proposals.propose_conf_change(kind, new_id, info)
        return info

    async def member_update(self, req: MemberUpdateRequest) -> MemberInfo:
        """Replace a member's name and URLs; its role stays.  It rides a membership change
        that is a no-op for Raft (adding a member as what it already is) so that every member
        applies the new record at the same point of the log, and re-dials a moved peer."""
        old = self.state.members.get(req.id)
        if old is None:
            raise E.MemberNotFoundError(f"no member with id {req.id}")
        self._check_unused(req.id, req.name, req.peer_url, req.client_url)
        info = MemberInfo(req.id, req.name, req.peer_url, req.client_url, req.http_url, old.is_learner)
        kind = ConfChangeType.ADD_LEARNER if old.is_learner else ConfChangeType.ADD_NODE
        await self.proposals.propose_conf_change(kind, req.id, info)
        return info

    def _check_unused(self, member_id: int, name: str, peer_url: str, client_url: str) -> None:
        """Refuse a name, peer URL or client URL another member has (names only when given)."""
        for m in self.state.members.values():
            if m.id == member_id:
                continue
            if m.peer_url == peer_url:
                raise E.PeerURLExistsError(f"member {m.id} ({m.name}) already has peer URL {peer_url}")
            if m.client_url == client_url or (name and m.name == name):
                raise E.MemberExistsError(f"member {m.id} ({m.name}) already uses that name or address")

    async def member_remove(self, req: MemberIdRequest) -> Empty:
        if req.id not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {req.id}")
        if list(self.node.status().conf_state.voters) == [req.id]:
            raise E.LastVoterError(f"member {req.id} is the last voter; removing it would leave no cluster")
        await self.proposals.propose_conf_change(ConfChangeType.REMOVE_NODE, req.id)
        return EMPTY

    async def member_promote(self, req: MemberIdRequest) -> Empty:
        if req.id not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {req.id}")
        if not self.node.is_leader:
            raise self.leader_error()
        st = self.node.status()
        pr = st.progress.get(req.id)
        if pr is None or not pr.is_learner:
            raise E.InvalidArgumentError(f"member {req.id} is not a learner")
        if pr.match < st.commit * PROMOTE_READY:
            raise E.LearnerNotReadyError(
                f"learner {req.id} has only {pr.match} of {st.commit} entries; promote it once caught up"
            )
        await self.proposals.propose_conf_change(ConfChangeType.ADD_NODE, req.id)
        return EMPTY

    async def move_leader(self, req: MemberIdRequest) -> Empty:
        if req.id not in self.state.members:
            raise E.MemberNotFoundError(f"no member with id {req.id}")
        if not self.node.is_leader:
            raise self.leader_error()
        self.node.transfer_leader(req.id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while self.node.lead != req.id:
            if loop.time() > deadline:
                raise E.TimeoutError_(f"leadership did not move to {req.id} in time")
            await asyncio.sleep(0.01)
        return EMPTY

    async def backup(self) -> bytes:
        """A consistent copy of the state, for `store snapshot save`."""
        await self.reads.barrier()
        return self.state.backup()
