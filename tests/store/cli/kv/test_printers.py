"""What `raftkube kv` prints (store.cli.kv.printers), in-process: JSON shapes and etcdctl's lines."""

from __future__ import annotations

import json

import pytest

from store.api.kv import DeleteRangeResponse, KeyValue, PutResponse, RangeResponse, TxnResponse
from store.cli.kv.printers import emit_json, emit_lines, kv_json, op_json, txn_lines

KV = KeyValue(key=b"k", create_revision=2, mod_revision=3, version=1, value=b"a\xffb")


def test_a_key_value_in_json_shows_bytes_that_are_not_utf8_escaped() -> None:
    assert kv_json(KV) == {
        "key": "k",
        "value": "a\\xffb",
        "create_revision": 2,
        "mod_revision": 3,
        "version": 1,
        "lease": 0,
    }


def test_txn_responses_name_their_op() -> None:
    assert op_json(RangeResponse(9, [KV], count=1)) == {"op": "get", "kvs": [kv_json(KV)], "count": 1, "more": False}
    assert op_json(PutResponse(9)) == {"op": "put", "prev_kv": None}
    assert op_json(DeleteRangeResponse(9, deleted=2)) == {"op": "del", "deleted": 2, "prev_kvs": []}


def test_txn_human_lines_are_etcdctls() -> None:
    r = TxnResponse(9, True, [PutResponse(9), DeleteRangeResponse(9, deleted=1), RangeResponse(9, [KV], count=1)])
    assert txn_lines(r) == [b"SUCCESS", b"", b"OK", b"", b"1", b"", b"k", b"a\xffb"]


def test_output_is_one_line_each_utf8(capsys: pytest.CaptureFixture[str]) -> None:
    emit_json({"v": "é"})
    emit_lines([b"raw", "text"])
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0]) == {"v": "é"} and out[1:] == ["raw", "text"]
