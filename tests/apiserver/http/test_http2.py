"""The apiserver's HTTP/2 (apiserver/http/http2.py) on uvicorn over real TLS: ALPN hands `h2`
connections to it and keeps HTTP/1.1 ones with uvicorn on the same port; an independent client
(httpx's, on the `h2` package) multiplexes requests, bodies larger than the windows and failures
over one connection; raw frames (tests/support/h2wire.py) show each limit: malformed requests
reset before the app sees them, streams over the limit refused, an unfinished body reset, a
response nobody reads holding one message, and the preface, first-request and idle timeouts.

The server runs in a thread of its own (its own event loop), so that blocking raw sockets can
talk to it; the app records what it saw."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.http.connection_limits import ConnectionLimits, guarded
from apiserver.http.http2 import API_LIMITS, MAX_STREAMS, _scope, negotiating
from apiserver.main import http2_settings, server_tls
from apiserver.pki import ApiserverPKI
from apiserver.tls_scope import protocol_class
from machinery.process.command import UsageError
from machinery.process.launch import free_ports
from tests.support import h2wire as w

CHUNK = 64 * 1024
LIMITS = ConnectionLimits(header_timeout=1.0, body_timeout=1.0, idle_timeout=2.0, max_connections=50)
STREAMS = 4


@dataclass
class Recorder:
    """The app: what it saw, per request path, and how far its streamed answers got."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    disconnected: list[str] = field(default_factory=list)
    chunks_sent: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        with self.lock:
            self.seen.append(
                {
                    "path": path,
                    "http_version": scope["http_version"],
                    "client": list(scope["client"] or ()),
                    "certs": len(scope.get("extensions", {}).get("tls", {}).get("client_cert_chain", [])),
                    "host": dict(scope["headers"]).get(b"host", b"").decode(),
                    "query": scope["query_string"].decode(),
                }
            )
        if path == "/fail":
            raise RuntimeError("the app fails on purpose")
        if path == "/held":  # a watch with no event yet: its answer has begun, its body not
            await send({"type": "http.response.start", "status": 200, "headers": []})
        if path in ("/hang", "/slow-body", "/held"):
            while (await receive())["type"] != "http.disconnect":
                pass
            with self.lock:
                self.disconnected.append(path)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if path == "/stream":
            n = int(scope["query_string"].decode().split("=")[1])
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            for i in range(n):
                await send({"type": "http.response.body", "body": bytes([65 + i % 26]) * CHUNK, "more_body": True})
                with self.lock:
                    self.chunks_sent[path + "?" + scope["query_string"].decode()] = i + 1
            await send({"type": "http.response.body", "body": b""})
            return
        answer = json.dumps({**self.seen[-1], "body": len(body), "method": scope["method"]}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                # a connection-level header as uvicorn's own apps may set: dropped on HTTP/2
                "headers": [(b"content-type", b"application/json"), (b"Transfer-Encoding", b"chunked")],
            }
        )
        await send({"type": "http.response.body", "body": answer})


@dataclass
class Served:
    port: int
    creds: ApiserverPKI
    app: Recorder
    server: uvicorn.Server

    def tls(self, alpn: tuple[str, ...] = ("h2",), cert: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.creds.ca))
        ctx.set_alpn_protocols(list(alpn))
        if cert:
            ctx.load_cert_chain(self.creds.admin.cert, self.creds.admin.key)
        return ctx

    def connections(self) -> int:
        return len(self.server.server_state.connections)

    def raw(self, first: bytes | None = None, buffers: int | None = None) -> w.RawH2:
        return w.RawH2.connect(self.port, self.tls(), first=first, buffers=buffers)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    creds = ApiserverPKI.of(tmp_path_factory.mktemp("pki"))
    creds.ensure()
    tls = server_tls(creds.serving.cert, creds.serving.key, creds.ca)
    app = Recorder()
    port = free_ports(1)[0]
    http2 = dataclasses.replace(API_LIMITS, max_streams=STREAMS)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=negotiating(guarded(protocol_class(), LIMITS), LIMITS, http2),
        ssl_context_factory=lambda _c, _d: tls,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=LIMITS.idle_timeout,  # type: ignore[arg-type]
        loop="asyncio",  # the apiserver's own (apiserver.main runs asyncio's loop)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="http2-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the test server did not start"
    try:
        yield Served(port, creds, app, server)
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive()


Fields = list[tuple[bytes, bytes]]


def _get(extra: Fields | None = None, path: bytes = b"/echo", method: bytes = b"GET") -> Fields:
    """A request's header list (GET /echo by default), `extra` after the pseudo-headers."""
    return [(b":method", method), (b":scheme", b"https"), (b":path", path), (b":authority", b"kube"), *(extra or [])]


# ---------------------------------------------------------------- well-behaved clients


def test_h2_and_http11_clients_share_the_port_and_the_certificate_reaches_the_app(served: Served) -> None:
    async def go() -> None:
        url = f"https://127.0.0.1:{served.port}"
        async with httpx.AsyncClient(http2=True, verify=served.tls(("h2", "http/1.1"))) as h2c:
            r = await h2c.get(url + "/echo?x=1")
            assert r.http_version == "HTTP/2" and r.status_code == 200
            seen = r.json()
            assert seen["http_version"] == "2" and seen["certs"] == 1 and seen["query"] == "x=1"
            assert seen["host"] == f"127.0.0.1:{served.port}"  # :authority, as Host
            assert "transfer-encoding" not in r.headers and "date" in r.headers
        async with httpx.AsyncClient(verify=served.tls(("http/1.1",))) as h1c:
            r = await h1c.get(url + "/echo")
            assert r.http_version == "HTTP/1.1" and r.json()["http_version"] == "1.1"

    asyncio.run(go())


def test_one_connection_carries_concurrent_requests_big_bodies_and_failures(served: Served) -> None:
    async def go() -> None:
        url = f"https://127.0.0.1:{served.port}"
        async with httpx.AsyncClient(http2=True, verify=served.tls(), timeout=20) as c:
            body = b"z" * (3 * API_LIMITS.stream_window + 123)  # more than a stream's window
            gets = [c.get(url + f"/echo?i={i}") for i in range(30)]
            posts = [c.post(url + "/echo", content=body) for _ in range(3)]
            stream = c.get(url + "/stream?n=40")  # 2.5 MiB: many times the client's window
            failing = c.get(url + "/fail")
            answers = await asyncio.gather(*gets, *posts, stream, failing)
        *got, posted_a, posted_b, posted_c, streamed, failed = answers
        assert all(r.status_code == 200 and r.http_version == "HTTP/2" for r in got)
        assert {r.json()["query"] for r in got} == {f"i={i}" for i in range(30)}
        assert {tuple(r.json()["client"]) for r in got} == {tuple(got[0].json()["client"])}  # one connection
        assert [r.json()["body"] for r in (posted_a, posted_b, posted_c)] == [len(body)] * 3
        assert len(streamed.content) == 40 * CHUNK and streamed.content[-1:] == bytes([65 + 39 % 26])
        assert failed.status_code == 500

    asyncio.run(go())


# ---------------------------------------------------------------- hostile clients


@pytest.mark.parametrize(
    "fields",
    [
        _get([(b"Upper", b"x")]),
        _get([(b"connection", b"keep-alive")]),
        _get([(b"te", b"gzip")]),
        [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"kube")],  # no :path
        [(b":method", b"GET"), (b":path", b"/echo"), (b":path", b"/echo"), (b":scheme", b"https")],
        [(b":method", b"GET"), (b"accept", b"*/*"), (b":path", b"/echo"), (b":scheme", b"https")],
        [(b":method", b"CONNECT"), (b":authority", b"kube:443")],
        _get([(b":status", b"200")]),
    ],
    ids=["upper-case", "connection", "te", "no-path", "two-paths", "pseudo-after", "connect", "response-pseudo"],
)
def test_a_malformed_request_is_reset_before_the_app_sees_it(served: Served, fields: Fields) -> None:
    before = len(served.app.seen)
    with served.raw() as c:
        c.send(w.headers(1, fields, end=True) + w.headers(3, _get(), end=True))
        a = c.read(lambda a: a.done(1) and a.done(3))
    assert a.resets.get(1) == w.PROTOCOL_ERROR, a.frames
    assert a.http_status(3) == b"200"  # the connection goes on
    assert len(served.app.seen) == before + 1


def test_a_started_answer_is_on_the_wire_before_its_body(served: Served) -> None:
    """A watch's 200 reaches the client at once (client-go waits for it before it says the
    watch is open), as uvicorn writes HTTP/1.1 headers at `http.response.start`."""
    with served.raw() as c:
        c.send(w.headers(1, _get(path=b"/held"), end=True))
        a = c.read(lambda a: a.http_status(1) is not None)
        assert a.http_status(1) == b"200" and not a.body.get(1) and not a.done(1)


def test_streams_past_the_limit_are_refused_and_a_reset_handler_still_counts(served: Served) -> None:
    with served.raw() as c:
        c.send(b"".join(w.headers(sid, _get(path=b"/hang")) for sid in (1, 3, 5, 7)))
        c.send(w.headers(9, _get(), end=True))
        a = c.read(lambda a: 9 in a.resets)
        assert a.resets[9] == w.REFUSED_STREAM
        # the client resets one: its handler sees the disconnect and ends, and its slot is free
        c.send(w.rst_stream(1))
        deadline = time.monotonic() + 5
        while served.app.disconnected.count("/hang") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        c.send(w.headers(11, _get(), end=True))
        a = c.read(lambda a: a.done(11))
        assert a.http_status(11) == b"200", a.frames


def test_an_unfinished_body_is_reset_after_the_body_timeout(served: Served) -> None:
    with served.raw() as c:
        started = time.monotonic()
        c.send(w.headers(1, _get(path=b"/slow-body", method=b"POST")) + w.data(1, b"part of it"))
        a = c.read(lambda a: 1 in a.resets, timeout=LIMITS.body_timeout + 3)
        assert a.resets.get(1) == w.CANCEL
        assert LIMITS.body_timeout - 0.2 <= time.monotonic() - started
    deadline = time.monotonic() + 5
    while "/slow-body" not in served.app.disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "/slow-body" in served.app.disconnected


def test_a_response_nobody_reads_holds_one_message_not_a_queue(served: Served) -> None:
    """The client's stream window is 0: nothing can be sent, and the app's sender waits on its
    first chunk instead of queueing all 200 (12.5 MiB)."""
    with served.raw(first=w.hello((w.INITIAL_WINDOW_SIZE, 0))) as c:
        c.send(w.headers(1, _get(path=b"/stream?n=200"), end=True))
        time.sleep(0.5)
        assert served.app.chunks_sent.get("/stream?n=200", 0) <= 1
        a = c.read(lambda a: a.http_status(1) is not None)
        assert a.http_status(1) == b"200" and not a.body.get(1)
        # give the stream room for every byte: the rest flows and the stream ends
        c.send(w.window_update(1, 200 * CHUNK) + w.window_update(0, 200 * CHUNK))
        a = c.read(lambda a: a.done(1), timeout=20)
        assert 1 in a.ended and len(a.body[1]) == 200 * CHUNK


def test_the_first_request_is_due_within_the_header_timeout_and_idle_connections_close(served: Served) -> None:
    with served.raw() as c:
        started = time.monotonic()
        assert c.closed_by_server(timeout=LIMITS.header_timeout + 3)
        assert time.monotonic() - started >= LIMITS.header_timeout - 0.2
        assert c.answers.goaway is not None and c.answers.goaway[1] == w.NO_ERROR
    with served.raw() as c:
        c.send(w.headers(1, _get(), end=True))
        assert c.read(lambda a: a.done(1)).http_status(1) == b"200"
        started = time.monotonic()
        assert c.closed_by_server(timeout=LIMITS.idle_timeout + 3)
        assert time.monotonic() - started >= LIMITS.idle_timeout - 0.3


def test_a_half_sent_frame_is_cut_off_at_the_header_timeout(served: Served) -> None:
    with served.raw() as c:
        c.send(w.headers(1, _get(), end=True))
        assert c.read(lambda a: a.done(1)).http_status(1) == b"200"
        c.send(w.headers(3, _get(), end=True)[:5])  # idle from here would take longer
        started = time.monotonic()
        assert c.closed_by_server(timeout=LIMITS.header_timeout + 3)
        assert time.monotonic() - started < LIMITS.idle_timeout
        assert c.answers.goaway is not None and c.answers.goaway[1] == w.PROTOCOL_ERROR


def _connections_settle(served: Served, to: int) -> int:
    """The server's open connections once they are `to` (bounded wait): earlier tests' clients
    may still be closing theirs."""
    deadline = time.monotonic() + 5
    while served.connections() != to and time.monotonic() < deadline:
        time.sleep(0.01)
    return served.connections()


def test_connections_count_towards_the_ceiling_and_leave_it(served: Served) -> None:
    assert _connections_settle(served, 0) == 0
    with served.raw() as c:
        c.send(w.headers(1, _get(), end=True))
        c.read(lambda a: a.done(1))
        assert served.connections() == 1
    assert _connections_settle(served, 0) == 0


# ---------------------------------------------------------------- fuzz


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.sampled_from([b":method", b":path", b":scheme", b":authority", b":status", b"te", b"Host"]),
                st.binary(max_size=12),
            ),
            st.binary(max_size=24),
        ),
        max_size=12,
    )
)
def test_any_header_list_gives_a_scope_or_none(fields: list[tuple[bytes, bytes]]) -> None:
    class Conn:
        scope_base: dict[str, Any] = {"type": "http"}
        app_state: dict[str, Any] = {}

    scope = _scope(Conn(), fields)  # type: ignore[arg-type]
    if scope is not None:
        assert scope["path"].startswith("/") or (scope["path"], scope["method"]) == ("*", "OPTIONS")
        assert scope["method"] and scope["method"] != "CONNECT" and " " not in scope["method"]
        assert scope["scheme"] in ("https", "http")
        assert all(not name.startswith(b":") and name == name.lower() for name, _ in scope["headers"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(w.frames(["/echo", "/hang", "/stream"]), min_size=1, max_size=12))
def test_any_frames_leave_the_server_serving(served: Served, frames: list[bytes]) -> None:
    """Whatever frames a client sends, the server answers a well-formed client next, and the
    fuzzing connection's handlers end once it is gone."""
    with contextlib.suppress(OSError), served.raw() as c:
        for f in frames:
            if not c.offer(f):
                break
        c.read(lambda a: False, timeout=0.05)
    with served.raw() as c:
        c.send(w.headers(1, _get(), end=True))
        assert c.read(lambda a: a.done(1)).http_status(1) == b"200"
    deadline = time.monotonic() + 5
    while served.server.server_state.tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not served.server.server_state.tasks


def test_the_streams_flag_is_checked_and_zero_means_kubes_default() -> None:
    assert http2_settings(0).max_streams == MAX_STREAMS == 250
    assert http2_settings(7) == dataclasses.replace(API_LIMITS, max_streams=7)
    for bad in (-1, 10_001):
        with pytest.raises(UsageError, match="--http2-max-streams-per-connection"):
            http2_settings(bad)
