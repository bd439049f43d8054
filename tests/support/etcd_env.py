"""What `raftkube store etcd-env` gives a shell: the ETCDCTL_* variables, read as a shell
would, for tests that run etcdctl against a store."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from tests.support.cli import raftkube


def exports(text: str) -> dict[str, str]:
    """The variables `export NAME=value` lines set (values as a shell would read them)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            out[name] = shlex.split(value)[0]
    return out


def etcdctl_env(data_dir: Path) -> dict[str, str]:
    """Our environment without the user's ETCDCTL_*, plus what `etcd-env` exports for the store."""
    proc = raftkube("store", "etcd-env", "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    return env | exports(proc.stdout)
