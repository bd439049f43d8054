"""What a member reports about itself: status, health (/health) and metrics (/metrics)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.api.cluster import MemberInfo, StatusResponse
from store.raft.types import NONE, StateType
from store.server.config import MemberConfig
from store.server.http import render_metrics
from store.server.node import RaftNode
from store.server.state import ReplicatedState

APPLY_LAG_UNHEALTHY = 5000
"""Committed entries not yet applied above which a member calls itself unhealthy."""

_ROLES = {
    StateType.LEADER: "leader",
    StateType.FOLLOWER: "follower",
    StateType.CANDIDATE: "candidate",
    StateType.PRE_CANDIDATE: "pre-candidate",
}

Counters = Callable[[], list[tuple[str, str, str, float]]]
"""Metrics of other parts of the member: (name, type, help, value) rows."""


class MemberStatus:
    def __init__(self, cfg: MemberConfig, state: ReplicatedState, node: RaftNode, counters: Counters) -> None:
        self.cfg = cfg
        self.state = state
        self.node = node
        self.counters = counters

    def members_with_roles(self) -> list[MemberInfo]:
        learners = set(self.node.status().conf_state.learners)
        return [
            MemberInfo(m.id, m.name, m.peer_url, m.client_url, m.http_url, m.id in learners)
            for m in sorted(self.state.members.values(), key=lambda m: m.id)
        ]

    def status(self) -> StatusResponse:
        st = self.node.status()
        kv = self.state.kv
        return StatusResponse(
            id=self.cfg.member_id,
            name=self.cfg.name,
            client_url=self.cfg.client_url,
            peer_url=self.cfg.peer_url,
            role="learner" if st.is_learner else _ROLES[st.state],
            leader=st.lead,
            term=st.term,
            commit_index=st.commit,
            applied_index=self.state.applied_index,
            revision=kv.current_revision,
            compact_revision=kv.compact_revision,
            db_keys=kv.key_count(),
            db_size=kv.approx_bytes(),
            healthy=self.health()[0],
            cluster_id=self.state.cluster_id,
        )

    def health(self) -> tuple[bool, dict[str, Any]]:
        st = self.node.status()
        if st.lead == NONE:
            return False, {"reason": "no leader"}
        lag = st.commit - self.state.applied_index
        if lag > APPLY_LAG_UNHEALTHY:
            return False, {"reason": f"applying: {lag} committed entries not applied yet"}
        return True, {"leader": st.lead, "term": st.term}

    def metrics(self) -> str:
        st = self.node.status()
        n = self.node
        kv = self.state.kv
        lag = st.commit - self.state.applied_index
        rows: list[tuple[str, str, str, float]] = [
            ("raftkube_raft_term", "gauge", "Current Raft term.", st.term),
            ("raftkube_raft_is_leader", "gauge", "1 if this member is the leader.", int(n.is_leader)),
            ("raftkube_raft_commit_index", "gauge", "Raft commit index.", st.commit),
            ("raftkube_raft_applied_index", "gauge", "Index applied to the state machine.", self.state.applied_index),
            ("raftkube_raft_apply_lag", "gauge", "Committed entries not yet applied.", lag),
            ("raftkube_wal_fsync_total", "counter", "WAL fsyncs (one per Ready batch).", n.fsyncs),
            ("raftkube_wal_fsync_seconds_total", "counter", "Time spent persisting Readies.", n.fsync_seconds),
            ("raftkube_wal_entries_total", "counter", "Entries written to the WAL.", n.entries_persisted),
            ("raftkube_apply_seconds_total", "counter", "Time spent applying.", n.apply_seconds),
            ("raftkube_mvcc_revision", "gauge", "Current store revision.", kv.current_revision),
            ("raftkube_mvcc_db_keys", "gauge", "Live keys.", kv.key_count()),
            ("raftkube_mvcc_db_bytes", "gauge", "Approximate bytes of keys and values.", kv.approx_bytes()),
            ("raftkube_watchers", "gauge", "Open watchers.", self.state.hub.watcher_count()),
            (
                "raftkube_config_max_size_per_msg",
                "gauge",
                "Bytes of entries per append message.",
                self.cfg.max_size_per_msg,
            ),
            (
                "raftkube_config_max_inflight_msgs",
                "gauge",
                "Pipelined appends per follower.",
                self.cfg.max_inflight_msgs,
            ),
        ]
        return render_metrics(rows + self.counters())
