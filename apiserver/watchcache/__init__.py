"""The apiserver's watch cache: one `Cacher` per resource serves LIST and WATCH from memory.

Modules, one concept each: `events` (entries, cache events, shared watch events), `history`
(the window of recent events), `state` (current objects in key order), `filter` (what a
request selects and how a change looks to it), `watcher` (one client's bounded stream),
`index` (watchers by namespace and exact field), `continuation` (continue tokens),
`clock`, and `cacher` (the feed, LIST and WATCH).

Resource-version rules, as kube-apiserver's cacher:
- LIST rv "" = consistent: the store's current revision is read and the cache waits (bounded)
  until it has seen it; "0" = whatever the cache holds; N (NotOlderThan or no match) = wait for N;
  N Exact = the state at N rebuilt from the window, or 410 when N left it.  Timeouts are 504
  "Too large resource version".  Pages keep the first page's revision (continue tokens).
- WATCH rv "" = consistent start (wait as for LIST, but on timeout start from the cache: later
  changes still arrive as events), then as "0": ADDED for every match, then changes; N = every
  change after N from the window, or 410 "too old resource version"; sendInitialEvents=true adds
  a BOOKMARK annotated k8s.io/initial-events-end after the initial ADDED events.
- A watcher whose buffer fills, and every watcher when the cache must re-list (the store
  compacted what it would resume from), gets ERROR 410 Expired and ends: its client re-lists.
  A storage watch that merely ends is resumed from the next revision, as client-go's reflector does.
- On idle resources the cache only learns the store moved on through `Progress` notices (the
  storage's, `storage.interface.Progress`), which it asks for (`Storage.request_progress`)
  before waiting; a backend that gives none makes a consistent LIST wait fresh_timeout, then 504.
"""

from apiserver.storage.interface import Progress
from apiserver.watchcache.cacher import INITIAL_EVENTS_END, CacheList, Cacher, default_fields
from apiserver.watchcache.events import WatchEvent
from apiserver.watchcache.filter import FieldMatcher, LabelMatcher
from apiserver.watchcache.watcher import CacheWatcher
from machinery.clock import Clock, SystemClock

__all__ = [
    "INITIAL_EVENTS_END",
    "CacheList",
    "CacheWatcher",
    "Cacher",
    "Clock",
    "FieldMatcher",
    "LabelMatcher",
    "Progress",
    "SystemClock",
    "WatchEvent",
    "default_fields",
]
