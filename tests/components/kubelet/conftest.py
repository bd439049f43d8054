"""The process runtime of a kubelet test: every container it started is stopped by pid after."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.kubelet.process_runtime import ProcessRuntime

WAIT_S = 15.0


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[ProcessRuntime]:
    rt = ProcessRuntime(tmp_path / "rt")
    yield rt
    left = [(u, c.name) for u in rt.running_pods() for c in (rt.root / "containers" / u).iterdir()]
    for uid, name in left:
        rt.stop(uid, name, 0.0, time.time())
    deadline = time.monotonic() + WAIT_S
    while any((s := rt.seen(u, n)) is not None and s.running for u, n in left):
        assert time.monotonic() < deadline, "containers outlived the test"
        time.sleep(0.05)
