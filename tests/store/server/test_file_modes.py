"""A member's data dir is private whatever the umask (directories 0700, files 0600): the
persistence layer, member.json, the apply log, and the launcher's cluster layout.  Each test
runs with umask 0; `store up` refuses a data dir that group or others can write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from machinery.process.launch import LauncherError
from store.launcher import LocalCluster
from store.raft import Ready
from store.raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata
from store.server.apply_log import ApplyLog
from store.server.config import read_member_file, write_member_file
from store.server.persistence import Persistence
from tests.support.cluster import fast_settings
from tests.support.modes import not_private, umask


@pytest.fixture(autouse=True)
def umask_zero() -> Iterator[None]:
    with umask(0):
        yield


def test_persistence_creates_a_private_data_dir(tmp_path: Path) -> None:
    """Lock, WAL, snapshots: everything a member writes through its persistence."""
    member = tmp_path / "data" / "member-1"
    p = Persistence.open(member, 1, 7)
    snap = Snapshot(SnapshotMetadata(index=1, term=1, conf_state=ConfState(voters=(1,))), b"state")
    p.save_snapshot_file(snap)
    p.persist_ready(Ready(hard_state=HardState(term=1, vote=1, commit=1), snapshot=snap, must_sync=True))
    p.persist_ready(Ready(entries=[Entry(term=1, index=2, data=b"x")], must_sync=True))
    p.record_snapshot(Snapshot(SnapshotMetadata(index=2, term=1, conf_state=ConfState(voters=(1,))), b"state 2"))
    p.close()
    assert not_private(tmp_path / "data") == []


def test_member_file_and_apply_log_are_private(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "rk")
    cluster.create(fast_settings(tmp_path / "rk", members=1), ports=[1, 2, 3])
    d = cluster.member_dir(1)
    write_member_file(d, read_member_file(d))  # rewritten, as `set_peer_dial` does
    log = ApplyLog(d)
    log.record(2, 1, 0, b"x", 2, 0.0)
    log.close()
    assert not_private(tmp_path / "rk") == []


def test_launcher_layout_is_private_and_a_created_data_dir_is_0700(tmp_path: Path) -> None:
    """cluster.json and every member's member.json; the data dir it creates itself is 0700."""
    cluster = LocalCluster(tmp_path / "new" / "rk")
    cluster.create(fast_settings(tmp_path / "new" / "rk", members=3), ports=list(range(1, 10)))
    assert not_private(tmp_path / "new") == []
    cluster.check_private()


@pytest.mark.parametrize(("where", "bits", "who"), [("data", 0o775, "group"), ("store", 0o757, "others")])
def test_a_data_dir_others_can_write_is_refused(tmp_path: Path, where: str, bits: int, who: str) -> None:
    """Refused with a message that names the directory and its mode; never chmod-ed."""
    data = tmp_path / "rk"
    cluster = LocalCluster(data)
    cluster.create(fast_settings(data, members=1), ports=[1, 2, 3])
    target = data if where == "data" else data / "store"
    target.chmod(bits)
    with pytest.raises(LauncherError, match=f"{target} is writable by {who} \\(mode {bits:04o}\\)"):
        cluster.check_private()
    assert target.stat().st_mode & 0o777 == bits
