"""Which cluster a command means when it is not given `--data-dir`.

Commands that act on a running cluster (`status`, `down`, `logs`, `restart`, `store ...`,
`kv ...`, `user ...`) work from any directory, in this order:

1. `--data-dir DIR`;
2. `$RAFTKUBE_DATA_DIR` (as `KUBECONFIG` names kubectl's cluster);
3. `.raftkube/` in the working directory, when it holds a cluster (the checkout's own);
4. the cluster the last `raftkube up` started, recorded in
   `$XDG_STATE_HOME/raftkube/current` (default `~/.local/state/raftkube/current`), as
   minikube keeps its active profile and kubectl its current context;
5. else `.raftkube/` (whose absence the command then reports).

`raftkube up` and `store up` create a cluster where they are told (1, 2, then cluster.toml's
`data_dir`, default `.raftkube/`): the state file only helps to find one again.  The suite
sets both variables to its own temporary paths (tests/conftest.py), so no test finds a
developer's cluster, nor the checkout's `.raftkube/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from machinery.process import disk
from machinery.process.command import DEFAULT_DATA_DIR

DATA_DIR_ENV = "RAFTKUBE_DATA_DIR"
STATE_FILE = "current"
MAX_STATE_BYTES = 4096


class LocateError(Exception):
    """The state file or the environment names no usable directory; the message says which."""


def given(flag: Path | None) -> Path | None:
    """`--data-dir`, else `$RAFTKUBE_DATA_DIR`, else None (nothing named explicitly)."""
    if flag is not None:
        return flag
    env = os.environ.get(DATA_DIR_ENV, "")
    return Path(env) if env else None


def find(flag: Path | None) -> Path:
    """The data dir a command acts on (see the module docstring for the order)."""
    explicit = given(flag)
    if explicit is not None:
        return explicit
    if _holds_cluster(DEFAULT_DATA_DIR):
        return DEFAULT_DATA_DIR
    current = recorded()
    return current if current is not None else DEFAULT_DATA_DIR


def state_file() -> Path | None:
    """`$XDG_STATE_HOME/raftkube/current`, or under `~/.local/state`; None without a home."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        try:
            base = str(Path.home() / ".local" / "state")
        except RuntimeError:
            return None
    return Path(base) / "raftkube" / STATE_FILE


def recorded() -> Path | None:
    """The data dir the last `raftkube up` recorded, if that still holds a cluster."""
    path = state_file()
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_STATE_BYTES + 1)
    except OSError:
        return None
    try:
        text = raw.decode().strip()
    except UnicodeDecodeError:
        raise LocateError(f"{path}: not UTF-8; remove it or give --data-dir") from None
    if len(raw) > MAX_STATE_BYTES or "\n" in text or not os.path.isabs(text):
        raise LocateError(f"{path}: expected one absolute path of at most {MAX_STATE_BYTES} bytes; remove it")
    found = Path(text)
    return found if _holds_cluster(found) else None


def remember(data_dir: Path) -> None:
    """Record `data_dir` (absolute) as the current cluster; best effort (a read-only home
    only loses the convenience)."""
    path = state_file()
    if path is None:
        return
    try:
        disk.make_dirs(path.parent)
        disk.write_private(path, f"{data_dir.resolve()}\n".encode())
    except OSError:
        pass


def _holds_cluster(d: Path) -> bool:
    return (d / "store" / "cluster.json").is_file() or (d / "apiserver" / "apiserver.json").is_file()


__all__ = ["DATA_DIR_ENV", "LocateError", "find", "given", "recorded", "remember", "state_file"]
