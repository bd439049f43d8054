"""The client protocol: msgpack frames with request ids, many requests in flight per connection.

    client -> member   [request_id, method, args]
    member -> client   [request_id, OK, header, result]
                       [request_id, ERROR, error]            error = [code, message, details]
                       [request_id, STREAM, header, item]    watch responses, snapshot chunks
                       [request_id, END, header, result]     last frame of a stream

`header` is [cluster_id, member_id, revision, raft_term], as etcd's ResponseHeader.
The first frame a client sends is [0, "hello", [PROTOCOL]]; a member answers it with its
header, and closes any connection whose first frame is not that (garbage on the port).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROTOCOL = "raftkube-client/1"

OK = 0
ERROR = 1
STREAM = 2
END = 3

MAX_REQUEST_BYTES = 1_572_864
"""1.5 MiB, etcd's default --max-request-bytes."""
MAX_TXN_OPS = 128
"""etcd's default --max-txn-ops."""


@dataclass(frozen=True, slots=True)
class Header:
    cluster_id: int
    member_id: int
    revision: int
    raft_term: int

    def to_wire(self) -> list[int]:
        return [self.cluster_id, self.member_id, self.revision, self.raft_term]

    @staticmethod
    def from_wire(w: list[Any]) -> Header:
        return Header(w[0], w[1], w[2], w[3])

    def to_json(self) -> dict[str, int]:
        return {
            "cluster_id": self.cluster_id,
            "member_id": self.member_id,
            "revision": self.revision,
            "raft_term": self.raft_term,
        }


def split_url(url: str) -> tuple[str, int]:
    """'tcp://127.0.0.1:2379' or '127.0.0.1:2379' -> ('127.0.0.1', 2379); ValueError names the problem."""
    rest = url.split("://", 1)[1] if "://" in url else url
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {url!r}")
    p = int(port)
    if not 0 < p < 65536:
        raise ValueError(f"port out of range in {url!r}")
    return host, p


def etcd_url(client_url: str, insecure: bool) -> str:
    """Where etcd clients reach a member: the same client port (the member serves the etcd
    API there to HTTP/2 connections), as etcd writes it: https://host:port, http:// without TLS."""
    host, port = split_url(client_url)
    host = host if ":" not in host or host.startswith("[") else f"[{host}]"
    return f"{'http' if insecure else 'https'}://{host}:{port}"
