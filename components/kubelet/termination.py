"""A container's termination message, as kube's kubelet makes it.

Each run of a container gets an empty file, writable by any user (the container may run as
one), bound at its `terminationMessagePath` (default /dev/termination-log).  When the run has
ended, its message is what it wrote there, at most 4 KiB; with `terminationMessagePolicy:
FallbackToLogsOnError`, a run that failed (exit code not 0) and wrote nothing has the end of
its log instead, at most 80 lines and 2 KiB (kube's MaxContainerTerminationMessageLogLines and
...LogLength).  A run that never started keeps the runtime's own message (StartError).

The files live in the pod's directory, `<pod>/termination/<container>/<attempt>`, so they go with
the pod; a container's files older than its previous run are removed when a new one starts,
so a container that restarts for days keeps two.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from components.kubelet import containerlog
from machinery.objects import Obj

DEFAULT_PATH = "/dev/termination-log"
FALLBACK = "FallbackToLogsOnError"
MAX_MESSAGE_BYTES = 4 * 1024
MAX_LOG_LINES = 80
MAX_LOG_BYTES = 2 * 1024


def path_of(pod_dir: Path, container: str, attempt: int) -> Path:
    return pod_dir / "termination" / container / str(attempt)


def file_for(pod_dir: Path, container: str, attempt: int) -> Path:
    """The empty file run `attempt` of `container` writes its message to, made now (and its
    container's files older than the previous run removed)."""
    base = path_of(pod_dir, container, attempt).parent
    base.mkdir(parents=True, exist_ok=True)
    for old in base.iterdir():
        if old.name.isdigit() and int(old.name) < attempt - 1:
            with contextlib.suppress(OSError):
                old.unlink()
    path = path_of(pod_dir, container, attempt)
    path.write_bytes(b"")
    path.chmod(0o666)  # the container's user may be anyone
    return path


def target_of(container: Obj) -> str:
    """Where in the container the file is bound (the apiserver has checked it is absolute)."""
    path = container.get("terminationMessagePath")
    return path if isinstance(path, str) and path.startswith("/") else DEFAULT_PATH


def message(container: Obj, file: Path | None, exit_code: int | None, log: str | None) -> str:
    """The ended run's message: its file's, else (FallbackToLogsOnError, failed) its log's end."""
    written = b""
    if file is not None:
        with contextlib.suppress(OSError), open(file, "rb") as f:
            written = f.read(MAX_MESSAGE_BYTES)
    if written or container.get("terminationMessagePolicy") != FALLBACK or exit_code in (0, None) or not log:
        return written.decode(errors="replace")
    try:
        entries = containerlog.read(Path(log), tail=MAX_LOG_LINES)
    except OSError:
        return ""
    text = b"\n".join(e.text for e in entries)  # a last line's own newline is not kept
    return text[-MAX_LOG_BYTES:].decode(errors="replace")
