"""One `kubectl exec` on the kubelet: the WebSocket side of an `ExecProcess`.

After the upgrade the kubelet writes an empty message on the lowest stream it will write
(stdout, else stderr, else the error stream): that is how the client knows the session is
up.  Then stdin and resizes flow in, output flows out, and when the command has ended and its
output is drained the error stream carries the outcome (`channels.outcome`) and the server
closes.  A client that goes away takes the command down with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import WSMsgType, web

from components.kubelet import channels
from components.kubelet.exec_process import ExecProcess, ExecStartError

log = logging.getLogger("raftkube.kubelet.exec")
MAX_MESSAGE = 1 << 20
MAX_ARGS = 1024


@dataclass(frozen=True, slots=True)
class ExecParams:
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def parse_query(query: Mapping[str, str]) -> ExecParams:
    """The exec options (`command` repeated, one per argument); ValueError names the bad one."""
    getall = getattr(query, "getall", None)
    command = list(getall("command", [])) if getall else ([query["command"]] if "command" in query else [])
    if not command:
        raise ValueError("command: you must specify at least one command for the container")
    if len(command) > MAX_ARGS:
        raise ValueError(f"command: at most {MAX_ARGS} arguments, got {len(command)}")
    params = ExecParams(
        command,
        channels.query_flag(query, "stdin"),
        channels.query_flag(query, "stdout"),
        channels.query_flag(query, "stderr"),
        channels.query_flag(query, "tty"),
    )
    if not (params.stdin or params.stdout or params.stderr):
        raise ValueError("you must specify at least one of stdin, stdout, stderr")
    if params.tty and params.stderr:
        raise ValueError("stderr: cannot be true when tty is true (a terminal has one output)")
    return params


async def _send_outcome(ws: web.WebSocketResponse, protocol: str, exit_code: int | None, error: str = "") -> None:
    last = channels.outcome_for(protocol, exit_code, error)
    if last is not None:
        await ws.send_bytes(channels.frame(channels.ERROR, last))


async def serve(
    request: web.Request, params: ExecParams, env: dict[str, str], cwd: str | None, pid: int = 0, executable: str = ""
) -> web.StreamResponse:
    """`executable`: the host program that runs params.command (its argv[0] an image's name for
    it), "" for argv[0] itself."""
    offered = channels.offered_in(request.headers.get("Sec-WebSocket-Protocol", ""))
    protocol = channels.choose(offered)
    if protocol is None:
        raise web.HTTPBadRequest(
            text=f"exec speaks {', '.join(channels.PROTOCOLS)} over WebSocket; offered: {offered or 'none'}\n"
        )
    ws = web.WebSocketResponse(protocols=(protocol,), max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    first = channels.STDOUT if params.stdout else channels.STDERR if params.stderr else channels.ERROR
    await ws.send_bytes(channels.frame(first))
    try:
        process = await ExecProcess.start(
            params.command, env, cwd, tty=params.tty, stdin=params.stdin, pid=pid, executable=executable
        )
    except ExecStartError as e:
        await _send_outcome(ws, protocol, None, str(e))
        await ws.close()
        return ws
    reader = asyncio.create_task(_client_to_process(ws, process, protocol))
    writer = asyncio.create_task(_process_to_client(ws, process, params))
    try:
        done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        if writer in done and writer.exception() is None:
            await _send_outcome(ws, protocol, writer.result())
            await ws.close()
        # else the client left (or broke the protocol) while the command ran: it is killed
    except ConnectionError:
        pass
    finally:
        for task in (reader, writer):
            task.cancel()
        await asyncio.gather(reader, writer, return_exceptions=True)
        await process.close()
    return ws


async def _process_to_client(ws: web.WebSocketResponse, process: ExecProcess, params: ExecParams) -> int:
    """The command's output, then its exit code."""
    async for stream, data in process.output():
        if (stream == channels.STDOUT and params.stdout) or (stream == channels.STDERR and params.stderr):
            await ws.send_bytes(channels.frame(stream, data))
    return await process.wait()


async def _client_to_process(ws: web.WebSocketResponse, process: ExecProcess, protocol: str) -> None:
    """stdin, resizes and stream closes, until the client closes or breaks the protocol."""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY:
            if msg.type == WSMsgType.TEXT:
                log.info("exec: a text message on a binary protocol; closing")
                break
            continue
        try:
            message = channels.parse(msg.data, protocol)
            if message.stream == channels.STDIN:
                await process.write_stdin(message.data)
            elif message.stream == channels.RESIZE:
                process.resize(*channels.resize(message.data))
            elif message.stream == channels.CLOSE and message.data[0] == channels.STDIN:
                await process.close_stdin()
        except channels.ChannelError as e:
            log.info("exec: %s; closing", e)
            break
