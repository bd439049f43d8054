"""Kubernetes' channel protocol for exec and attach over WebSocket (`v5.channel.k8s.io`, and
`v4.channel.k8s.io` and the unversioned `channel.k8s.io` for older clients).

Every binary message is one byte naming the stream, then that stream's bytes: 0 stdin (client
to server), 1 stdout, 2 stderr, 3 the error stream (the outcome as a `metav1.Status`, then the
server closes), 4 terminal resizes (`{"Width": w, "Height": h}`).  v5 adds 255: a peer that
has no more to send on a stream says so with `[255, stream]` (how the client ends stdin).
The unversioned protocol (v1, what golang.org/x/net/websocket clients such as the conformance
suite offer) has no Status: its error stream says nothing on success and the error's text
otherwise.  This module is the pure part: choosing the protocol, framing, parsing, the outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
V5, V4, V1 = "v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"
PROTOCOLS = (V5, V4, V1)  # what we speak, best first
MAX_DIMENSION = 10_000  # rows or columns: more is not a terminal


class ChannelError(ValueError):
    """A message the protocol does not allow; the session ends with it."""


def offered_in(header: str) -> list[str]:
    """The subprotocols a client offers in its Sec-WebSocket-Protocol header."""
    return [p.strip() for p in header.split(",") if p.strip()]


def query_flag(query: Mapping[str, str], name: str) -> bool:
    """A session's boolean option (`stdin=true`) as kube reads it; ValueError names a bad one."""
    value = (query.get(name) or "").lower()
    if value in ("", "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise ValueError(f"{name}: must be true or false, got {query.get(name)!r}")


def choose(offered: list[str] | tuple[str, ...]) -> str | None:
    """The protocol to answer with: the best one we speak among those offered, else None."""
    wanted = {p.strip() for p in offered}
    return next((p for p in PROTOCOLS if p in wanted), None)


def frame(stream: int, data: bytes = b"") -> bytes:
    return bytes((stream,)) + data


@dataclass(frozen=True, slots=True)
class Message:
    stream: int
    data: bytes


def parse(message: bytes, protocol: str) -> Message:
    """A client's message: stdin data, a resize, or (v5) the close of a stream."""
    if not message:
        raise ChannelError("an empty message names no stream")
    stream, data = message[0], bytes(message[1:])
    if stream == CLOSE and protocol == V5:
        if len(data) != 1:
            raise ChannelError(f"a close message names one stream, got {len(data)} bytes")
        return Message(CLOSE, data)
    if stream not in (STDIN, RESIZE):
        raise ChannelError(f"a client may write stdin (0) and resize (4), not stream {stream}")
    return Message(stream, data)


def resize(data: bytes) -> tuple[int, int]:
    """(columns, rows) from a resize message."""
    try:
        value = orjson.loads(data)  # kubectl ends it with a newline; JSON allows the whitespace
    except orjson.JSONDecodeError:
        raise ChannelError('a resize message must be JSON {"Width": w, "Height": h}') from None
    if not isinstance(value, dict):
        raise ChannelError("a resize message must be a JSON object")
    width, height = value.get("Width"), value.get("Height")
    for name, n in (("Width", width), ("Height", height)):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_DIMENSION:
            raise ChannelError(f"resize {name} must be an integer from 0 to {MAX_DIMENSION}, got {n!r}")
    assert isinstance(width, int) and isinstance(height, int)
    return width, height


def outcome_for(protocol: str, exit_code: int | None, error: str = "") -> bytes | None:
    """The error stream's last message in `protocol`, None when it says nothing (v1 on success)."""
    status = outcome(exit_code, error)
    if protocol != V1:
        return status
    if exit_code == 0 and not error:
        return None
    return str(orjson.loads(status)["message"]).encode()


def outcome(exit_code: int | None, error: str = "") -> bytes:
    """The error stream's last word, as kube's kubelet writes it: Success for exit 0, a
    NonZeroExitCode failure carrying the code (kubectl exits with it), or an internal error
    when the command could not run at all."""
    if error:  # kube's kubelet: an InternalError, which kubectl prints as `error: <message>`
        message = f"Internal error occurred: error executing command in container: {error}"
        return orjson.dumps(
            {
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "InternalError",
                "details": {"causes": [{"message": error}]},
                "code": 500,
            }
        )
    if exit_code == 0:
        return orjson.dumps({"metadata": {}, "status": "Success"})
    return orjson.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command, exit code {exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
        }
    )
