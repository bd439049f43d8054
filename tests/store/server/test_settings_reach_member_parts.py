"""Every setting of cluster.toml reaches the part of a member that acts on it.

tests/store/test_settings_reach_members.py follows each key from cluster.toml into member.json;
this test follows member.json into the running parts of a member built in-process: a
setting that is written down but read by nobody (as max_size_per_msg and max_inflight_msgs
were) fails here.  The e2e tests show the behaviour itself (test_raft_limits_e2e,
test_slow_clients_e2e, the snapshot and timeout tests)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machinery.process.launch import free_ports
from store.launcher import LocalCluster
from store.server.config import SETTINGS, read_member_file
from store.server.member import Member
from tests.support.cluster import fast_settings

CHANGED: dict[str, Any] = {
    "tick_ms": 37,
    "heartbeat_ticks": 2,
    "election_ticks": 13,
    "max_size_per_msg": 4096,
    "max_inflight_msgs": 17,
    "pre_vote": False,
    "check_quorum": False,
    "snapshot_count": 1234,
    "snapshot_catchup_entries": 77,
    "request_timeout": 3.5,
    "fsync": False,
    "max_request_bytes": 100_000,
    "max_client_connections": 55,
    "hello_timeout": 2.5,
    "frame_timeout": 7.5,
    "watch_backlog_limit": 3 << 20,
    "watch_output_limit": 300 << 20,
    "progress_notify_interval": 4.5,
}

WHERE: dict[str, Callable[[Member], Any]] = {
    "tick_ms": lambda m: round(m.node.tick_seconds * 1000),
    "heartbeat_ticks": lambda m: m.node.raw.raft.cfg.heartbeat_tick,
    "election_ticks": lambda m: m.node.raw.raft.cfg.election_tick,
    "max_size_per_msg": lambda m: m.node.raw.raft.cfg.max_size_per_msg,
    "max_inflight_msgs": lambda m: m.node.raw.raft.cfg.max_inflight_msgs,
    "pre_vote": lambda m: m.node.raw.raft.cfg.pre_vote,
    "check_quorum": lambda m: m.node.raw.raft.cfg.check_quorum,
    "snapshot_count": lambda m: m.snapshots.every,
    "snapshot_catchup_entries": lambda m: m.snapshots.catchup_entries,
    "request_timeout": lambda m: (m.proposals.timeout, m.reads.timeout)[0],
    "fsync": lambda m: m.persistence.fsync,
    "max_request_bytes": lambda m: m.clients.max_request_bytes,
    "max_client_connections": lambda m: m.clients.max_connections,
    "hello_timeout": lambda m: m.clients.hello_timeout,
    "frame_timeout": lambda m: m.clients.frame_timeout,
    "watch_backlog_limit": lambda m: m.watches.limit_bytes,
    "watch_output_limit": lambda m: m.watches.output_limit,
    "progress_notify_interval": lambda m: m.watches.progress_interval,
}


def test_the_tables_cover_every_setting() -> None:
    assert set(CHANGED) == set(SETTINGS) == set(WHERE)


def test_every_setting_reaches_the_part_that_acts_on_it(tmp_path: Path) -> None:
    s = fast_settings(tmp_path, members=1)
    raft = {k: v for k, v in CHANGED.items() if k in {f.name for f in dataclasses.fields(s.raft)}}
    rest = {k: v for k, v in CHANGED.items() if k not in raft}
    s = dataclasses.replace(s, raft=dataclasses.replace(s.raft, **raft), **rest)
    local = LocalCluster(tmp_path)
    local.create(s, ports=free_ports(3))
    cfg = read_member_file(local.member_dir(1))
    member = Member(cfg)  # built, not started: every part exists after __init__
    try:
        got = {name: where(member) for name, where in WHERE.items()}
        assert member.reads.timeout == CHANGED["request_timeout"]
    finally:
        member.persistence.close()
    assert got == CHANGED
