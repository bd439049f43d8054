"""cluster.toml loading: defaults, overrides, and a clear error for every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config import ConfigError, RaftSettings, load_raft_settings

ROOT = Path(__file__).resolve().parents[2]


def test_repository_cluster_toml_loads() -> None:
    """The shipped cluster.toml is valid and matches the documented defaults."""
    assert load_raft_settings(ROOT / "cluster.toml") == RaftSettings()


def test_missing_section_means_defaults(tmp_path: Path) -> None:
    """A file without [store.raft] gives the defaults."""
    f = tmp_path / "c.toml"
    f.write_text("[store]\nmembers = 3\n")
    assert load_raft_settings(f) == RaftSettings()


def test_values_override_defaults(tmp_path: Path) -> None:
    """Values in the file replace the defaults."""
    f = tmp_path / "c.toml"
    f.write_text("[store.raft]\nelection_ticks = 20\npre_vote = false\n")
    s = load_raft_settings(f)
    assert (s.election_ticks, s.pre_vote, s.heartbeat_ticks) == (20, False, 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[store.raft]\nelection_ticks = 'ten'\n", "store.raft.election_ticks must be int"),
        ("[store.raft]\nelection_ticks = true\n", "store.raft.election_ticks must be an integer"),
        ("[store.raft]\ntick_ms = 0\n", "store.raft.tick_ms must be positive"),
        ("[store.raft]\npre_vote = 1\n", "store.raft.pre_vote must be bool"),
        ("[store.raft]\nelection_tick = 10\n", "unknown keys: election_tick"),
        ("[store.raft]\nelection_ticks = 1\n", "election_ticks (1) must exceed heartbeat_ticks"),
        ("[store.raft\n", "not valid TOML"),
        ("[store]\nraft = 3\n", "[store.raft] must be a table"),
    ],
)
def test_bad_values_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    """Each bad input is refused with a ConfigError that names the file, key and problem."""
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_raft_settings(f)
    assert message in str(err.value)
    assert str(f) in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a ConfigError naming the path."""
    with pytest.raises(ConfigError, match="no such file"):
        load_raft_settings(tmp_path / "absent.toml")
