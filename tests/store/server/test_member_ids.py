"""Member IDs are never reused (etcd's rule): a removed member's ID stays taken."""

from __future__ import annotations

import msgpack

from store.api.cluster import MemberInfo
from store.raft.types import ConfChange, ConfChangeType
from store.server.state import ReplicatedState


def _member(i: int) -> MemberInfo:
    return MemberInfo(i, f"m{i}", f"tcp://127.0.0.1:{7000 + i}", f"tcp://127.0.0.1:{8000 + i}", "", False)


def test_the_id_of_a_removed_member_is_not_given_again_even_after_a_snapshot() -> None:
    state = ReplicatedState.new(1, 1, [_member(1), _member(2), _member(3)])
    assert state.next_member_id() == 4
    cc = ConfChange(ConfChangeType.REMOVE_NODE, 3, msgpack.packb([0, 0, None]))
    state.apply_member_change(cc, state.decode_member_change(cc)[2])
    assert sorted(state.members) == [1, 2]
    assert state.next_member_id() == 4  # not 3, the removed member's
    restored = ReplicatedState.restore(state.snapshot(), 1)
    assert restored.removed == {3}
    assert restored.next_member_id() == 4
