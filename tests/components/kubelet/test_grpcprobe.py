"""The kubelet's grpc probe against a real gRPC health server on 127.0.0.1: SERVING passes, any
other status fails naming it, the probe's service is what the server is asked about, and a
port nobody listens on or a server slower than the timeout fails in kube's words.  The reply
is a pod's bytes: decoding it never fails but with HealthReplyError (fuzzed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import grpc
import grpc.aio
from hypothesis import given
from hypothesis import strategies as st

from components.kubelet import grpcprobe
from machinery.process.launch import free_ports


@asynccontextmanager
async def health_server(answer: Callable[[bytes], bytes], delay: float = 0.0) -> AsyncIterator[tuple[int, list[bytes]]]:
    asked: list[bytes] = []

    async def check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        asked.append(request)
        await asyncio.sleep(delay)
        return answer(request)

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(check, request_deserializer=None, response_serializer=None)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": handler})])
    [port] = free_ports(1)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    try:
        yield port, asked
    finally:
        await server.stop(0)


def test_serving_passes_and_other_statuses_fail_naming_them() -> None:
    async def go() -> None:
        async with health_server(lambda req: b"\x08\x01") as (port, asked):
            assert await grpcprobe.check({"port": port, "service": "liveness"}, 2.0, "127.0.0.1") is None
            assert asked == [grpcprobe.encode_request("liveness")] == [b"\x0a\x08liveness"]
        async with health_server(lambda req: b"\x08\x02") as (port, _):
            failed = await grpcprobe.check({"port": port}, 2.0, "127.0.0.1")
            assert failed == "service unhealthy (responded with 'NOT_SERVING')"
        async with health_server(lambda req: b"") as (port, _):  # no status: UNKNOWN
            assert await grpcprobe.check({"port": port}, 2.0, "127.0.0.1") == (
                "service unhealthy (responded with 'UNKNOWN')"
            )

    asyncio.run(go())


def test_no_server_and_a_slow_one_fail_in_kubes_words() -> None:
    async def go() -> None:
        [port] = free_ports(1)
        failed = await grpcprobe.check({"port": port}, 1.0, "127.0.0.1")
        assert failed is not None and failed.startswith(f"timeout: failed to connect service '127.0.0.1:{port}'")
        async with health_server(lambda req: b"\x08\x01", delay=3.0) as (slow, _):
            failed = await grpcprobe.check({"port": slow}, 0.5, "127.0.0.1")
            assert failed == "timeout: health rpc did not complete within 0.5s"

    asyncio.run(go())


def test_a_bad_port_or_service_fails_without_dialing() -> None:
    async def go() -> None:
        assert await grpcprobe.check({"port": "http"}, 1.0, "127.0.0.1") == "invalid port 'http'"
        assert await grpcprobe.check({"port": 70000}, 1.0, "127.0.0.1") == "invalid port 70000"
        assert await grpcprobe.check({"port": 1, "service": 5}, 1.0, "127.0.0.1") == "invalid service 5"

    asyncio.run(go())


def test_decoding_skips_unknown_fields_and_keeps_the_last_status() -> None:
    # field 2 (string "x"), field 1 = 2, field 3 (fixed32), field 1 = 1
    assert grpcprobe.decode_status(b"\x12\x01x\x08\x02\x1d\x00\x00\x00\x00\x08\x01") == 1


@given(st.binary(max_size=64))
def test_any_reply_decodes_or_is_refused(data: bytes) -> None:
    try:
        status = grpcprobe.decode_status(data)
    except grpcprobe.HealthReplyError:
        return
    assert status >= 0


@given(st.text(max_size=300))
def test_requests_round_trip_their_service(service: str) -> None:
    encoded = grpcprobe.encode_request(service)
    if not service:
        assert encoded == b""
        return
    assert encoded[0] == 0x0A and encoded.endswith(service.encode())
