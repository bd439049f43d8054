"""Multi-version key-value store with etcd v3 semantics: revisions, history, compaction.

`KVStore` is a pure state machine (no I/O, no clock): the member server calls it from its
apply loop with already-committed requests, feeds the returned events to the watch hub,
and serves reads from it.
"""

from store.mvcc.index import Index
from store.mvcc.key_index import Generation, KeyIndex
from store.mvcc.kvstore import KVStore
from store.mvcc.revision import INITIAL_REVISION, Revision
from store.mvcc.validate import MAX_TXN_OPS

__all__ = ["INITIAL_REVISION", "MAX_TXN_OPS", "Generation", "Index", "KVStore", "KeyIndex", "Revision"]
