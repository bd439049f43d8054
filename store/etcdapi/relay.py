"""Lease keep-alives and time-to-live, and membership changes, asked of a follower, answered
by the leader.

Only the leader's clock expires leases, so only it can renew one or say how long one has
left; only the leader can give a new member its ID (the next one above every ID it has
applied, with no other change in flight: a follower's view may lag).  etcd's followers
hand these to the leader (over its peer HTTP API, or as Raft proposals); ours relay them over
our own client protocol to the leader's client port, as a client with the member's own
certificate.  One connection, to whoever leads now: when the leader changes, the next
request dials the new one.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from store.api import errors as E
from store.api.cluster import EMPTY, Empty, MemberAddRequest, MemberIdRequest, MemberInfo, MemberUpdateRequest
from store.api.lease import LeaseKeepAliveResponse, LeaseTimeToLiveResponse
from store.client.client import Client
from store.server.node import RaftNode

RELAY_TIMEOUT = 5.0


class LeaderRelay:
    def __init__(
        self,
        node: RaftNode,
        members: Callable[[], dict[int, MemberInfo]],
        tls: ssl.SSLContext | None,
        leader_error: Callable[[], E.StoreError],
    ) -> None:
        self.node = node
        self.members = members
        self.tls = tls
        self.leader_error = leader_error
        self._client: Client | None = None
        self._url = ""

    async def _leader(self) -> Client:
        if not self.node.has_leader:
            raise self.leader_error()
        info = self.members().get(self.node.lead)
        if info is None:
            raise self.leader_error()
        if self._client is None or self._url != info.client_url:
            if self._client is not None:
                await self._client.close()
            self._url = info.client_url
            self._client = Client([info.client_url], timeout=RELAY_TIMEOUT, tls=self.tls)
        return self._client

    async def keepalive(self, lease_id: int) -> LeaseKeepAliveResponse:
        return await (await self._leader()).lease_keepalive(lease_id)

    async def time_to_live(self, lease_id: int, keys: bool) -> LeaseTimeToLiveResponse:
        return await (await self._leader()).lease_ttl(lease_id, keys)

    # the membership changes, with ClusterService's signatures (the etcd API calls either)
    async def member_add(self, req: MemberAddRequest) -> MemberInfo:
        c = await self._leader()
        return await c.member_add(req.name, req.peer_url, req.client_url, req.http_url, req.is_learner)

    async def member_update(self, req: MemberUpdateRequest) -> MemberInfo:
        c = await self._leader()
        return await c.member_update(req.id, req.name, req.peer_url, req.client_url, req.http_url)

    async def member_remove(self, req: MemberIdRequest) -> Empty:
        await (await self._leader()).member_remove(req.id)
        return EMPTY

    async def member_promote(self, req: MemberIdRequest) -> Empty:
        await (await self._leader()).member_promote(req.id)
        return EMPTY

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
