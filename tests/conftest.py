"""Suite-wide guards.

* No cluster but the tests' own: every `raftkube` the suite runs (in-process or as a
  subprocess, which inherits the environment) finds no cluster unless a test names one with
  --data-dir: $RAFTKUBE_DATA_DIR points at an empty temporary path (not the checkout's
  `.raftkube/`, which the README's `raftkube up` creates), and $XDG_STATE_HOME at a temporary
  directory (not the developer's record of the last `up`: store.cli.locate).  A module that
  creates a cluster at that "no data dir given" path fails: a cluster there lends its
  certificates to every later command that names no data dir, and fails them in whatever
  order the modules run (a `store up` without --data-dir made `kv --endpoints` of a later module
  use the wrong CA).
* No process a test module starts (store members, apiservers, components, through
  store.launch.spawn) may outlive that module.  One left running is killed by pid and the
  module fails, naming it: a leaked process would load the machine for the rest of the run
  and hold ports and files.
* No mount outlives its module: a kubelet a test killed leaves its pods' IPC namespace files
  and Memory emptyDirs mounted in the test's temporary directory, as a crashed kubelet leaves
  them on a node (the next one, or `raftkube down`, takes them off).  Whatever is mounted under
  this session's temporary directory is taken off after each module, so that nothing holds
  memory or keeps pytest from removing the directory.  Only this session's: another session's
  (a second suite run beside this one) is not ours to touch."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.kubelet import tmpfs
from machinery.process import launch
from store.cli import locate

EXIT_GRACE_S = 10.0
NO_DATA_DIR = "no-data-dir-given"


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


@pytest.fixture(autouse=True, scope="session")
def no_cluster_but_the_tests_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    base = tmp_path_factory.mktemp("isolated")
    saved = {k: os.environ.get(k) for k in (locate.DATA_DIR_ENV, "XDG_STATE_HOME")}
    os.environ[locate.DATA_DIR_ENV] = str(base / NO_DATA_DIR)
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True, scope="module")
def no_cluster_where_none_was_given() -> Iterator[None]:
    yield
    unnamed = Path(os.environ.get(locate.DATA_DIR_ENV, ""))
    if unnamed.name == NO_DATA_DIR and unnamed.exists():
        made = sorted(str(p.relative_to(unnamed)) for p in unnamed.iterdir())
        shutil.rmtree(unnamed, ignore_errors=True)
        pytest.fail(f"this module made {made} in $RAFTKUBE_DATA_DIR (name a --data-dir): removed now", pytrace=False)


@pytest.fixture(autouse=True, scope="module")
def no_process_outlives_its_module() -> Iterator[None]:
    before = set(launch._children)
    yield
    leaked = []
    for pid, proc in list(launch._children.items()):
        if pid in before:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=EXIT_GRACE_S)  # one told to stop may still be on its way out
        if proc.poll() is not None:
            launch._children.pop(pid, None)
            continue
        leaked.append(f"{pid}: {_command(pid)[:200]}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=10)
        launch._children.pop(pid, None)
    if leaked:
        pytest.fail("processes outlived their test module (killed now):\n" + "\n".join(leaked), pytrace=False)


@pytest.fixture(autouse=True, scope="module")
def no_mount_outlives_its_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    if os.geteuid() == 0:  # nobody else can mount
        tmpfs.unmount_under(tmp_path_factory.getbasetemp())
