"""Helpers for the kubectl compatibility tests: manifests, a bounded `kubectl get -w`, and the
columns of kubectl's table output."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tests.apiserver.support import ApiserverUnderTest, kubectl_binary

MINORS = (31, 32, 33)


def write(tmp: Path, name: str, obj: dict[str, Any]) -> str:
    """The object as a JSON manifest (YAML is a superset: kubectl reads it as either)."""
    path = tmp / name
    path.write_text(json.dumps(obj))
    return str(path)


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec},
    }


def deployment(name: str, replicas: int = 2, image: str = "nginx:1.27") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }


def rows(table_text: str) -> list[list[str]]:
    """kubectl's human table as cells (columns are separated by two or more spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in table_text.strip().splitlines()]


class Kubectl:
    """`kubectl.1.N` bound to the server: `k("get", "pods")` is stdout or the test fails."""

    def __init__(self, server: ApiserverUnderTest, minor: int, tmp: Path) -> None:
        self.server, self.minor, self.tmp = server, minor, tmp

    def __call__(self, *args: str, **kw: Any) -> str:
        return self.server.ok(*args, minor=self.minor, **kw)

    def fails(self, *args: str, **kw: Any) -> str:
        """kubectl's stderr; the test fails unless it exits non-zero."""
        proc = self.server.kubectl(*args, minor=self.minor, **kw)
        assert proc.returncode != 0, f"kubectl {' '.join(args)} succeeded:\n{proc.stdout}"
        return proc.stderr

    def file(self, obj: dict[str, Any]) -> str:
        return write(self.tmp, f"{obj['kind']}-{obj['metadata']['name']}.json", obj)


def json_of(k: Kubectl, *args: str) -> Any:
    return json.loads(k("get", *args, "-o", "json"))


class LineReader:
    """A running kubectl whose stdout lines arrive on a queue, read with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: queue.Queue[str | None] = queue.Queue()  # stderr (klog lines under -v=6)
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(proc.stderr, self.log), daemon=True).start()

    @staticmethod
    def _pump(stream: IO[str] | None, into: queue.Queue[str | None]) -> None:
        assert stream is not None
        for line in stream:
            into.put(line.rstrip("\n"))
        into.put(None)

    def watching(self, timeout: float = 15.0) -> None:
        """Wait until kubectl (run with -v=6) has its watch open: a change made after this is seen
        as an event, never missed by a kubectl that had not looked yet."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.log.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.stderr.append(line)
            if "watch=true" in line:
                return
        raise AssertionError(f"kubectl opened no watch within {timeout}s: {self.stderr[-5:]}")

    def stderr_text(self) -> str:
        while True:
            try:
                line = self.log.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.stderr.append(line)
        return "\n".join(self.stderr)

    def next_line(self, timeout: float = 15.0) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"kubectl printed nothing within {timeout}s") from None
        if line is None:
            raise AssertionError(f"kubectl ended (exit {self.proc.wait(5)}): {self.stderr_text()}")
        return line

    def wait_for(self, pattern: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            line = self.next_line(max(0.1, deadline - time.monotonic()))
            if re.search(pattern, line):
                return line
            seen.append(line)
            if time.monotonic() > deadline:
                raise AssertionError(f"no line matched {pattern!r}; saw {seen}")


@contextmanager
def kubectl_running(
    server: ApiserverUnderTest, *args: str, minor: int, env: dict[str, str] | None = None
) -> Iterator[LineReader]:
    """kubectl as a background process (get -w, wait), killed by pid at the end."""
    argv = [
        str(kubectl_binary(minor)),
        "--kubeconfig",
        str(server.kubeconfig),
        "--cache-dir",
        str(server.cache_dir),
        *args,
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    try:
        yield LineReader(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def finish(reader: LineReader, timeout: float = 20.0) -> tuple[int, str, str]:
    """Wait for a background kubectl to exit by itself: (exit code, rest of stdout, stderr)."""
    rc = reader.proc.wait(timeout=timeout)
    out: list[str] = []
    while True:
        line = reader.lines.get(timeout=5)
        if line is None:
            break
        out.append(line)
    return rc, "\n".join(out), reader.stderr_text()
