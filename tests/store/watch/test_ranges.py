"""RangeIndex stabbing queries against a brute-force scan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from store.watch.ranges import RangeIndex

KEY = st.binary(max_size=2)
RANGE = st.tuples(KEY, st.one_of(st.none(), KEY))


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), RANGE, st.integers(0, 3)), max_size=30), probes=st.lists(KEY, max_size=10))
def test_stab_matches_brute_force(ops: list[tuple[bool, tuple[bytes, bytes | None], int]], probes: list[bytes]) -> None:
    idx: RangeIndex[int] = RangeIndex()
    ref: set[tuple[bytes, bytes | None, int]] = set()
    for add, (lo, hi), item in ops:
        if add and (lo, hi, item) not in ref:
            idx.add(lo, hi, item)
            ref.add((lo, hi, item))
        elif not add and (lo, hi, item) in ref:
            idx.remove(lo, hi, item)
            ref.discard((lo, hi, item))
        for k in probes:
            got = sorted(item for group in idx.stab(k) for item in group)
            want = sorted(i for lo2, hi2, i in ref if lo2 <= k and (hi2 is None or k < hi2))
            # an item may sit in several ranges: compare as multisets
            assert got == want
    assert len(idx) == len(ref)


def test_lookup_does_not_rebuild_when_only_members_change() -> None:
    idx: RangeIndex[str] = RangeIndex()
    idx.add(b"a", b"c", "w1")
    assert [list(g) for g in idx.stab(b"b")] == [["w1"]]
    idx.add(b"a", b"c", "w2")  # same range: no rebuild needed
    assert not _dirty(idx)
    assert [list(g) for g in idx.stab(b"b")] == [["w1", "w2"]]
    idx.remove(b"a", b"c", "w1")
    idx.remove(b"a", b"c", "w2")
    assert _dirty(idx)
    assert idx.stab(b"b") == []
    assert not idx


def _dirty(idx: RangeIndex[str]) -> bool:
    return idx._dirty
