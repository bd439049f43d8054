"""Which cluster a command means without --data-dir (store.cli.locate): the order, the state
file `up` writes, and a damaged state file refused with its name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from machinery.process.command import DEFAULT_DATA_DIR
from store.cli import locate
from tests.support.cli import raftkube


def _cluster(d: Path) -> Path:
    (d / "store").mkdir(parents=True)
    (d / "store" / "cluster.json").write_text('{"cluster_id": 1, "insecure": true, "members": []}\n')
    return d


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shell in an empty directory, with its own state dir and no RAFTKUBE_DATA_DIR."""
    monkeypatch.delenv(locate.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


def test_the_order_flag_env_cwd_state_default(user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert locate.find(None) == DEFAULT_DATA_DIR  # nothing anywhere
    recorded = _cluster(user / "far" / "rk")
    locate.remember(recorded)
    state = user / "state" / "raftkube" / "current"
    assert state.read_text() == f"{recorded}\n" and (state.stat().st_mode & 0o777) == 0o600
    assert locate.find(None) == recorded  # from any directory
    _cluster(Path(".raftkube"))
    assert locate.find(None) == DEFAULT_DATA_DIR  # the working directory's own comes first
    monkeypatch.setenv(locate.DATA_DIR_ENV, str(user / "env"))
    assert locate.find(None) == user / "env"
    assert locate.find(Path("flag")) == Path("flag")


def test_a_recorded_dir_without_a_cluster_is_not_used(user: Path) -> None:
    locate.remember(user / "gone")
    assert locate.find(None) == DEFAULT_DATA_DIR


@pytest.mark.parametrize("content", [b"relative/path\n", b"\xff\xfe\n", b"/a\n/b\n", b"/" + b"x" * 5000])
def test_a_damaged_state_file_is_refused_naming_it(user: Path, content: bytes) -> None:
    state = user / "state" / "raftkube" / "current"
    state.parent.mkdir(parents=True)
    state.write_bytes(content)
    with pytest.raises(locate.LocateError, match=str(state)):
        locate.find(None)
    env = {k: v for k, v in os.environ.items() if k != locate.DATA_DIR_ENV}
    proc = raftkube("status", cwd=Path.cwd(), env=env)
    assert proc.returncode == 2 and str(state) in proc.stderr and "Traceback" not in proc.stderr


def test_status_outside_any_cluster_names_where_it_looked(user: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != locate.DATA_DIR_ENV}
    proc = raftkube("status", cwd=Path.cwd(), env=env)
    assert proc.returncode == 2 and "no cluster in .raftkube" in proc.stderr
    proc = raftkube("restart", "apiserver", cwd=Path.cwd(), env=env)
    assert proc.returncode == 2 and "no part 'apiserver'" in proc.stderr and "cluster.toml" not in proc.stderr
