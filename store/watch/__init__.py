"""Watch: the hub that turns applied revisions into per-watcher response streams, with etcd's
guarantees (ordered, unique, gap-free, atomic per revision, resumable) and without ever
blocking the apply loop on a slow watcher."""

from store.watch.group import WatcherGroup
from store.watch.hub import DEFAULT_BUFFER_EVENTS, DEFAULT_SYNC_REVISIONS, History, WatchHub
from store.watch.ranges import RangeIndex
from store.watch.watcher import Watcher

__all__ = [
    "DEFAULT_BUFFER_EVENTS",
    "DEFAULT_SYNC_REVISIONS",
    "History",
    "RangeIndex",
    "WatchHub",
    "Watcher",
    "WatcherGroup",
]
