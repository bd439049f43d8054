"""Each key of cluster.toml's [store] and [store.raft] changes what the members or the launcher do.

The keys come from the repository's own cluster.toml, so a key added there that does not
reach a member (or, for the launcher's own keys, the layout) makes this fail.  For each key
the test writes a copy of cluster.toml with only that key changed, lays the cluster out as
`raftkube store up` does (load_store_settings, then LocalCluster.create writing member.json),
and reads each member.json back as the member process does.  What a member then does with
each setting is the member's business; server/test_raft_limits_e2e.py checks one through a process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.cli.main import build_parser
from machinery.process.command import UsageError
from store.api.cluster import MemberInfo
from store.api.protocol import split_url
from store.cli import cluster as store_cli
from store.config import StoreSettings, load_store_settings
from store.launcher import LocalCluster
from store.server.config import SETTINGS, MemberConfig, RaftSettings, read_member_file
from tests.support.paths import ROOT

TOML = tomllib.loads((ROOT / "cluster.toml").read_text())
STORE = {k: v for k, v in TOML["store"].items() if k != "raft"}
RAFT = TOML["store"]["raft"]
KEYS = [("store", k) for k in STORE] + [("store.raft", k) for k in RAFT]
DEFAULTS = {f.name: f.default for f in dataclasses.fields(MemberConfig) if f.name in SETTINGS}


def _toml_value(v: Any) -> str:
    assert isinstance(v, (bool, int, float, str)), v
    return json.dumps(v)  # JSON's true/false, numbers and basic strings are TOML too


def _changed(key: str, value: Any, tmp_path: Path) -> Any:
    """A value for `key` that differs from cluster.toml's and is still valid."""
    special: dict[str, Callable[[], Any]] = {
        "members": lambda: 5 if value != 5 else 3,
        "data_dir": lambda: str(tmp_path / "elsewhere"),
        "host": lambda: "127.0.0.9",
        "client_port": lambda: value + 7,
        "hosts": lambda: "netns",
        "hosts_subnet": lambda: "10.78.0.0/24",
    }
    if key in special:
        return special[key]()
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 + 1  # election_ticks stays above heartbeat_ticks either way
    if isinstance(value, float):
        return value * 2 + 0.5
    raise AssertionError(f"cluster.toml key {key} = {value!r}: teach this test a changed value for it")


def _settings_with(tmp_path: Path, section: str, key: str, value: Any) -> StoreSettings:
    """load_store_settings of cluster.toml with `key` set to `value` (and the layout in tmp_path)."""
    store = {**STORE, "data_dir": str(tmp_path / "data")}
    raft = dict(RAFT)
    (store if section == "store" else raft)[key] = value
    lines = ["[store]", *(f"{k} = {_toml_value(v)}" for k, v in store.items())]
    lines += ["[store.raft]", *(f"{k} = {_toml_value(v)}" for k, v in raft.items())]
    f = tmp_path / "cluster.toml"
    f.write_text("\n".join(lines) + "\n")
    return load_store_settings(f)


# ---------------------------------------------------------------------- the launcher's own keys
def _check_members(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    local = LocalCluster(s.data_dir)
    infos = local.create(s)
    assert len(infos) == len(local.member_ids()) == new
    assert sorted(p.name for p in local.root.glob("member-*")) == [f"member-{i}" for i in range(1, new + 1)]
    for m in infos:
        assert len(read_member_file(local.member_dir(m.id)).initial_cluster) == new


def _check_data_dir(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    local = LocalCluster(s.data_dir)
    local.create(s)
    assert (Path(new) / "store" / "cluster.json").exists()
    assert not (tmp_path / "data").exists()
    for mid in local.member_ids():
        assert read_member_file(Path(new) / "store" / f"member-{mid}").member_id == mid


def _check_host(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    local = LocalCluster(s.data_dir)
    infos = local.create(s)
    cfg = read_member_file(local.member_dir(1))
    urls = [u for m in infos for u in (m.client_url, m.peer_url, m.http_url)]
    urls += [cfg.client_url, cfg.peer_url, cfg.http_url]
    assert {split_url(u)[0] for u in urls} == {new}


def _check_client_port(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    local = LocalCluster(s.data_dir)
    local.create(s)
    for i in local.member_ids():
        cfg = read_member_file(local.member_dir(i))
        base = new + 10000 * (i - 1)
        assert [split_url(u)[1] for u in (cfg.client_url, cfg.peer_url, cfg.http_url)] == [base, base + 1, base + 2]


def _check_hosts(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    """Each member at an address of its own, all on the same ports (root: CI is; the hosts are
    made when a member starts, so none is made here)."""
    if os.geteuid() != 0:
        pytest.skip("hosts of their own need root")
    local = LocalCluster(s.data_dir)
    infos = local.create(s)
    assert [split_url(m.client_url) for m in infos] == [(f"10.77.0.{10 + m.id}", s.client_port) for m in infos]
    assert local.host_network() is not None and local.host_network().hosts() == []  # type: ignore[union-attr]


def _check_hosts_subnet(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    """The subnet places the members once they are on hosts of their own (and only then)."""
    assert {split_url(m.client_url)[0] for m in LocalCluster(s.data_dir).create(s)} == {s.host}
    if os.geteuid() != 0:
        pytest.skip("hosts of their own need root")
    on_hosts = dataclasses.replace(s, hosts="netns", data_dir=tmp_path / "on-hosts")
    infos = LocalCluster(on_hosts.data_dir).create(on_hosts)
    assert [split_url(m.client_url)[0] for m in infos] == [f"10.78.0.{10 + m.id}" for m in infos]


def _check_startup_timeout(tmp_path: Path, s: StoreSettings, new: Any) -> None:
    """`store up` waits for a leader as long as cluster.toml says (no member is started here)."""
    waited: list[float] = []

    def wait_ready(cluster: LocalCluster, timeout: float) -> list[dict[str, Any]]:
        waited.append(timeout)
        raise UsageError("stop here")

    mp = pytest.MonkeyPatch()
    mp.setattr(store_cli, "_wait_ready", wait_ready)
    mp.setattr(LocalCluster, "start_all", lambda self, env=None: {})
    try:
        argv = ["store", "up", "--config", str(tmp_path / "cluster.toml"), "--data-dir", str(tmp_path / "up")]
        args = build_parser().parse_args([*argv, "--detach"])
        with pytest.raises(UsageError, match="stop here"):
            args.run(args)
    finally:
        mp.undo()
    assert waited == [new]


LAUNCHER_ONLY: dict[str, Callable[[Path, StoreSettings, Any], None]] = {
    "members": _check_members,
    "data_dir": _check_data_dir,
    "host": _check_host,
    "client_port": _check_client_port,
    "hosts": _check_hosts,
    "hosts_subnet": _check_hosts_subnet,
    "startup_timeout": _check_startup_timeout,
}


# ---------------------------------------------------------------------- the tests
def test_cluster_toml_states_every_setting() -> None:
    """cluster.toml documents every setting there is, and nothing else."""
    launcher = {f.name for f in dataclasses.fields(StoreSettings)} - {"raft"} - set(SETTINGS)
    assert launcher == set(LAUNCHER_ONLY)
    assert set(STORE) == launcher | (set(SETTINGS) - {f.name for f in dataclasses.fields(RaftSettings)})
    assert set(RAFT) == {f.name for f in dataclasses.fields(RaftSettings)}


@pytest.mark.parametrize(("section", "key"), KEYS, ids=[f"{s}.{k}" for s, k in KEYS])
def test_each_key_reaches_the_members(tmp_path: Path, section: str, key: str) -> None:
    """A changed key is in every member's member.json as read back, and nothing else changes;
    a key only the launcher uses changes the layout or the launcher instead."""
    value = (STORE if section == "store" else RAFT)[key]
    new = _changed(key, value, tmp_path)
    assert new != value
    s = _settings_with(tmp_path, section, key, new)
    if key in LAUNCHER_ONLY:
        LAUNCHER_ONLY[key](tmp_path, s, new)
        return
    local = LocalCluster(s.data_dir)
    infos = local.create(s)
    for m in infos:
        cfg = read_member_file(local.member_dir(m.id))
        assert getattr(cfg, key) == new, f"{section}.{key} did not reach member {m.id}"
        others = {n: getattr(cfg, n) for n in SETTINGS if n != key}
        assert others == {n: DEFAULTS[n] for n in others}, f"changing {section}.{key} changed other settings"


def test_member_added_later_runs_with_the_clusters_settings(tmp_path: Path) -> None:
    """`member add` lays out the new member with the settings of the cluster, not the defaults."""
    s = _settings_with(tmp_path, "store.raft", "max_size_per_msg", 4096)
    s = dataclasses.replace(s, raft=dataclasses.replace(s.raft, tick_ms=20), hello_timeout=1.5)
    local = LocalCluster(s.data_dir)
    local.create(s)
    local.add_member_layout(
        MemberInfo(4, "m4", "tcp://127.0.0.1:5001", "tcp://127.0.0.1:5000", "http://127.0.0.1:5002", True)
    )
    cfg = read_member_file(local.member_dir(4))
    first = read_member_file(local.member_dir(1))
    assert {n: getattr(cfg, n) for n in SETTINGS} == {n: getattr(first, n) for n in SETTINGS}
    assert (cfg.max_size_per_msg, cfg.tick_ms, cfg.hello_timeout) == (4096, 20, 1.5)
    assert cfg.join
    assert [m.id for m in cfg.initial_cluster] == [1, 2, 3, 4]
