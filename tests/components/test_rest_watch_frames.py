"""What the REST client makes of a watch stream from a broken or hostile server (a real HTTPS
server on 127.0.0.1 answering with the bytes under test): every frame either becomes an event
of a known type with an object, or ends the watch with a typed error (`TransportError` for
what is not a watch event, the Status's `ApiError` for an ERROR event).  Never another
exception, never an event a reflector would have to second-guess."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.client import kubeconfig, rest
from components.client.rest import ApiError, RestClient, TransportError, WatchEvent
from tests.apiserver.webhook_support import make_tls

KNOWN = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}


class Server:
    """Answers every GET with `body` (status 200, chunked), on its own thread's event loop."""

    def __init__(self, directory: Path) -> None:
        self.tls = make_tls(directory, "watch-frames")
        self.body = b""
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        body = self.body
        for i in range(0, len(body), 4096):  # in pieces, as a stream arrives
            await resp.write(body[i : i + 4096])
        await resp.write_eof()
        return resp

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._answer)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.tls.server)
        self._loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def start(self) -> None:
        self._thread.start()
        assert self._started.wait(10), "the test server did not start"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("watch-frames"))
    s.start()
    yield s
    s.stop()


def watch_all(server: Server, body: bytes) -> tuple[list[WatchEvent], BaseException | None]:
    server.body = body
    config = kubeconfig.ClientConfig(
        server=f"https://127.0.0.1:{server.port}", ca_data=base64.b64decode(server.tls.ca_bundle), token="t"
    )

    async def go() -> tuple[list[WatchEvent], BaseException | None]:
        got: list[WatchEvent] = []
        async with RestClient(config, timeout=5) as client:
            try:
                async for ev in client.watch("/api/v1/pods"):
                    got.append(ev)
            except (TransportError, ApiError) as e:
                return got, e
        return got, None

    return asyncio.run(go())


def frame(type_: str, obj: object) -> bytes:
    return orjson.dumps({"type": type_, "object": obj}) + b"\n"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
frames = st.one_of(
    st.builds(frame, st.sampled_from([*KNOWN, "ERROR", "", "added", "BOGUS"]), json_values),
    st.builds(frame, st.sampled_from(sorted(KNOWN)), st.fixed_dictionaries({"metadata": json_values})),
    st.builds(lambda v: orjson.dumps(v) + b"\n", json_values),
    st.binary(max_size=64).map(lambda b: b + b"\n"),
    st.just(b"\n"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(frames, max_size=6))
def test_any_stream_gives_known_events_or_a_typed_error(server: Server, stream: list[bytes]) -> None:
    events, _ = watch_all(server, b"".join(stream))
    for ev in events:
        assert ev.type in KNOWN and isinstance(ev.object, dict)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "without a type"),
        (frame("ADDED", "a string"), "without an object"),
        (frame("UPSERTED", {}), "UPSERTED"),
    ],
)
def test_each_bad_frame_ends_the_watch_with_a_transport_error(server: Server, body: bytes, says: str) -> None:
    events, error = watch_all(server, frame("ADDED", {"metadata": {"name": "a"}}) + body)
    assert [e.object["metadata"]["name"] for e in events] == ["a"]  # what came before still counts
    assert isinstance(error, TransportError) and says in str(error)


def test_an_error_event_raises_the_status_it_carries(server: Server) -> None:
    gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410}
    _, error = watch_all(server, frame("ERROR", {**gone, "message": "too old resource version: 1 (5)"}))
    assert isinstance(error, rest.GoneError) and "too old" in str(error)


@pytest.mark.parametrize("newline", [True, False], ids=["whole-line", "unterminated"])
def test_a_frame_over_the_limit_ends_the_watch(server: Server, monkeypatch: pytest.MonkeyPatch, newline: bool) -> None:
    monkeypatch.setattr(rest, "MAX_EVENT_BYTES", 1024)
    big = frame("ADDED", {"metadata": {"name": "x" * 2000}})  # one piece on the wire, newline and all
    events, error = watch_all(server, big if newline else big.rstrip(b"\n") + b" " * 3000)
    assert events == []
    assert isinstance(error, TransportError) and "larger than 1024 bytes" in str(error)
