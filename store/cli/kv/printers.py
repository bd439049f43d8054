"""What `raftkube kv` prints: JSON documents (the shapes the package docstring promises)
and etcdctl's human lines, keys and values as raw bytes.  Written and flushed at once, so
watch and keepalive lines reach a pipe as they happen."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from store.api.kv import DeleteRangeResponse, KeyValue, PutResponse, RangeResponse, ResponseOp, TxnResponse


def json_text(b: bytes) -> str:
    """Bytes for JSON output: UTF-8, with what is not shown as backslash escapes."""
    return b.decode("utf-8", "backslashreplace")


def kv_json(kv: KeyValue) -> dict[str, Any]:
    return {
        "key": json_text(kv.key),
        "value": json_text(kv.value),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "lease": kv.lease,
    }


def kv_or_null(kv: KeyValue | None) -> dict[str, Any] | None:
    return None if kv is None else kv_json(kv)


def range_json(r: RangeResponse) -> dict[str, Any]:
    return {"kvs": [kv_json(kv) for kv in r.kvs], "count": r.count, "more": r.more}


def put_json(r: PutResponse) -> dict[str, Any]:
    return {"prev_kv": kv_or_null(r.prev_kv)}


def del_json(r: DeleteRangeResponse) -> dict[str, Any]:
    return {"deleted": r.deleted, "prev_kvs": [kv_json(kv) for kv in r.prev_kvs]}


def txn_json(r: TxnResponse) -> dict[str, Any]:
    return {"succeeded": r.succeeded, "responses": [op_json(x) for x in r.responses]}


def op_json(r: ResponseOp) -> dict[str, Any]:
    if isinstance(r, RangeResponse):
        return {"op": "get", **range_json(r)}
    if isinstance(r, PutResponse):
        return {"op": "put", **put_json(r)}
    if isinstance(r, DeleteRangeResponse):
        return {"op": "del", **del_json(r)}
    return {"op": "txn", **txn_json(r)}


def _write(data: bytes) -> None:
    """Write and flush at once: watch and keepalive lines must reach a pipe as they happen."""
    sys.stdout.flush()
    buf = getattr(sys.stdout, "buffer", None)
    if buf is None:  # a text-only stream (an in-process test): best effort
        sys.stdout.write(data.decode("utf-8", "backslashreplace"))
        sys.stdout.flush()
        return
    buf.write(data)
    buf.flush()


def emit_json(obj: Any) -> None:
    """One compact JSON document on one line, UTF-8 whatever the locale says."""
    _write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")


def emit_lines(lines: Iterable[bytes | str]) -> None:
    _write(b"".join((x.encode("utf-8") if isinstance(x, str) else x) + b"\n" for x in lines))


def kv_lines(kvs: Iterable[KeyValue], keys_only: bool = False, value_only: bool = False) -> list[bytes]:
    out: list[bytes] = []
    for kv in kvs:
        if keys_only:
            out.append(kv.key)
        elif value_only:
            out.append(kv.value)
        else:
            out += [kv.key, kv.value]
    return out


def range_lines(r: RangeResponse) -> list[bytes]:
    return kv_lines(r.kvs)


def op_lines(r: ResponseOp) -> list[bytes]:
    """etcdctl's simple printer for one txn response: kvs for a get, OK for a put, the count for a del."""
    if isinstance(r, RangeResponse):
        return range_lines(r)
    if isinstance(r, PutResponse):
        return [b"OK", *(kv_lines([r.prev_kv]) if r.prev_kv else [])]
    if isinstance(r, DeleteRangeResponse):
        return [str(r.deleted).encode(), *kv_lines(r.prev_kvs)]
    return txn_lines(r)


def txn_lines(r: TxnResponse) -> list[bytes]:
    out = [b"SUCCESS" if r.succeeded else b"FAILURE"]
    for x in r.responses:
        out += [b"", *op_lines(x)]
    return out
