"""Fixtures: a real cluster (three store members and the apiserver, `raftkube up`) per module."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.apiserver.support import ApiserverUnderTest, running_apiserver


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    """`raftkube up` on free ports: the admin kubeconfig is `cluster.kubeconfig`, the components'
    are under `cluster.data_dir / "apiserver" / "kubeconfigs"`."""
    with running_apiserver(tmp_path_factory.mktemp("cluster"), "raftkube") as server:
        yield server


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Component processes a test started (each in its own session): SIGKILLed and reaped after."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=10)
