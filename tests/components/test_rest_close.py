"""RestClient.close() returns only once every socket it opened is closed, even when the server
is slow to answer the TLS goodbye: a watch the caller left early closes its connection outside
the pool, and the event loop must not end with that shutdown still under way (its socket would
be reported unclosed at some later test's garbage collection)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.client import kubeconfig, rest
from components.client.rest import RestClient
from tests.apiserver.webhook_support import TLS, make_tls

GOODBYE_DELAY_S = 1.0  # longer than the grace the client used to sleep (0.25 s)
EVENT = b'{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"p"}}}\n'


class SlowGoodbyeServer:
    """Answers one watch with one event and keeps the stream open; when the client hangs up,
    waits `goodbye_delay` seconds before its own close_notify."""

    def __init__(self, tls: TLS, goodbye_delay: float = GOODBYE_DELAY_S) -> None:
        self.tls = tls
        self.goodbye_delay = goodbye_delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.served = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        raw, _ = self.listener.accept()
        raw.settimeout(10)
        conn = self.tls.server.wrap_socket(raw, server_side=True)
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            conn.sendall(head + b"%x\r\n%s\r\n" % (len(EVENT), EVENT))
            while conn.recv(4096):  # until the client's close_notify (or EOF)
                pass
            time.sleep(self.goodbye_delay)
            conn.unwrap()
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()
            self.served.set()

    def __enter__(self) -> SlowGoodbyeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.wait(10)
        self.listener.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SlowGoodbyeServer]:
    with SlowGoodbyeServer(make_tls(tmp_path, "slow-goodbye")) as s:
        yield s


def test_close_waits_for_a_slow_tls_goodbye_and_leaves_no_socket_open(server: SlowGoodbyeServer) -> None:
    config = kubeconfig.ClientConfig(
        server=f"https://127.0.0.1:{server.port}", ca_data=base64.b64decode(server.tls.ca_bundle), token="t"
    )

    async def go() -> float:
        async with RestClient(config, timeout=10) as client:
            async with contextlib.aclosing(client.watch("/api/v1/pods")) as events:
                async for event in events:
                    assert event.object["metadata"]["name"] == "p"
                    break  # the caller leaves the watch: its connection closes outside the pool
            started = time.monotonic()
        return time.monotonic() - started

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        closing_s = asyncio.run(go())
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == [], leaks
    assert server.served.wait(10)
    assert closing_s < 5.0  # waited for the goodbye, bounded


def test_close_aborts_a_connection_whose_tls_goodbye_outlasts_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp forgets a connection's transport once it starts closing it: the abort after the
    timeout must still reach the socket, or the loop ends with it open (CI: the Job
    controller's tests, a loaded apiserver slow to say goodbye)."""
    monkeypatch.setattr(rest, "CLOSE_TIMEOUT_S", 0.3)
    with SlowGoodbyeServer(make_tls(tmp_path, "mute"), goodbye_delay=2.5) as mute:
        config = kubeconfig.ClientConfig(
            server=f"https://127.0.0.1:{mute.port}", ca_data=base64.b64decode(mute.tls.ca_bundle), token="t"
        )

        async def go() -> tuple[float, int]:
            client = RestClient(config, timeout=10)
            async with contextlib.aclosing(client.watch("/api/v1/pods")) as events:
                async for _ in events:
                    break
            started = time.monotonic()
            await client.close()
            return time.monotonic() - started, client._connector.open_connections()

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            closing_s, still_open = asyncio.run(go())
            gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == [], leaks
    assert still_open == 0
    assert closing_s < 2.0, closing_s  # aborted after 0.3 s, not left to the server's 2.5 s
