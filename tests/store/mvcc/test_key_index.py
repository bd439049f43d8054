"""KeyIndex: lookups by revision, generations, and compaction as etcd's keyIndex does them."""

from __future__ import annotations

from store.api.kv import KeyValue
from store.mvcc.key_index import KeyIndex
from store.mvcc.revision import Revision


def _kv(key: bytes, create: int, mod: int, ver: int) -> KeyValue:
    return KeyValue(key, create, mod, ver, b"v%d" % mod)


def _example() -> KeyIndex:
    # etcd's keyIndex doc example: put 2, 4, 6 (tombstone), put 8, 10, 12 (tombstone), put 14, 16.
    ki = KeyIndex(b"foo")
    ki.put(2, _kv(b"foo", 2, 2, 1))
    ki.put(4, _kv(b"foo", 2, 4, 2))
    ki.tombstone(6)
    ki.put(8, _kv(b"foo", 8, 8, 1))
    ki.put(10, _kv(b"foo", 8, 10, 2))
    ki.tombstone(12)
    ki.put(14, _kv(b"foo", 14, 14, 1))
    ki.put(16, _kv(b"foo", 14, 16, 2))
    return ki


def test_get_at_revisions() -> None:
    ki = _example()
    assert ki.get(1) is None
    assert ki.get(3) is not None and ki.get(3).mod_revision == 2  # type: ignore[union-attr]
    assert ki.get(6) is None  # deleted at 6
    assert ki.get(7) is None
    assert ki.get(9).mod_revision == 8  # type: ignore[union-attr]
    assert ki.get(100).mod_revision == 16  # type: ignore[union-attr]
    assert ki.latest() is not None and ki.latest().version == 2  # type: ignore[union-attr]
    assert ki.since(10) == [12, 14, 16]


def test_generations_view() -> None:
    gens = _example().generations()
    assert [(g.created, g.version, [r.main for r in g.revs], g.closed) for g in gens] == [
        (2, 3, [2, 4, 6], True),
        (8, 3, [8, 10, 12], True),
        (14, 2, [14, 16], False),
    ]
    assert gens[0].revs[0] == Revision(2, 0)


def test_compact_keeps_the_value_readable_at_the_compaction_point() -> None:
    ki = _example()
    assert not ki.compact(5)  # newest change <= 5 is the put at 4: kept
    assert ki.revs == [4, 6, 8, 10, 12, 14, 16]
    assert not ki.compact(6)  # the tombstone at 6 is the newest: dropped with everything before
    assert ki.revs == [8, 10, 12, 14, 16]
    assert not ki.compact(13)
    assert ki.revs == [14, 16]
    assert not ki.compact(16)
    assert ki.revs == [16]
    assert ki.get(16) is not None


def test_compact_removes_a_deleted_key_entirely() -> None:
    ki = KeyIndex(b"k")
    ki.put(2, _kv(b"k", 2, 2, 1))
    ki.tombstone(3)
    assert not ki.compact(2)
    assert ki.compact(3)
    assert ki.is_empty()


def test_compact_before_first_change_is_a_no_op() -> None:
    ki = KeyIndex(b"k")
    ki.put(5, _kv(b"k", 5, 5, 1))
    assert not ki.compact(4)
    assert ki.revs == [5]
