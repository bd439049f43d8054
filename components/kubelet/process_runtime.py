"""The `process` runtime: each container is a local process kept by a shim (`shim.py`).

Layout under the runtime's root, one directory per container run:

    containers/<pod uid>/<container>/<attempt>/   spec.json state.json exit.json (the shim's)
    logs/<namespace>_<pod>_<uid>/<container>/<attempt>.log                (kube's log layout)

`start` writes the spec and starts the shim in a session of its own; `seen` reads the run's
files (running while the shim lives and no exit.json exists); `stop` sends SIGTERM through
the shim and, once `grace_s` has passed, SIGKILL to the whole container (`tick` escalates, so
nothing here blocks).  A kubelet that restarts finds every run on disk: a live shim is
adopted as it is, a finished one reports its recorded exit (a shim is nobody's child but
init's, so there is nothing to reap and nothing to hand over).  Runs of a pod are removed with
`remove_pod` once the pod is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from components.kubelet import podnet, tmpfs
from components.kubelet.sandbox import Sandbox
from components.kubelet.shim import EXIT, SHIM, SPEC, STATE, write_json

KILLED_EXIT = 137  # what a SIGKILLed container reports (128 + 9)
START_TIMEOUT_S = 10.0
ORPHAN_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class RunState:
    """One container run as its files say."""

    attempt: int
    running: bool
    started_at: str = ""
    exit_code: int | None = None
    finished_at: str = ""
    reason: str = ""
    message: str = ""
    log: str = ""
    meta: Any = None  # what the caller recorded with the run (its spec hash, image)


class ExecContext(NamedTuple):
    """What a command run inside a running container needs: its environment, working dir, and
    the pid of its main process (whose namespaces the command joins)."""

    env: dict[str, str]
    cwd: str | None
    pid: int


def _read(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def _alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class ProcessRuntime:
    needs_command = True  # a container is a process: its image goes through the image table

    def __init__(self, root: Path) -> None:
        self.root = root
        self._stopping: dict[str, tuple[float, int]] = {}  # run dir -> (kill deadline, shim pid)

    def _run_dir(self, uid: str, container: str, attempt: int) -> Path:
        return self.root / "containers" / uid / container / str(attempt)

    def log_path(self, namespace: str, pod: str, uid: str, container: str, attempt: int) -> Path:
        return self.root / "logs" / f"{namespace}_{pod}_{uid}" / container / f"{attempt}.log"

    def attempts(self, uid: str, container: str) -> list[int]:
        base = self.root / "containers" / uid / container
        if not base.is_dir():
            return []
        return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())

    def start(
        self,
        namespace: str,
        pod: str,
        uid: str,
        container: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        meta: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
        executable: str | None = None,
    ) -> int:
        """Start the container's next run; its attempt number (the restart count).  `executable`:
        the program to run when argv[0] is a name it must see that is not its path on this host
        (an image's `/agnhost-2`)."""
        if not argv:
            raise ValueError(f"container {container}: nothing to run (no command)")
        done = self.attempts(uid, container)
        attempt = done[-1] + 1 if done else 0
        run = self._run_dir(uid, container, attempt)
        run.mkdir(parents=True, mode=0o700)
        log = self.log_path(namespace, pod, uid, container, attempt)
        spec = {"argv": argv, "env": env, "cwd": cwd, "log": str(log), "meta": meta or {}}
        if executable:
            spec["executable"] = executable
        if sandbox is not None:
            spec["sandbox"] = sandbox.to_json()
        write_json(run / SPEC, spec)
        errors = os.open(run / "shim.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            shim = subprocess.Popen(
                [sys.executable, "-m", "components.kubelet.shim", str(run)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            )
        finally:
            os.close(errors)  # the shim has its own copy
        try:
            code = shim.wait(timeout=START_TIMEOUT_S)  # it forks its keeper and ends at once
        except subprocess.TimeoutExpired:
            shim.kill()
            shim.wait()
            raise RuntimeError(
                f"container {container}: the shim did not start within {START_TIMEOUT_S:.0f} s"
            ) from None
        if code != 0 or not (run / SHIM).exists():
            raise RuntimeError(f"container {container}: the shim failed (exit {code}); see {run / 'shim.err'}")
        return attempt

    def seen(self, uid: str, container: str, attempt: int | None = None) -> RunState | None:
        """The latest run (or the given one) of a container; None when it never ran."""
        if attempt is None:
            runs = self.attempts(uid, container)
            if not runs:
                return None
            attempt = runs[-1]
        run = self._run_dir(uid, container, attempt)
        spec = _read(run / SPEC) or {}
        finished = _read(run / EXIT)
        if isinstance(finished, dict):
            return RunState(
                attempt,
                False,
                str(finished.get("startedAt") or ""),
                int(finished.get("exitCode", 128)),
                str(finished.get("finishedAt") or ""),
                str(finished.get("reason") or ""),
                str(finished.get("message") or ""),
                str(spec.get("log") or ""),
                spec.get("meta"),
            )
        state = _read(run / STATE) or {}
        shim_pid = int((_read(run / SHIM) or {}).get("shimPid") or 0)
        if shim_pid and _alive(shim_pid):
            return RunState(
                attempt, True, str(state.get("startedAt") or ""), log=str(spec.get("log") or ""), meta=spec.get("meta")
            )
        # the shim is gone without a word: killed with its container (SIGKILL reaches both)
        return RunState(
            attempt,
            False,
            str(state.get("startedAt") or ""),
            KILLED_EXIT,
            "",
            "Error",
            "",
            str(spec.get("log") or ""),
            spec.get("meta"),
        )

    def exec_context(self, uid: str, container: str) -> ExecContext | None:
        """The environment and working dir of the container's running run (what `kubectl exec`
        runs a command with); None when it does not run."""
        state = self.seen(uid, container)
        if state is None or not state.running:
            return None
        spec = _read(self._run_dir(uid, container, state.attempt) / SPEC) or {}
        env = spec.get("env")
        cwd = spec.get("cwd")
        return ExecContext(
            {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            cwd if isinstance(cwd, str) and cwd else None,
            self.main_pid(uid, container),
        )

    def main_pid(self, uid: str, container: str) -> int:
        """The pid of the container's running main process; 0 when none runs."""
        runs = self.attempts(uid, container)
        if not runs:
            return 0
        run = self._run_dir(uid, container, runs[-1])
        if (run / EXIT).exists():
            return 0
        pid = int((_read(run / STATE) or {}).get("pid") or 0)
        return pid if pid and _alive(pid) else 0

    def stop(self, uid: str, container: str, grace_s: float, now: float) -> None:
        """SIGTERM the container now; SIGKILL it if it still runs `grace_s` later (see `tick`)."""
        runs = self.attempts(uid, container)
        if not runs:
            return
        run = self._run_dir(uid, container, runs[-1])
        shim_pid = int((_read(run / SHIM) or {}).get("shimPid") or 0)
        if not shim_pid or not _alive(shim_pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(shim_pid, signal.SIGTERM)  # the shim forwards it to the container's group
        self._stopping.setdefault(str(run), (now + max(0.0, grace_s), shim_pid))
        if grace_s <= 0:
            self.tick(now)

    def tick(self, now: float) -> None:
        """SIGKILL the containers that outlived their grace period (their whole process group;
        the shim then records 137 and exits)."""
        for run, (deadline, shim_pid) in list(self._stopping.items()):
            if _alive(shim_pid) and now < deadline:
                continue
            del self._stopping[run]
            if not _alive(shim_pid):
                continue
            pid = int((_read(Path(run) / STATE) or {}).get("pid") or 0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if pid:
                    os.killpg(pid, signal.SIGKILL)
                else:  # the container never started: the shim is all there is
                    os.kill(shim_pid, signal.SIGKILL)

    def stop_all(self, grace_s: float, timeout_s: float) -> int:
        """Stop every container that runs under this root (SIGTERM, SIGKILL after `grace_s`);
        wait at most `timeout_s`, then take the pods' tmpfs volumes off (their contents go, as at
        a reboot: the directories stay, and a kubelet started again mounts them afresh) and remove
        the pods' network namespaces and the node's bridge if it has a pod network (PodNetError
        when that fails).  How many were running.  For `raftkube down`: no process, no mount and
        no pod network left, so that the data dir can be removed."""
        runs = [
            (uid, c.name)
            for uid in self.running_pods()
            for c in (self.root / "containers" / uid).iterdir()
            if (s := self.seen(uid, c.name)) is not None and s.running
        ]
        start = time.monotonic()
        for uid, name in runs:
            self.stop(uid, name, grace_s, start)
        while time.monotonic() - start < timeout_s:
            self.tick(time.monotonic())
            if not any((s := self.seen(u, n)) is not None and s.running for u, n in runs):
                break
            time.sleep(0.05)
        tmpfs.unmount_under(self.root / "pods")
        podnet.teardown_all(self.root)
        return len(runs)

    def running_pods(self) -> list[str]:
        """The pod uids with runs on disk (to adopt after a restart, or to clean up)."""
        base = self.root / "containers"
        return sorted(p.name for p in base.iterdir()) if base.is_dir() else []

    def remove_orphan(self, uid: str) -> None:
        """A pod this node no longer has, found on disk (deleted while its kubelet was down):
        its containers killed at once, its runs and logs removed once their shims have ended
        (at most `ORPHAN_WAIT_S`: a shim still writing its exit would leave a run behind; one
        left is found and removed again next time)."""
        base = self.root / "containers" / uid
        names = [c.name for c in base.iterdir()] if base.is_dir() else []
        for name in names:
            self.stop(uid, name, 0.0, time.monotonic())
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while any((s := self.seen(uid, n)) is not None and s.running for n in names):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        shutil.rmtree(base, ignore_errors=True)
        for logs in (self.root / "logs").glob(f"*_{uid}"):
            shutil.rmtree(logs, ignore_errors=True)

    def remove_pod(self, uid: str, namespace: str, pod: str) -> None:
        """Forget a pod whose containers have all stopped: its runs and its logs."""
        shutil.rmtree(self.root / "containers" / uid, ignore_errors=True)
        shutil.rmtree(self.root / "logs" / f"{namespace}_{pod}_{uid}", ignore_errors=True)
