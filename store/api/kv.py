"""Key-value requests, responses and events, with etcd v3 semantics and field names.

Keys and values are bytes.  A range is [key, range_end): range_end b"" means the single
key, b"\\0" means every key >= key, and prefix(key) gives every key starting with key.
Responses carry `revision`: the store's revision when the request was served (etcd's
header.revision).

Wire form: every type is a msgpack array of its fields in declaration order (`to_wire`,
`from_wire`); a txn op is [kind, fields].  Arrays, not maps, because these cross the wire
and the Raft log on every write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, TypeAlias

from store.api.wire import INT64_MIN, Fields, check_bytes, check_int

MAX_TXN_DEPTH = 16
"""Nesting of txns inside txns (etcd has no explicit bound; the op limit bounds it there)."""


def prefix_end(prefix: bytes) -> bytes:
    """The range_end that selects every key starting with `prefix` (etcd's GetPrefixRangeEnd)."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"  # all 0xff (or empty): every key from here on


class SortOrder(IntEnum):
    NONE = 0
    ASCEND = 1
    DESCEND = 2


class SortTarget(IntEnum):
    KEY = 0
    VERSION = 1
    CREATE = 2
    MOD = 3
    VALUE = 4


class CompareResult(IntEnum):
    EQUAL = 0
    GREATER = 1
    LESS = 2
    NOT_EQUAL = 3


class CompareTarget(IntEnum):
    VERSION = 0
    CREATE = 1
    MOD = 2
    VALUE = 3
    LEASE = 4


class EventType(IntEnum):
    PUT = 0
    DELETE = 1


@dataclass(slots=True)
class KeyValue:
    key: bytes
    create_revision: int
    mod_revision: int
    version: int
    value: bytes
    lease: int = 0

    def to_wire(self) -> list[Any]:
        return [self.key, self.create_revision, self.mod_revision, self.version, self.value, self.lease]

    @staticmethod
    def from_wire(w: list[Any]) -> KeyValue:
        return KeyValue(w[0], w[1], w[2], w[3], w[4], w[5])


def _kv_or_none(w: list[Any] | None) -> KeyValue | None:
    return None if w is None else KeyValue.from_wire(w)


def _kv_wire(kv: KeyValue | None) -> list[Any] | None:
    return None if kv is None else kv.to_wire()


@dataclass(slots=True)
class Event:
    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None

    def to_wire(self) -> list[Any]:
        return [int(self.type), self.kv.to_wire(), _kv_wire(self.prev_kv)]

    @staticmethod
    def from_wire(w: list[Any]) -> Event:
        return Event(EventType(w[0]), KeyValue.from_wire(w[1]), _kv_or_none(w[2]))


# ---------------------------------------------------------------------------- requests
@dataclass(slots=True)
class RangeRequest:
    kind: ClassVar[str] = "range"
    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    sort_order: SortOrder = SortOrder.NONE
    sort_target: SortTarget = SortTarget.KEY
    serializable: bool = False
    keys_only: bool = False
    count_only: bool = False
    min_mod_revision: int = 0
    max_mod_revision: int = 0
    min_create_revision: int = 0
    max_create_revision: int = 0

    def to_wire(self) -> list[Any]:
        return [
            self.key,
            self.range_end,
            self.limit,
            self.revision,
            int(self.sort_order),
            int(self.sort_target),
            self.serializable,
            self.keys_only,
            self.count_only,
            self.min_mod_revision,
            self.max_mod_revision,
            self.min_create_revision,
            self.max_create_revision,
        ]

    @staticmethod
    def from_wire(w: Any, path: str = "range") -> RangeRequest:
        f = Fields(w, path, 13)
        return RangeRequest(
            f.blob("key"),
            f.blob("range_end"),
            f.integer("limit"),
            f.integer("revision"),
            f.enum("sort_order", SortOrder),
            f.enum("sort_target", SortTarget),
            f.flag("serializable"),
            f.flag("keys_only"),
            f.flag("count_only"),
            f.integer("min_mod_revision"),
            f.integer("max_mod_revision"),
            f.integer("min_create_revision"),
            f.integer("max_create_revision"),
        )


@dataclass(slots=True)
class PutRequest:
    kind: ClassVar[str] = "put"
    key: bytes
    value: bytes = b""
    lease: int = 0
    prev_kv: bool = False
    ignore_value: bool = False
    ignore_lease: bool = False

    def to_wire(self) -> list[Any]:
        return [self.key, self.value, self.lease, self.prev_kv, self.ignore_value, self.ignore_lease]

    @staticmethod
    def from_wire(w: Any, path: str = "put") -> PutRequest:
        f = Fields(w, path, 6)
        return PutRequest(
            f.blob("key"),
            f.blob("value"),
            f.integer("lease", lo=INT64_MIN),
            f.flag("prev_kv"),
            f.flag("ignore_value"),
            f.flag("ignore_lease"),
        )


@dataclass(slots=True)
class DeleteRangeRequest:
    kind: ClassVar[str] = "delete_range"
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False

    def to_wire(self) -> list[Any]:
        return [self.key, self.range_end, self.prev_kv]

    @staticmethod
    def from_wire(w: Any, path: str = "delete_range") -> DeleteRangeRequest:
        f = Fields(w, path, 3)
        return DeleteRangeRequest(f.blob("key"), f.blob("range_end"), f.flag("prev_kv"))


@dataclass(slots=True)
class Compare:
    """Compare `target` of every key in [key, range_end) against `value` with `result`.

    `value` is bytes for CompareTarget.VALUE and an int for the others.  A missing key has
    version, create and mod revision 0, lease 0, and fails every VALUE comparison.
    """

    result: CompareResult
    target: CompareTarget
    key: bytes
    value: int | bytes
    range_end: bytes = b""

    def to_wire(self) -> list[Any]:
        return [int(self.result), int(self.target), self.key, self.value, self.range_end]

    @staticmethod
    def from_wire(w: Any, path: str = "compare") -> Compare:
        f = Fields(w, path, 5)
        result = f.enum("result", CompareResult)
        target = f.enum("target", CompareTarget)
        key = f.blob("key")
        raw, vpath = f.any("value")
        value: int | bytes = (
            check_bytes(raw, vpath) if target is CompareTarget.VALUE else check_int(raw, vpath, lo=INT64_MIN)
        )
        return Compare(result, target, key, value, f.blob("range_end"))


@dataclass(slots=True)
class TxnRequest:
    kind: ClassVar[str] = "txn"
    compare: list[Compare] = field(default_factory=list)
    success: list[RequestOp] = field(default_factory=list)
    failure: list[RequestOp] = field(default_factory=list)

    def to_wire(self) -> list[Any]:
        return [
            [c.to_wire() for c in self.compare],
            [op_to_wire(o) for o in self.success],
            [op_to_wire(o) for o in self.failure],
        ]

    @staticmethod
    def from_wire(w: Any, path: str = "txn", depth: int = 0) -> TxnRequest:
        if depth > MAX_TXN_DEPTH:
            raise Fields.fail(path, f"txns nested deeper than {MAX_TXN_DEPTH}")
        f = Fields(w, path, 3)
        compare, cpath = f.array("compare")
        success, spath = f.array("success")
        failure, fpath = f.array("failure")
        return TxnRequest(
            [Compare.from_wire(c, f"{cpath}[{i}]") for i, c in enumerate(compare)],
            [op_from_wire(o, f"{spath}[{i}]", depth) for i, o in enumerate(success)],
            [op_from_wire(o, f"{fpath}[{i}]", depth) for i, o in enumerate(failure)],
        )

    def op_count(self) -> int:
        """Operations counted against the per-txn limit (etcd counts the larger branch and compares)."""
        return max(len(self.compare), len(self.success), len(self.failure))


RequestOp: TypeAlias = RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest


def op_to_wire(op: RequestOp) -> list[Any]:
    return [op.kind, op.to_wire()]


def op_from_wire(w: Any, path: str = "op", depth: int = 0) -> RequestOp:
    f = Fields(w, path, 2)
    kind = f.text("kind", 16)
    body, _ = f.any("request")
    sub = f"{path}.{kind}"
    if kind == "range":
        return RangeRequest.from_wire(body, sub)
    if kind == "put":
        return PutRequest.from_wire(body, sub)
    if kind == "delete_range":
        return DeleteRangeRequest.from_wire(body, sub)
    if kind == "txn":
        return TxnRequest.from_wire(body, sub, depth + 1)
    raise Fields.fail(f"{path}.kind", f"unknown txn operation {kind!r}")


@dataclass(slots=True)
class CompactionRequest:
    kind: ClassVar[str] = "compact"
    revision: int
    physical: bool = False

    def to_wire(self) -> list[Any]:
        return [self.revision, self.physical]

    @staticmethod
    def from_wire(w: Any, path: str = "compact") -> CompactionRequest:
        f = Fields(w, path, 2)
        return CompactionRequest(f.integer("revision"), f.flag("physical"))


# ---------------------------------------------------------------------------- responses
@dataclass(slots=True)
class RangeResponse:
    kind: ClassVar[str] = "range"
    revision: int
    kvs: list[KeyValue] = field(default_factory=list)
    more: bool = False
    count: int = 0

    def to_wire(self) -> list[Any]:
        return [self.revision, [kv.to_wire() for kv in self.kvs], self.more, self.count]

    @staticmethod
    def from_wire(w: list[Any]) -> RangeResponse:
        return RangeResponse(w[0], [KeyValue.from_wire(k) for k in w[1]], w[2], w[3])


@dataclass(slots=True)
class PutResponse:
    kind: ClassVar[str] = "put"
    revision: int
    prev_kv: KeyValue | None = None

    def to_wire(self) -> list[Any]:
        return [self.revision, _kv_wire(self.prev_kv)]

    @staticmethod
    def from_wire(w: list[Any]) -> PutResponse:
        return PutResponse(w[0], _kv_or_none(w[1]))


@dataclass(slots=True)
class DeleteRangeResponse:
    kind: ClassVar[str] = "delete_range"
    revision: int
    deleted: int = 0
    prev_kvs: list[KeyValue] = field(default_factory=list)

    def to_wire(self) -> list[Any]:
        return [self.revision, self.deleted, [kv.to_wire() for kv in self.prev_kvs]]

    @staticmethod
    def from_wire(w: list[Any]) -> DeleteRangeResponse:
        return DeleteRangeResponse(w[0], w[1], [KeyValue.from_wire(k) for k in w[2]])


@dataclass(slots=True)
class TxnResponse:
    kind: ClassVar[str] = "txn"
    revision: int
    succeeded: bool = False
    responses: list[ResponseOp] = field(default_factory=list)

    def to_wire(self) -> list[Any]:
        return [self.revision, self.succeeded, [[r.kind, r.to_wire()] for r in self.responses]]

    @staticmethod
    def from_wire(w: list[Any]) -> TxnResponse:
        return TxnResponse(w[0], w[1], [resp_from_wire(r) for r in w[2]])


@dataclass(slots=True)
class CompactionResponse:
    kind: ClassVar[str] = "compact"
    revision: int

    def to_wire(self) -> list[Any]:
        return [self.revision]

    @staticmethod
    def from_wire(w: list[Any]) -> CompactionResponse:
        return CompactionResponse(w[0])


ResponseOp: TypeAlias = RangeResponse | PutResponse | DeleteRangeResponse | TxnResponse

_RESP_TYPES: dict[str, Any] = {
    "range": RangeResponse,
    "put": PutResponse,
    "delete_range": DeleteRangeResponse,
    "txn": TxnResponse,
}


def resp_from_wire(w: list[Any]) -> ResponseOp:
    cls = _RESP_TYPES.get(w[0])
    if cls is None:
        raise ValueError(f"unknown txn response {w[0]!r}")
    r: ResponseOp = cls.from_wire(w[1])
    return r
