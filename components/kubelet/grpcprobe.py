"""A grpc probe: one call of the standard health service, `grpc.health.v1.Health/Check`, on the
pod's IP and the probe's port, as kube's prober makes it (plaintext, no authentication, the
probe's `service` in the request).  SERVING passes; any other status, a refused or slow
connection, or an error fails with kube's words.

The two messages are tiny (`HealthCheckRequest{string service = 1}`,
`HealthCheckResponse{ServingStatus status = 1}`), so they are encoded and decoded here rather
than generated: the answer comes from a process in a pod and is read as hostile input (its
size bounded, every varint checked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import grpc.aio

CHECK = "/grpc.health.v1.Health/Check"
MAX_REPLY = 4096  # a HealthCheckResponse is a few bytes; a bigger answer is refused unread
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1


class HealthReplyError(ValueError):
    """The answer is not a HealthCheckResponse."""


def encode_request(service: str) -> bytes:
    """HealthCheckRequest{service}: field 1, length-delimited (empty: the server as a whole)."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            raise HealthReplyError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise HealthReplyError("varint longer than 10 bytes")


def decode_status(data: bytes) -> int:
    """The `status` of a HealthCheckResponse (0, UNKNOWN, when absent; the last one wins, as
    protobuf has it); fields it does not know are skipped."""
    if len(data) > MAX_REPLY:
        raise HealthReplyError(f"answer of {len(data)} bytes")
    status, pos = 0, 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise HealthReplyError("field number 0")
        if wire == 0:
            value, pos = _read_varint(data, pos)
            if field == 1:
                status = value
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise HealthReplyError(f"wire type {wire}")
        if pos > len(data):
            raise HealthReplyError("truncated field")
    return status


async def check(action: Mapping[str, Any], timeout: float, host: str) -> str | None:
    """Run the grpc probe `action` ({port, service}) against `host` within `timeout`: None when
    the service is SERVING, else why it failed."""
    port = action.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        return f"invalid port {port!r}"
    service = action.get("service") or ""
    if not isinstance(service, str):
        return f"invalid service {service!r}"
    target = f"{host}:{port}"
    options = [("grpc.max_receive_message_length", MAX_REPLY), ("grpc.enable_retries", 0)]
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(CHECK, request_serializer=None, response_deserializer=None)
        try:
            reply = await call(encode_request(service), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"timeout: health rpc did not complete within {timeout:g}s"
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return f"timeout: failed to connect service {target!r} within {timeout:g}s"
            return f"rpc error: code = {e.code().name} desc = {e.details()}"
    try:
        status = decode_status(bytes(reply))
    except HealthReplyError as e:
        return f"rpc error: the answer is not a HealthCheckResponse: {e}"
    if status != SERVING:
        return f"service unhealthy (responded with {STATUS_NAMES.get(status, str(status))!r})"
    return None
