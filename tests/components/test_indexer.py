"""The indexer's indexes always equal what a scan of the stored objects would find."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.client.indexer import (
    LABEL_INDEX,
    NODE_NAME_INDEX,
    OWNER_UID_INDEX,
    STANDARD_INDEXERS,
    Indexer,
    key_of,
    split_key,
)
from machinery.objects import Obj


def pod(name: str, ns: str, node: str, owner: str, app: str) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "ReplicaSet", "name": owner}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


pods = st.builds(
    pod,
    st.sampled_from(["p1", "p2", "p3"]),
    st.sampled_from(["ns1", "ns2"]),
    st.sampled_from(["", "n1", "n2"]),
    st.sampled_from(["", "u1", "u2"]),
    st.sampled_from(["web", "db"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("put"), pods), st.tuples(st.just("remove"), pods)), max_size=30))
def test_indexes_match_a_scan(steps: list[tuple[str, Obj]]) -> None:
    idx = Indexer()
    for op, obj in steps:
        if op == "put":
            idx.put(obj)
        else:
            idx.remove(key_of(obj))
    for name, fn in STANDARD_INDEXERS.items():
        values = {v for o in idx.objects() for v in fn(o)}
        for value in values | {"absent"}:
            expected = sorted(key_of(o) for o in idx.objects() if value in fn(o))
            assert idx.index_keys(name, value) == expected


def test_lookups_by_node_owner_and_label() -> None:
    idx = Indexer()
    idx.put(pod("a", "ns1", "n1", "u1", "web"))
    idx.put(pod("b", "ns1", "n2", "u1", "db"))
    idx.put(pod("a", "ns1", "n2", "u1", "web"))  # moved: filed again
    assert idx.index_keys(NODE_NAME_INDEX, "n1") == []
    assert idx.index_keys(NODE_NAME_INDEX, "n2") == ["ns1/a", "ns1/b"]
    assert idx.index_keys(OWNER_UID_INDEX, "u1") == ["ns1/a", "ns1/b"]
    assert [o["metadata"]["name"] for o in idx.by_index(LABEL_INDEX, "app=db")] == ["b"]
    with pytest.raises(KeyError, match="no index 'nope'"):
        idx.by_index("nope", "x")
    idx.add_indexers({"first-letter": lambda o: (o["metadata"]["name"][0],)})
    assert idx.index_keys("first-letter", "a") == ["ns1/a"]
    with pytest.raises(ValueError, match="exists already"):
        idx.add_indexers({"first-letter": lambda o: ()})


def test_keys() -> None:
    assert key_of({"metadata": {"name": "n1"}}) == "n1"
    assert split_key("ns/x") == ("ns", "x") and split_key("n1") == (None, "n1")
