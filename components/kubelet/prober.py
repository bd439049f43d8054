"""Running one probe: exec, httpGet or tcpSocket, within its timeout, as kube's prober does.

exec: the command runs with the container's environment and working directory (the process
runtime's "inside the container"); exit 0 passes, anything else or the timeout fails (the
command is killed).  httpGet: a GET to host (default the pod's IP), port (a number or the name
of a container port), path and headers; 200-399 passes; HTTPS is not verified, as kube does
not.  tcpSocket: a connection that opens passes.  grpc: the standard health service answers
SERVING (grpcprobe.py).  Every outcome comes with a short reason for the probe's event.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.kubelet import sandbox
from components.kubelet.probes import Probe

MAX_BODY = 10 * 1024  # kube reads at most this much of an HTTP probe's answer


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    reason: str = ""  # why it failed, in kube's words where it has them


def resolve_port(port: Any, container: Mapping[str, Any]) -> int | None:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) and not isinstance(port, bool):
        return port if 0 < port < 65536 else None
    if isinstance(port, str):
        if port.isdigit():
            return resolve_port(int(port), container)
        for p in container.get("ports") or ():
            if isinstance(p, Mapping) and p.get("name") == port:
                return resolve_port(p.get("containerPort"), container)
    return None


async def _exec(action: Mapping[str, Any], timeout: float, env: dict[str, str], cwd: str | None, pid: int) -> Outcome:
    command = action.get("command")
    if not isinstance(command, list) or not command:
        return Outcome(False, "exec probe has no command")
    try:
        proc = await asyncio.create_subprocess_exec(
            *[str(c) for c in command],
            env=env,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=sandbox.join(pid, cwd) if pid else None,  # inside the container's namespaces
        )
    except (OSError, subprocess.SubprocessError) as e:
        return Outcome(False, f"exec failed: {e}")
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return Outcome(False, f"command timed out after {timeout:g}s")
    if proc.returncode == 0:
        return Outcome(True)
    text = output[:MAX_BODY].decode(errors="replace").strip()
    return Outcome(False, f"command exited with {proc.returncode}" + (f": {text}" if text else ""))


async def _http(action: Mapping[str, Any], timeout: float, host: str, container: Mapping[str, Any]) -> Outcome:
    port = resolve_port(action.get("port"), container)
    if port is None:
        return Outcome(False, f"invalid port {action.get('port')!r}")
    host = str(action.get("host") or host)
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    context = None
    if str(action.get("scheme") or "HTTP").upper() == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    headers = {"Host": f"{host}:{port}", "User-Agent": "kube-probe/1.33", "Accept": "*/*", "Connection": "close"}
    for h in action.get("httpHeaders") or ():
        if isinstance(h, Mapping) and isinstance(h.get("name"), str):
            headers[h["name"]] = str(h.get("value") or "")
    request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, ssl=context)
            try:
                writer.write(request.encode("latin-1", "replace"))
                await writer.drain()
                status_line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
    except TimeoutError:
        return Outcome(False, f'Get "http://{host}:{port}{path}": context deadline exceeded')
    except (OSError, ssl.SSLError) as e:
        return Outcome(False, f'Get "http://{host}:{port}{path}": {e}')
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return Outcome(False, "HTTP probe got no status line")
    code = int(parts[1])
    if 200 <= code < 400:
        return Outcome(True)
    return Outcome(False, f"HTTP probe failed with statuscode: {code}")


async def _tcp(action: Mapping[str, Any], timeout: float, host: str, container: Mapping[str, Any]) -> Outcome:
    port = resolve_port(action.get("port"), container)
    if port is None:
        return Outcome(False, f"invalid port {action.get('port')!r}")
    host = str(action.get("host") or host)
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    except TimeoutError:
        return Outcome(False, f"dial tcp {host}:{port}: i/o timeout")
    except OSError as e:
        return Outcome(False, f"dial tcp {host}:{port}: {e.strerror or e}")
    return Outcome(True)


async def run(
    probe: Probe, container: Mapping[str, Any], pod_ip: str, env: dict[str, str], cwd: str | None, pid: int = 0
) -> Outcome:
    """One run of `probe` against `container`, never longer than its timeout (plus the kill)."""
    if probe.handler == "grpc":
        from components.kubelet import grpcprobe  # noqa: PLC0415 - grpcio (70 ms) loads when a pod has one

        failed = await grpcprobe.check(probe.action, probe.timeout, pod_ip)
        return Outcome(failed is None, failed or "")
    if probe.handler not in ("exec", "httpGet", "tcpSocket"):
        return Outcome(False, f"{probe.handler} probes are not supported by this kubelet")
    return await run_handler(probe.handler, probe.action, probe.timeout, container, pod_ip, env, cwd, pid)


async def run_handler(
    kind: str,
    action: Mapping[str, Any],
    timeout: float,
    container: Mapping[str, Any],
    pod_ip: str,
    env: dict[str, str],
    cwd: str | None,
    pid: int = 0,
) -> Outcome:
    """A probe's or a lifecycle hook's handler (hooks may also `sleep`), within `timeout`."""
    if kind == "exec":
        return await _exec(action, timeout, env, cwd, pid)
    if kind == "httpGet":
        return await _http(action, timeout, pod_ip, container)
    if kind == "tcpSocket":
        return await _tcp(action, timeout, pod_ip, container)
    if kind == "sleep":
        seconds = action.get("seconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
            return Outcome(False, f"sleep needs whole seconds, got {seconds!r}")
        await asyncio.sleep(min(float(seconds), timeout))
        return Outcome(True)
    return Outcome(False, f"{kind} handlers are not supported by this kubelet")
