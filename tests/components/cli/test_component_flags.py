"""cluster.toml's [controller_manager] and [scheduler] args: checked by each component's own
parser when `up` reads the file, refused with the file and key named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components.cli.component_flags import ComponentFlags, load_component_flags
from machinery.process.config import MAX_LIST_ITEMS, ConfigError
from tests.support.cli import raftkube
from tests.support.paths import HOST_NETWORK, ROOT


def test_the_shipped_file_and_a_missing_one_give_no_flags(tmp_path: Path) -> None:
    none = {"controller-manager": ComponentFlags(), "scheduler": ComponentFlags()}
    assert load_component_flags(ROOT / "cluster.toml") == none
    assert load_component_flags(tmp_path / "absent.toml") == none


def test_the_cluster_commands_load_no_component_to_read_the_shipped_file() -> None:
    """`up`, `down` and `status` import components.cli.cluster; the controller-manager (all its
    controllers: 0.45 s) and the scheduler are imported only to check flags a file gives them."""
    probe = (
        "import sys\nfrom components.cli import cluster\nfrom components.cli.component_flags import"
        " load_component_flags\nfrom tests.support.paths import ROOT\nload_component_flags(ROOT / 'cluster.toml')\n"
        "print(sorted(m for m in sys.modules if m.startswith(('components.controller', 'components.scheduler',"
        " 'components.kubelet.hollow'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout


def test_flags_the_components_know_are_taken_as_given(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(
        '[controller_manager]\nargs = ["--node-monitor-grace-period", "15", "--controllers=*,-cronjob"]\n'
        '[scheduler]\nargs = ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3"]\n'
        "replicas = 2\n"
    )
    assert load_component_flags(path) == {
        "controller-manager": ComponentFlags(args=("--node-monitor-grace-period", "15", "--controllers=*,-cronjob")),
        "scheduler": ComponentFlags(
            args=("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3"), replicas=2
        ),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[scheduler]\nargs = ["--no-such-flag"]\n', r"scheduler\.args: unrecognized arguments: --no-such-flag"),
        (
            '[controller_manager]\nargs = ["--node-monitor-grace-period", "soon"]\n',
            r"controller_manager\.args: argument --node-monitor-grace-period: invalid float value: 'soon'",
        ),
        (
            '[controller_manager]\nargs = ["--node-monitor-grace-period", "-1"]\n',
            r"controller_manager\.args: --node-monitor-grace-period must be a positive number of seconds",
        ),
        (
            '[scheduler]\nargs = ["--leader-elect-lease-duration", "2", "--leader-elect-renew-deadline", "3"]\n',
            r"scheduler\.args: .*lease.*",
        ),
        ('[scheduler]\nargs = ["--kubeconfig=/etc/other"]\n', r"--kubeconfig is set by `raftkube up`"),
        ('[controller_manager]\nargs = ["--health-port", "1"]\n', r"--health-port is set by `raftkube up`"),
        ('[scheduler]\nargs = "--verbose"\n', r"scheduler\.args must be a list of strings, got '--verbose'"),
        ("[scheduler]\nargs = [1]\n", r"scheduler\.args must be a list of strings"),
        ('[scheduler]\nflags = ["-v"]\n', r"scheduler has unknown keys: flags"),
        ("[scheduler]\nreplicas = 4\n", r"scheduler\.replicas must be at most 3, got 4"),
        ("[controller_manager]\nreplicas = 0\n", r"controller_manager\.replicas must be positive, got 0"),
        ('[scheduler]\nargs = ["-v\\u0000"]\n', r"scheduler\.args\[0\] must be at most 4096 characters with no NUL"),
        ("[scheduler]\nargs = [" + ", ".join(['"-v"'] * (MAX_LIST_ITEMS + 1)) + "]\n", r"at most 256 strings, got 257"),
    ],
)
def test_a_flag_the_component_would_refuse_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        load_component_flags(path)
    assert str(path) in str(e.value)


def test_up_refuses_the_file_before_starting_anything(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(
        HOST_NETWORK + '[store]\nmembers = 1\n[controller_manager]\nargs = ["--node-monitor-grace-period=0"]\n'
    )
    data_dir = tmp_path / "rk"
    for detach in ((), ("--detach",)):
        proc = raftkube("up", *detach, "--free-ports", "--data-dir", str(data_dir), "--config", str(config), timeout=60)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert f"{config}: controller_manager.args: --node-monitor-grace-period must be" in proc.stderr
        assert not data_dir.exists()
