"""cluster.toml loading: defaults, overrides, and a clear error for every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver.config import ApiserverSettings, load_apiserver_settings
from components.kubelet.config import KubeletSettings, load_kubelet_settings
from machinery.process.config import ConfigError
from store.config import RaftSettings, StoreSettings, load_raft_settings, load_store_settings
from tests.support.paths import ROOT


def test_repository_cluster_toml_loads() -> None:
    """The shipped cluster.toml is valid and states exactly the defaults (declared once, in the dataclasses)."""
    assert load_raft_settings(ROOT / "cluster.toml") == RaftSettings()
    assert load_store_settings(ROOT / "cluster.toml") == StoreSettings()
    # every section `raftkube up` reads (an empty system_reserved once stopped `up` on the defaults)
    assert load_apiserver_settings(ROOT / "cluster.toml") == ApiserverSettings()
    assert load_kubelet_settings(ROOT / "cluster.toml") == KubeletSettings()


def test_apiserver_metric_resolution_is_checked_when_the_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text('[apiserver]\nmetric_resolution = "2s"\n')
    settings = load_apiserver_settings(path)
    assert settings.flags()[-2:] == ("--metric-resolution", "2s")
    for value, message in [("often", "time: invalid duration"), ("100ms", "from 1s to 3600s, got '100ms'")]:
        path.write_text(f'[apiserver]\nmetric_resolution = "{value}"\n')
        with pytest.raises(ConfigError, match=f"apiserver.metric_resolution: {message}"):
            load_apiserver_settings(path)


def test_kubelet_section_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    for text, message in [
        ("[kubelets]\ncount = -1\n", "kubelets.count must be at least 0"),
        ("[kubelets]\nhollow = 6000\n", "kubelets.hollow must be at most 5000"),
        ("[kubelets]\ncapacity = ''\n", "kubelets.capacity must be a non-empty string"),
        ("[kubelets]\nsystem_reserved = 5\n", "kubelets.system_reserved must be a string"),
        ("[kubelets]\nnodes = 3\n", "kubelets has unknown keys: nodes"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_kubelet_settings(path)
    path.write_text("[kubelets]\nsystem_reserved = ''\n")
    assert load_kubelet_settings(path).system_reserved == ""


def test_missing_section_means_defaults(tmp_path: Path) -> None:
    """A file without [store.raft] gives the defaults."""
    f = tmp_path / "c.toml"
    f.write_text("[store]\nmembers = 3\n")
    assert load_raft_settings(f) == RaftSettings()
    assert load_store_settings(f) == StoreSettings()


def test_values_override_defaults(tmp_path: Path) -> None:
    """Values in the file replace the defaults."""
    f = tmp_path / "c.toml"
    f.write_text("[store]\nhello_timeout = 2\nfsync = false\n[store.raft]\nelection_ticks = 20\npre_vote = false\n")
    s = load_raft_settings(f)
    assert (s.election_ticks, s.pre_vote, s.heartbeat_ticks) == (20, False, 1)
    st = load_store_settings(f)
    assert (st.hello_timeout, st.fsync, st.raft) == (2.0, False, s)
    assert isinstance(st.hello_timeout, float)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[store.raft]\nelection_ticks = 'ten'\n", "store.raft.election_ticks must be an integer, got 'ten'"),
        ("[store.raft]\nelection_ticks = true\n", "store.raft.election_ticks must be an integer, got True"),
        ("[store.raft]\nmax_size_per_msg = 4096.0\n", "store.raft.max_size_per_msg must be an integer, got 4096.0"),
        ("[store.raft]\ntick_ms = 0\n", "store.raft.tick_ms must be positive"),
        ("[store.raft]\nmax_inflight_msgs = -1\n", "store.raft.max_inflight_msgs must be positive"),
        ("[store.raft]\npre_vote = 1\n", "store.raft.pre_vote must be true or false"),
        ("[store.raft]\nelection_tick = 10\n", "unknown keys: election_tick"),
        ("[store.raft]\nelection_ticks = 1\n", "election_ticks (1) must exceed heartbeat_ticks"),
        ("[store.raft\n", "not valid TOML"),
        ("[store]\nraft = 3\n", "[store.raft] must be a table"),
        ("store = 3\n", "[store] must be a table"),
    ],
)
def test_bad_raft_values_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    """Each bad input is refused with a ConfigError that names the file, key and problem."""
    f = tmp_path / "c.toml"
    f.write_text(text)
    for load in (load_raft_settings, load_store_settings):
        with pytest.raises(ConfigError) as err:
            load(f)
        assert message in str(err.value)
        assert str(f) in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("members = 4", "store.members must be 1 or 3 or 5, got 4"),
        ("members = 3.0", "store.members must be an integer"),
        ("client_port = 70000", "store.client_port must be at most 65535"),
        ("data_dir = ''", "store.data_dir must be a non-empty string"),
        ("host = 1", "store.host must be a non-empty string"),
        ("request_timeout = 0", "store.request_timeout must be a positive number of seconds"),
        ("hello_timeout = true", "store.hello_timeout must be a positive number of seconds"),
        ("hello_timeout = inf", "store.hello_timeout must be a positive number of seconds"),
        ("progress_notify_interval = nan", "store.progress_notify_interval must be a positive number"),
        ("watch_backlog_limit = 0", "store.watch_backlog_limit must be positive"),
        ("max_client_connections = 1e4", "store.max_client_connections must be an integer"),
        ("max_request_bytes = 9223372036854775808", "store.max_request_bytes must be at most 9223372036854775807"),
        ("fsync = 'no'", "store.fsync must be true or false"),
        ("snapshot_counts = 5", "store has unknown keys: snapshot_counts"),
    ],
)
def test_bad_store_values_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    """[store] keys are checked like [store.raft] ones."""
    f = tmp_path / "c.toml"
    f.write_text(f"[store]\n{text}\n")
    with pytest.raises(ConfigError) as err:
        load_store_settings(f)
    assert message in str(err.value)
    assert str(f) in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a ConfigError naming the path."""
    with pytest.raises(ConfigError, match="no such file"):
        load_raft_settings(tmp_path / "absent.toml")
