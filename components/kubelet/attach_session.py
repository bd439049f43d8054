"""One `kubectl attach` on the kubelet: the running container's output from now on, over the
same WebSocket channel protocol as exec (v5/v4/v1.channel.k8s.io).

What the container writes after the attach is read from its log as it grows (the log is where
the process runtime keeps a container's output: stdout lines on the stdout channel, stderr
lines on stderr) until the run ends or the client leaves; then the error channel says success.
The process runtime starts containers with /dev/null as stdin and no terminal, so an attach
asking for stdin or a tty is refused before the upgrade, in words kubectl shows (kube's own
runtimes refuse one to a container without `stdin`/`tty` likewise).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import WSMsgType, web

from components.kubelet import channels, containerlog

POLL_S = 0.2  # how often the log is read for new output


@dataclass(frozen=True, slots=True)
class AttachParams:
    stdout: bool
    stderr: bool


def parse_query(query: Mapping[str, str], container: str) -> AttachParams:
    """The attach options; ValueError says why this one cannot be served."""
    stdin, tty = channels.query_flag(query, "stdin"), channels.query_flag(query, "tty")
    if stdin:
        raise ValueError(
            f"stdin: container {container} has no stdin to attach to (this kubelet gives containers /dev/null)"
        )
    if tty:
        raise ValueError(f"tty: container {container} has no terminal (this kubelet's runtime allocates none)")
    params = AttachParams(channels.query_flag(query, "stdout"), channels.query_flag(query, "stderr"))
    if not (params.stdout or params.stderr):
        raise ValueError("you must specify at least one of stdin, stdout, stderr")
    return params


async def serve(
    request: web.Request, params: AttachParams, log: Path, running: Callable[[], bool]
) -> web.StreamResponse:
    """Relay what the run whose log is `log` writes from now on, while `running()`."""
    offered = channels.offered_in(request.headers.get("Sec-WebSocket-Protocol", ""))
    protocol = channels.choose(offered)
    if protocol is None:
        raise web.HTTPBadRequest(
            text=f"attach speaks {', '.join(channels.PROTOCOLS)} over WebSocket; offered: {offered or 'none'}\n"
        )
    follower = containerlog.Follower(log, since_ns=time.time_ns())
    follower.history()  # what was written before the attach is not the attach's
    ws = web.WebSocketResponse(protocols=(protocol,), autoping=True)
    await ws.prepare(request)
    await ws.send_bytes(channels.frame(channels.STDOUT if params.stdout else channels.STDERR))
    client = asyncio.create_task(_until_client_leaves(ws))
    try:
        while not client.done():
            ended = not running()  # looked at before the read: what it wrote last is still sent
            for entry in follower.poll():
                stream = channels.STDOUT if entry.stream == "stdout" else channels.STDERR
                if (stream == channels.STDOUT and params.stdout) or (stream == channels.STDERR and params.stderr):
                    await ws.send_bytes(channels.frame(stream, entry.text + b"\n"))
            if ended:
                last = channels.outcome_for(protocol, 0)
                if last is not None:
                    await ws.send_bytes(channels.frame(channels.ERROR, last))
                await ws.close()
                break
            await asyncio.wait({client}, timeout=POLL_S)
    except ConnectionError:
        pass
    finally:
        follower.close()
        client.cancel()
        await asyncio.gather(client, return_exceptions=True)
    return ws


async def _until_client_leaves(ws: web.WebSocketResponse) -> None:
    """Read (and drop: there is no stdin) what the client sends, until it closes."""
    async for msg in ws:
        if msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
            break
