"""The fresh cluster a conformance run tests: `raftkube up --detach --free-ports` in a
temporary data dir, started as a user starts it, and always torn down at the end.

`raftkube down` stops every part by its pid file (the supervising `up` first, so nothing is
restarted behind it; kubelets' containers too).  What it might miss (a part that lost its
pid file) is found by pid afterwards: every process of the cluster names the data dir on its
command line, and the data dir is this run's own temporary folder.  The cluster's logs are
copied into the report folder before the data dir is removed: failures are read there.
The `up` runs with its own XDG_STATE_HOME, so the user's current cluster (the one `raftkube
status` finds) is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from apiserver.launcher import LocalApiserver
from machinery.process.launch import child_env

UP_TIMEOUT_S = 420.0
DOWN_TIMEOUT_S = 120.0
LINGER_S = 10.0
"""How long processes left after `down` get to end on SIGTERM before SIGKILL."""


class ClusterError(Exception):
    """The fresh cluster did not start: the run stops (exit 1) with `up`'s output."""


def _raftkube(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "components.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def processes_naming(folder: Path) -> list[int]:
    """Pids (not ours) whose command line names `folder`."""
    needle = str(folder).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def kill_leftovers(folder: Path, say: Callable[[str], None]) -> None:
    """SIGTERM, then SIGKILL, each process still naming `folder`, by pid."""
    left = processes_naming(folder)
    if not left:
        return
    say(f"conformance: {len(left)} process(es) of the cluster outlived `raftkube down`: stopping pids {left}")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + LINGER_S
        while time.monotonic() < deadline:
            left = [pid for pid in left if pid in processes_naming(folder)]
            if not left:
                return
            time.sleep(0.2)


def copy_logs(data_dir: Path, into: Path) -> None:
    """Every `*.log` of the cluster, same relative paths, into `into` (best effort)."""
    for log in data_dir.rglob("*.log"):
        with contextlib.suppress(OSError):
            target = into / log.relative_to(data_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, target)


# programs the agnhost and jessie-dnsutils images carry that specs run through `kubectl exec ...
# /bin/sh -c`, and the Debian package of each (our containers run the host's programs)
IMAGE_TOOLS = {"nc": "netcat-openbsd", "curl": "curl", "dig": "bind9-dnsutils", "nslookup": "bind9-dnsutils"}


def missing_image_tools() -> dict[str, str]:
    """The tools of IMAGE_TOOLS not on PATH, with their packages."""
    return {tool: package for tool, package in IMAGE_TOOLS.items() if shutil.which(tool) is None}


@contextlib.contextmanager
def fresh_cluster(
    config: Path, logs_into: Path, say: Callable[[str], None], pod_network: str = "host"
) -> Iterator[Path]:
    """A fresh cluster for the duration of the block, its pods on `pod_network`; yields its
    admin kubeconfig."""
    tmp = Path(tempfile.mkdtemp(prefix="raftkube-conformance-"))
    data_dir = tmp / "cluster"
    env = child_env({"XDG_STATE_HOME": str(tmp / "state")})
    up = ["up", "--detach", "--free-ports", "--data-dir", str(data_dir)]
    if config.is_file():
        up += ["--config", str(config.resolve())]
    up += ["--pod-network", pod_network]
    missing = missing_image_tools()
    if missing:
        say(
            "conformance: the e2e images' tools this host lacks (containers run the host's programs):"
            f" {', '.join(missing)}; specs that exec them fail"
            f" (apt-get install {' '.join(sorted(set(missing.values())))})"
        )
    try:
        say(f"conformance: starting a fresh cluster in {data_dir} (raftkube {' '.join(up)})")
        started = time.monotonic()
        try:
            proc = _raftkube(up, env, UP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"`raftkube up` did not return within {UP_TIMEOUT_S:.0f} s") from None
        if proc.returncode != 0:
            raise ClusterError(f"`raftkube up` failed (exit {proc.returncode}):\n{proc.stderr}{proc.stdout}")
        say(f"conformance: the cluster is ready in {time.monotonic() - started:.0f} s")
        yield LocalApiserver(data_dir).kubeconfig
    finally:
        if data_dir.exists():
            with contextlib.suppress(subprocess.TimeoutExpired):
                down = _raftkube(["down", "--data-dir", str(data_dir)], env, DOWN_TIMEOUT_S)
                if down.returncode != 0:
                    say(f"conformance: `raftkube down` failed: {down.stderr.strip()[:500]}")
        kill_leftovers(data_dir, say)
        copy_logs(data_dir, logs_into)
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"conformance: the cluster is stopped (its logs: {logs_into})")
