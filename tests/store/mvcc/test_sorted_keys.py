"""SortedKeys against a plain sorted set, with small chunks so that splits and merges happen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.mvcc import sorted_keys
from store.mvcc.sorted_keys import SortedKeys

KEYS = st.binary(min_size=0, max_size=3)


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sorted_keys, "LOAD", 4)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["add", "remove", "remove_many"]), st.lists(KEYS, max_size=6)), max_size=40),
    lo=KEYS,
    hi=st.one_of(st.none(), KEYS),
)
def test_matches_a_sorted_set(ops: list[tuple[str, list[bytes]]], lo: bytes, hi: bytes | None) -> None:
    sk = SortedKeys()
    ref: set[bytes] = set()
    for op, keys in ops:
        if op == "add":
            for k in keys:
                if k not in ref:
                    sk.add(k)
                    ref.add(k)
        elif op == "remove":
            for k in keys:
                if k in ref:
                    sk.remove(k)
                    ref.discard(k)
        else:
            present = {k for k in keys if k in ref}
            sk.remove_many(present)
            ref -= present
        assert list(sk) == sorted(ref)
        assert len(sk) == len(ref)
        for chunk, mx in zip(sk._chunks, sk._maxes, strict=True):
            assert chunk and chunk[-1] == mx and len(chunk) <= 2 * sorted_keys.LOAD
    assert list(sk.irange(lo, hi)) == [k for k in sorted(ref) if k >= lo and (hi is None or k < hi)]
    for k in ref:
        assert k in sk


def test_remove_missing_key_raises() -> None:
    sk = SortedKeys([b"a", b"c"])
    with pytest.raises(KeyError):
        sk.remove(b"b")
    assert list(sk) == [b"a", b"c"]


def test_ascending_inserts_append_and_split() -> None:
    sk = SortedKeys()
    keys = [b"k%04d" % i for i in range(100)]
    for k in keys:
        sk.add(k)
    assert list(sk) == keys
    assert len(sk._chunks) > 1
    assert list(sk.irange(b"k0010", b"k0020")) == keys[10:20]
    assert list(sk.irange(b"k0095", None)) == keys[95:]
    assert list(sk.irange(b"z", None)) == []
