"""What the etcd Watch tests share: a plaintext etcd API to talk to (a raftkube member or a real
etcd, Debian's 3.4) and one Watch call driven from a thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from store.etcdapi.messages import SERVICES
from tests.store.mvcc.etcd import running_etcd
from tests.support.cluster import running_cluster

TIMEOUT = 10.0


def ser(m: Any) -> bytes:
    data: bytes = m.SerializeToString()
    return data


@pytest.fixture(scope="module", params=["raftkube", "etcd"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a plaintext etcd API: a raftkube member, or a real etcd."""
    d: Path = tmp_path_factory.mktemp(request.param)
    if request.param == "raftkube":
        with running_cluster(d, insecure=True) as c:
            yield c.endpoints[0].split("://", 1)[1]
    else:
        try:
            with running_etcd(d) as e:
                yield e.url.split("://", 1)[1]
        except FileNotFoundError as e:  # no etcd on this machine (.ci/run installs it)
            pytest.skip(str(e))


class Stream:
    """One Watch call: requests in, responses collected by a thread."""

    def __init__(self, channel: grpc.Channel) -> None:
        method = SERVICES["Watch"]["Watch"]
        call = channel.stream_stream(
            method.path, request_serializer=ser, response_deserializer=method.response.FromString
        )
        self.requests: queue.Queue[Any] = queue.Queue()
        self.responses: queue.Queue[Any] = queue.Queue()
        self.call = call(iter(self.requests.get, None), timeout=60)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for r in self.call:
                self.responses.put(r)
        except grpc.RpcError:
            pass

    def send(self, req: Any) -> None:
        self.requests.put(req)

    def next(self, timeout: float = TIMEOUT) -> Any:
        return self.responses.get(timeout=timeout)

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()
        self.reader.join(timeout=TIMEOUT)
