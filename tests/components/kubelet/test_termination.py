"""Termination messages: the file each run writes its message to (bound at its
terminationMessagePath, writable by any user), read when the run has ended, and the log's end
for FallbackToLogsOnError; then with real containers through the pod worker, as conformance's
"Container Runtime blackbox test on terminated container" specs run them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from components.kubelet import containerlog, termination
from components.kubelet.envvars import Sources
from components.kubelet.podvolumes import PodVolumes
from components.kubelet.podworker import PodWorker
from components.kubelet.process_runtime import ProcessRuntime
from machinery.objects import Obj
from tests.support.wait import until

FALLBACK = {"terminationMessagePolicy": "FallbackToLogsOnError"}
MARK = uuid.uuid4().hex[:8]  # what the containers write, so that the host's /dev is seen not to get it


def a_log(tmp_path: Path, lines: list[bytes]) -> str:
    path = tmp_path / "0.log"
    writer = containerlog.LogWriter(path)
    for line in lines:
        writer.write("stdout", line)
    writer.close()
    return str(path)


def test_a_run_keeps_two_files_each_empty_and_writable_by_anyone(tmp_path: Path) -> None:
    for attempt in range(4):
        file = termination.file_for(tmp_path, "app", attempt)
        assert file.read_bytes() == b"" and file.stat().st_mode & 0o777 == 0o666
        file.write_text(f"run {attempt}")
    assert sorted(p.name for p in (tmp_path / "termination" / "app").iterdir()) == ["2", "3"]


def test_the_message_is_the_files_else_a_failed_runs_log_end_with_fallback(tmp_path: Path) -> None:
    file = tmp_path / "message"
    file.write_bytes(b"x" * 5000)
    assert termination.message({}, file, 0, None) == "x" * termination.MAX_MESSAGE_BYTES
    file.write_bytes(b"")
    log = a_log(tmp_path, [f"line {i}\n".encode() for i in range(100)] + [b"DONE"])
    assert termination.message({}, file, 1, log) == ""  # policy File: the file or nothing
    assert termination.message(FALLBACK, file, 0, log) == ""  # succeeded: nothing to fall back for
    tail = termination.message(FALLBACK, file, 1, log)
    assert tail.endswith("line 99\nDONE") and tail.count("\n") == termination.MAX_LOG_LINES - 1
    long = a_log(tmp_path, [b"y" * 3000 + b"\n"])
    assert termination.message(FALLBACK, None, 2, long) == "y" * termination.MAX_LOG_BYTES
    file.write_bytes(b"OK")
    assert termination.message(FALLBACK, file, 1, log) == "OK"  # the file wins


def worker(runtime: ProcessRuntime, pod: Obj) -> PodWorker:
    uid = pod["metadata"]["uid"]
    volumes = PodVolumes(runtime.root / "pods" / uid / "volumes")
    return PodWorker(pod, runtime, Sources(lambda ns, n: None, lambda ns, n: None), "127.0.0.1", volumes=volumes)


def terminated(w: PodWorker) -> Any:
    def step() -> Any:
        w.sync(time.time())
        [status] = w.status(time.time())["containerStatuses"]
        return status["state"].get("terminated")

    return until("the container to end", step)


@pytest.mark.parametrize(
    ("container", "want"),
    [
        ({"args": [f"/bin/echo -n OK{MARK} > /dev/termination-log; /bin/echo DONE; /bin/true"], **FALLBACK}, "OK"),
        ({"args": [f"/bin/echo -n DONE{MARK}; /bin/false"], **FALLBACK}, "DONE"),
        ({"args": [f"/bin/echo -n DONE{MARK}; /bin/true"], **FALLBACK}, ""),
        (
            {
                "args": [f"/bin/echo -n DONE{MARK} > /dev/termination-custom-log"],
                "terminationMessagePath": "/dev/termination-custom-log",
                "securityContext": {"runAsUser": 1000},
            },
            "DONE",
        ),
    ],
)
def test_a_containers_termination_message_reaches_its_status(
    runtime: ProcessRuntime, container: Obj, want: str
) -> None:
    spec = {"name": "c", "image": "busybox", "command": ["/bin/sh", "-c"], **container}
    pod = {
        "metadata": {"name": "t", "namespace": "ns", "uid": "t1"},
        "spec": {"restartPolicy": "Never", "containers": [spec]},
    }
    state = terminated(worker(runtime, pod))
    assert state.get("message", "") == (want and want + MARK), state
    for host_file in (Path("/dev/termination-log"), Path("/dev/termination-custom-log")):
        assert not host_file.exists() or MARK not in host_file.read_text(errors="replace")  # bound, not written
