"""Majority maths: the commit index and the outcome of an election for a voter set."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import IntEnum


class VoteResult(IntEnum):
    PENDING = 0
    LOST = 1
    WON = 2


def majority(n: int) -> int:
    return n // 2 + 1


def committed_index(voters: Collection[int], match: Mapping[int, int]) -> int:
    """The largest index that a majority of `voters` has acknowledged.

    Sorting the voters' match indexes in descending order, it is the one at position
    quorum-1: that many voters (a quorum) hold it or more.  An empty voter set commits
    nothing it did not already have, so it returns "infinitely large" by convention.
    """
    if not voters:
        return 1 << 62
    acked = sorted((match.get(v, 0) for v in voters), reverse=True)
    return acked[majority(len(voters)) - 1]


def vote_result(voters: Collection[int], votes: Mapping[int, bool]) -> VoteResult:
    """WON once a majority granted, LOST once a majority can no longer be reached."""
    if not voters:
        return VoteResult.WON
    granted = rejected = 0
    for v in voters:
        vote = votes.get(v)
        if vote is None:
            continue
        if vote:
            granted += 1
        else:
            rejected += 1
    q = majority(len(voters))
    if granted >= q:
        return VoteResult.WON
    if len(voters) - rejected >= q:
        return VoteResult.PENDING
    return VoteResult.LOST
