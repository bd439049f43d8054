"""etcd's protobuf messages as Python classes, built at import from `etcd.desc` (made by
`python -m store.etcdapi.generate` from etcd's own .proto files).

`pb.RangeRequest`, `pb.KeyValue`, `pb.Event`, ...: every message of the etcdserverpb,
mvccpb and authpb packages by its short name (no two share one), plus the services' method
tables (`SERVICES`: service -> method -> (request class, response class, client streams,
server streams)), which the gRPC front registers its handlers by.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DESCRIPTORS = Path(__file__).resolve().parent / "etcd.desc"
PACKAGES = ("etcdserverpb", "mvccpb", "authpb")


@dataclass(frozen=True, slots=True)
class RpcMethod:
    service: str
    name: str
    request: Any
    response: Any
    client_streaming: bool
    server_streaming: bool

    @property
    def path(self) -> str:
        """The gRPC path, e.g. /etcdserverpb.KV/Range."""
        return f"/etcdserverpb.{self.service}/{self.name}"


class _Messages:
    """Attribute access to the message classes: `pb.RangeRequest`."""

    def __init__(self) -> None:
        files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
        self.pool = descriptor_pool.DescriptorPool()
        for f in files.file:
            self.pool.Add(f)
        self.classes: dict[str, Any] = {}
        self.services: dict[str, dict[str, RpcMethod]] = {}
        for f in files.file:
            if f.package not in PACKAGES:
                continue
            for msg in f.message_type:
                self._add(f"{f.package}.{msg.name}", msg.name)
            for svc in f.service:
                methods = self.services.setdefault(svc.name, {})
                for m in svc.method:
                    methods[m.name] = RpcMethod(
                        svc.name,
                        m.name,
                        self._class(m.input_type.lstrip(".")),
                        self._class(m.output_type.lstrip(".")),
                        m.client_streaming,
                        m.server_streaming,
                    )

    def _class(self, full_name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def _add(self, full_name: str, short: str) -> None:
        if short in self.classes and self.classes[short].DESCRIPTOR.full_name != full_name:
            raise RuntimeError(f"two messages named {short} in etcd.desc")
        self.classes[short] = self._class(full_name)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.classes[name]
        except KeyError:
            raise AttributeError(f"no etcd message named {name}") from None


pb = _Messages()
SERVICES = pb.services
