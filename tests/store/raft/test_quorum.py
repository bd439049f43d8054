"""Unit tests of the majority maths (quorum.py), cross-checked against naive definitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from store.raft import quorum
from store.raft.quorum import VoteResult


def naive_committed_index(voters: set[int], match: dict[int, int]) -> int:
    """The largest index acknowledged by more than half of the voters, by trying every candidate."""
    candidates = {0} | {match.get(v, 0) for v in voters}
    best = 0
    for idx in candidates:
        acked = sum(1 for v in voters if match.get(v, 0) >= idx)
        if 2 * acked > len(voters):
            best = max(best, idx)
    return best


def naive_vote_result(voters: set[int], votes: dict[int, bool]) -> VoteResult:
    yes = sum(1 for v in voters if votes.get(v) is True)
    no = sum(1 for v in voters if votes.get(v) is False)
    if 2 * yes > len(voters):
        return VoteResult.WON
    if 2 * (len(voters) - no) > len(voters):
        return VoteResult.PENDING
    return VoteResult.LOST


def test_majority_sizes() -> None:
    """A majority of n is n//2 + 1."""
    assert [quorum.majority(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


def test_committed_index_examples() -> None:
    """committed_index is the index held by a majority; missing voters count as 0, non-voters not at all."""
    assert quorum.committed_index([1, 2, 3], {1: 5, 2: 3, 3: 1}) == 3
    assert quorum.committed_index([1, 2, 3], {1: 5}) == 0
    assert quorum.committed_index([1, 2, 3, 4], {1: 9, 2: 9, 3: 2, 4: 1}) == 2
    assert quorum.committed_index([1, 2, 3], {1: 7, 2: 7, 4: 100, 5: 100}) == 7
    assert quorum.committed_index([1, 2, 3], {1: 7, 4: 100, 5: 100}) == 0
    assert quorum.committed_index([], {}) == 1 << 62


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(1, 9), st.integers(0, 50), min_size=0, max_size=9),
    st.sets(st.integers(1, 9), min_size=1, max_size=7),
)
def test_committed_index_matches_naive_definition(match: dict[int, int], voters: set[int]) -> None:
    """committed_index agrees with 'largest index acknowledged by a strict majority of voters'."""
    assert quorum.committed_index(voters, match) == naive_committed_index(voters, match)


def test_vote_result_examples() -> None:
    """vote_result is WON at a majority of grants, LOST once a majority is out of reach, else PENDING."""
    voters = [1, 2, 3]
    assert quorum.vote_result(voters, {}) == VoteResult.PENDING
    assert quorum.vote_result(voters, {1: True}) == VoteResult.PENDING
    assert quorum.vote_result(voters, {1: True, 2: True}) == VoteResult.WON
    assert quorum.vote_result(voters, {1: True, 2: False}) == VoteResult.PENDING
    assert quorum.vote_result(voters, {1: True, 2: False, 3: False}) == VoteResult.LOST
    assert quorum.vote_result(voters, {4: True, 5: True}) == VoteResult.PENDING  # non-voters do not count
    assert quorum.vote_result([1, 2, 3, 4], {1: True, 2: True}) == VoteResult.PENDING
    assert quorum.vote_result([1, 2, 3, 4], {1: True, 2: True, 3: False, 4: False}) == VoteResult.LOST
    assert quorum.vote_result([], {}) == VoteResult.WON


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.integers(1, 9), min_size=1, max_size=7),
    st.dictionaries(st.integers(1, 9), st.booleans(), max_size=9),
)
def test_vote_result_matches_naive_definition(voters: set[int], votes: dict[int, bool]) -> None:
    """vote_result agrees with a direct count of grants and rejections among the voters."""
    assert quorum.vote_result(voters, votes) == naive_vote_result(voters, votes)
