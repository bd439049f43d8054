"""A real etcd for differential tests: process management and its v3 JSON gateway.

Requests and responses are translated between raftkube's API types and the gateway's JSON
(keys and values base64, int64 as strings, enums by name, default fields omitted), and
both sides are reduced to the same plain tuples so that they compare with `==`.  etcd keeps
its revisions across test examples, so every example works under its own key prefix and
`offset` maps raftkube's revisions (a fresh store per example) to etcd's: etcd = ours + offset.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machinery.process.launch import free_ports
from store.api.errors import StoreError
from store.api.kv import (
    Compare,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    ResponseOp,
    TxnRequest,
    TxnResponse,
)

ETCD_ERRORS = {
    "etcdserver: mvcc: required revision has been compacted": "compacted",
    "etcdserver: mvcc: required revision is a future revision": "future-revision",
    "etcdserver: key is not provided": "key-empty",
    "etcdserver: duplicate key given in txn request": "duplicate-key",
    "etcdserver: too many operations in txn request": "too-many-ops",
    "etcdserver: requested lease not found": "lease-not-found",
    "etcdserver: key not found": "key-not-found",
    "etcdserver: value is provided": "invalid-argument",
    "etcdserver: lease is provided": "invalid-argument",
    "etcdserver: lease already exists": "lease-exists",
    "etcdserver: too large lease TTL": "lease-ttl-too-large",
}


def find_etcd() -> str:
    path = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    if path is None:
        pytest.fail(
            "etcd is not installed: the MVCC differential tests compare raftkube with a real etcd 3.4 "
            "(Debian/Ubuntu: apt-get install etcd-server)",
            pytrace=False,
        )
    return path


class EtcdError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.code = ETCD_ERRORS.get(message, f"unmapped: {message}")


class Etcd:
    """One etcd member on free 127.0.0.1 ports, data in `data_dir`, stopped by its pid."""

    def __init__(self, binary: str, data_dir: Path) -> None:
        self.client_port, self.peer_port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.log_path = data_dir / "etcd.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                binary,
                "--name=diff",
                f"--data-dir={data_dir / 'data'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=diff={peer}",
                "--heartbeat-interval=10",
                "--election-timeout=100",
                "--snapshot-count=1000000",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                self.call("/v3/kv/range", {"key": _b64(b"\0")})
                return
            except (OSError, EtcdError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not answer within {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                out: dict[str, Any] = json.loads(resp.read())
                return out
        except urllib.error.HTTPError as e:
            with e:
                payload = json.loads(e.read() or b"{}")
            raise EtcdError(e.code, payload.get("message") or payload.get("error", "")) from None

    def revision(self) -> int:
        return int(self.call("/v3/kv/range", {"key": _b64(b"\0")})["header"]["revision"])

    def watch(
        self, key: bytes, range_end: bytes, start_revision: int, until: int, off: int = 0, timeout: float = 10
    ) -> list[Canon]:
        """Events of a watch from `start_revision` (prev_kv on), until one at `until` or later
        arrives, through the gateway's streaming /v3/watch (one JSON object per line);
        revisions shifted by `off`."""
        body = {
            "create_request": {
                "key": _b64(key),
                "range_end": _b64(range_end),
                "start_revision": start_revision,
                "prev_kv": True,
            }
        }
        req = urllib.request.Request(
            self.url + "/v3/watch", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        out: list[Canon] = []
        deadline = time.monotonic() + timeout
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            while time.monotonic() < deadline:
                line = resp.readline()
                if not line:
                    break
                result = json.loads(line).get("result", {})
                if result.get("canceled"):
                    raise EtcdError(200, f"watch canceled: {result}")
                for ev in result.get("events", []):
                    out.append(event_canon_json(ev, off))
                if out and out[-1][2][2] + off >= until:
                    return out
        raise TimeoutError(f"etcd watch did not reach revision {until} within {timeout}s (got {len(out)} events)")


@contextlib.contextmanager
def running_etcd(data_dir: Path) -> Iterator[Etcd]:
    etcd = Etcd(find_etcd(), data_dir)
    try:
        etcd.wait_ready()
        yield etcd
    finally:
        etcd.stop()


# ---------------------------------------------------------------------------- requests
def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _unb64(s: str) -> bytes:
    return base64.b64decode(s)


def _rev(r: int, off: int) -> int:
    return r + off if r > 0 else r


def range_json(r: RangeRequest, off: int) -> dict[str, Any]:
    return {
        "key": _b64(r.key),
        "range_end": _b64(r.range_end),
        "limit": r.limit,
        "revision": _rev(r.revision, off),
        "sort_order": r.sort_order.name,
        "sort_target": r.sort_target.name,
        "keys_only": r.keys_only,
        "count_only": r.count_only,
        "min_mod_revision": _rev(r.min_mod_revision, off),
        "max_mod_revision": _rev(r.max_mod_revision, off),
        "min_create_revision": _rev(r.min_create_revision, off),
        "max_create_revision": _rev(r.max_create_revision, off),
    }


def put_json(r: PutRequest) -> dict[str, Any]:
    return {
        "key": _b64(r.key),
        "value": _b64(r.value),
        "lease": r.lease,
        "prev_kv": r.prev_kv,
        "ignore_value": r.ignore_value,
        "ignore_lease": r.ignore_lease,
    }


def delete_json(r: DeleteRangeRequest) -> dict[str, Any]:
    return {"key": _b64(r.key), "range_end": _b64(r.range_end), "prev_kv": r.prev_kv}


def compare_json(c: Compare, off: int) -> dict[str, Any]:
    d: dict[str, Any] = {"key": _b64(c.key), "range_end": _b64(c.range_end), "target": c.target.name}
    d["result"] = c.result.name
    if c.target is CompareTarget.VALUE:
        assert isinstance(c.value, bytes)
        d["value"] = _b64(c.value)
    else:
        assert isinstance(c.value, int)
        field = {
            CompareTarget.VERSION: "version",
            CompareTarget.CREATE: "create_revision",
            CompareTarget.MOD: "mod_revision",
            CompareTarget.LEASE: "lease",
        }[c.target]
        shifted = c.target in (CompareTarget.CREATE, CompareTarget.MOD)
        d[field] = _rev(c.value, off) if shifted else c.value
    return d


def txn_json(r: TxnRequest, off: int) -> dict[str, Any]:
    return {
        "compare": [compare_json(c, off) for c in r.compare],
        "success": [op_json(o, off) for o in r.success],
        "failure": [op_json(o, off) for o in r.failure],
    }


def op_json(op: RequestOp, off: int) -> dict[str, Any]:
    if isinstance(op, RangeRequest):
        return {"request_range": range_json(op, off)}
    if isinstance(op, PutRequest):
        return {"request_put": put_json(op)}
    if isinstance(op, DeleteRangeRequest):
        return {"request_delete_range": delete_json(op)}
    return {"request_txn": txn_json(op, off)}


# ---------------------------------------------------------------------------- canonical results
Canon = tuple[Any, ...]


def kv_canon(kv: KeyValue) -> Canon:
    return (kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease)


def ours(resp: ResponseOp) -> Canon:
    if isinstance(resp, RangeResponse):
        return ("range", resp.revision, [kv_canon(kv) for kv in resp.kvs], resp.more, resp.count)
    if isinstance(resp, PutResponse):
        return ("put", resp.revision, kv_canon(resp.prev_kv) if resp.prev_kv else None)
    if isinstance(resp, DeleteRangeResponse):
        return ("delete", resp.revision, resp.deleted, [kv_canon(kv) for kv in resp.prev_kvs])
    assert isinstance(resp, TxnResponse)
    return ("txn", resp.revision, resp.succeeded, [ours(r) for r in resp.responses])


def _kv_json(d: dict[str, Any], off: int) -> Canon:
    return (
        _unb64(d["key"]),
        int(d.get("create_revision", 0)) - off,
        int(d.get("mod_revision", 0)) - off,
        int(d.get("version", 0)),
        _unb64(d.get("value", "")),
        int(d.get("lease", 0)),
    )


def _hdr(d: dict[str, Any], off: int) -> int:
    return _rev(int(d.get("header", {}).get("revision", 0)), -off)


def theirs(kind: str, d: dict[str, Any], off: int) -> Canon:
    if kind == "range":
        kvs = [_kv_json(kv, off) for kv in d.get("kvs", [])]
        return ("range", _hdr(d, off), kvs, bool(d.get("more", False)), int(d.get("count", 0)))
    if kind == "put":
        prev = _kv_json(d["prev_kv"], off) if "prev_kv" in d else None
        return ("put", _hdr(d, off), prev)
    if kind == "delete":
        prevs = [_kv_json(kv, off) for kv in d.get("prev_kvs", [])]
        return ("delete", _hdr(d, off), int(d.get("deleted", 0)), prevs)
    assert kind == "txn"
    subs: list[Canon] = []
    for r in d.get("responses", []):
        ((name, body),) = r.items()
        sub_kind = {"response_range": "range", "response_put": "put", "response_delete_range": "delete"}.get(
            name, "txn"
        )
        subs.append(theirs(sub_kind, body, off))
    return ("txn", _hdr(d, off), bool(d.get("succeeded", False)), subs)


def error_canon(e: StoreError | EtcdError) -> Canon:
    return ("error", e.code)


def event_canon(ev: Event) -> Canon:
    return (int(ev.type), ev.kv.key, kv_canon(ev.kv), kv_canon(ev.prev_kv) if ev.prev_kv else None)


def event_canon_json(ev: dict[str, Any], off: int = 0) -> Canon:
    """An event from the gateway, revisions shifted by `off` (a tombstone's 0s stay 0)."""
    d = ev["kv"]
    kv = (
        _unb64(d["key"]),
        _rev(int(d.get("create_revision", 0)), -off),
        _rev(int(d.get("mod_revision", 0)), -off),
        int(d.get("version", 0)),
        _unb64(d.get("value", "")),
        int(d.get("lease", 0)),
    )
    prev = _kv_json(ev["prev_kv"], off) if "prev_kv" in ev else None
    return (1 if ev.get("type") == "DELETE" else 0, kv[0], kv, prev)
