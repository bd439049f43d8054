"""The sync loop: Services and EndpointSlices watched, the node's table kept as they say.

Every informer event marks the state dirty; the loop then renders the whole table and, when the
text changed, applies it (in place over the last applied one, so affinity survives).  Bursts
are coalesced: at most one sync per `min_interval`, and one at least every `resync` seconds
(which also puts the table back if someone deleted it).  A failed
apply is logged and retried after `retry` seconds with a whole replace.

Sync latency, from the first event a sync covers to its rules being live, is observed in the
`raftkube_proxy_sync_latency_seconds` histogram (and kept in `latencies` for benchmarks).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from components.client.informer import EventHandler, SharedInformer
from components.proxy import nft, rules
from machinery.objects import Obj

log = logging.getLogger("raftkube.proxy")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Apply = Callable[[rules.Ruleset, rules.Ruleset | None], None]
Remove = Callable[[str], None]
Tables = Callable[[], list[str]]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.sync_latency = Histogram(
            "raftkube_proxy_sync_latency_seconds",
            "From an informer event to its rules being live",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.sync_duration = Histogram(
            "raftkube_proxy_sync_duration_seconds",
            "One render and apply of the node's table",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.sync_failures = Counter(
            "raftkube_proxy_sync_failures", "Applies nft refused or that failed", registry=self.registry
        )


class Proxier:
    def __init__(
        self,
        services: SharedInformer,
        slices: SharedInformer,
        node: rules.Node,
        *,
        apply: Apply = nft.apply,
        remove: Remove = nft.remove,
        tables: Tables = nft.tables,
        metrics: Metrics | None = None,
        min_interval: float = 0.1,
        resync: float = 30.0,
        retry: float = 1.0,
    ) -> None:
        self.services, self.slices, self.node = services, slices, node
        self._apply, self._remove, self._tables = apply, remove, tables
        self.metrics = metrics or Metrics()
        self.min_interval, self.resync, self.retry = min_interval, resync, retry
        self.applied: rules.Ruleset | None = None  # what is live, as far as we know
        self.last_error: str | None = None
        self.latencies: deque[float] = deque(maxlen=100_000)
        self._pending_since: float | None = None  # the first event not yet live
        self._wake = asyncio.Event()
        self._lock = threading.Lock()
        self._stopped = False
        handler = EventHandler(on_add=self._changed, on_update=self._changed_update, on_delete=self._changed)
        services.add_handler(handler)
        slices.add_handler(handler)

    def _changed(self, _obj: Obj) -> None:
        if self._pending_since is None:
            self._pending_since = time.monotonic()
        self._wake.set()

    def _changed_update(self, _old: Obj, new: Obj) -> None:
        self._changed(new)

    def healthy(self) -> str | None:
        """None once the rules are live and while the last sync succeeded (kube-proxy's
        /healthz asks much the same)."""
        if self.last_error is not None:
            return f"last sync failed: {self.last_error}"
        return None if self.applied is not None else "not synced yet"

    def sync(self, force: bool = False) -> bool:
        """Render and, when it differs from what is live, apply (with `force`, first check that
        the table is there at all); whether it is live now.  Call it on the event loop's
        thread, or give snapshots to `sync_objects`."""
        return self.sync_objects(*self.snapshot(), force)

    def snapshot(self) -> tuple[list[Obj], list[Obj], float | None]:
        """The objects to render and when the first change they hold was seen; on the loop's
        thread, where the informers change their stores."""
        pending, self._pending_since = self._pending_since, None
        return self.services.indexer.objects(), self.slices.indexer.objects(), pending

    def sync_objects(self, services: list[Obj], slices: list[Obj], pending: float | None, force: bool = False) -> bool:
        with self._lock:  # one sync at a time, and none once the table is being removed
            if self._stopped:
                return False
            return self._sync(services, slices, pending, force)

    def _sync(self, services: list[Obj], slices: list[Obj], pending: float | None, force: bool) -> bool:
        started = time.monotonic()
        ruleset = rules.render(services, slices, self.node)
        if force and self.applied is not None and not self._present(ruleset.table):
            log.warning("table %s is gone: putting it back", ruleset.table)
            self.applied = None
        if self.applied is not None and ruleset.text == self.applied.text:
            self._done(pending, started)
            return True
        try:
            self._apply(ruleset, self.applied)
        except nft.NftError as e:
            self.metrics.sync_failures.inc()
            self.last_error = str(e)
            self.applied = None  # unknown: replace whole next time
            if pending is not None:  # still not live: count from the first change
                self._pending_since = min(pending, self._pending_since or pending)
            log.error("applying the rules failed: %s", e)
            return False
        self.applied = ruleset
        self._done(pending, started)
        return True

    def _present(self, table: str) -> bool:
        try:
            return table in self._tables()
        except nft.NftError as e:
            log.warning("cannot list the tables: %s", e)
            return False

    def _done(self, pending: float | None, started: float) -> None:
        now = time.monotonic()
        self.last_error = None
        self.metrics.sync_duration.observe(now - started)
        if pending is not None:
            self.latencies.append(now - pending)
            self.metrics.sync_latency.observe(now - pending)
            log.debug("synced in %.3fs, %.3fs after the first change", now - started, now - pending)

    async def run(self) -> None:
        """Keep the table in sync until cancelled; the table is removed on the way out."""
        self.services.start()
        self.slices.start()
        try:
            await asyncio.gather(self.services.wait_synced(), self.slices.wait_synced())
            last = 0.0
            forced = True
            while True:
                wait = self.min_interval - (time.monotonic() - last)
                if wait > 0:
                    await asyncio.sleep(wait)
                last = time.monotonic()
                self._wake.clear()
                services, slices, pending = self.snapshot()
                # a resync also puts back a table someone deleted
                ok = await asyncio.to_thread(self.sync_objects, services, slices, pending, forced)
                try:
                    await asyncio.wait_for(self._wake.wait(), self.resync if ok else self.retry)
                    forced = False
                except TimeoutError:
                    forced = True
        finally:
            await self.services.stop()
            await self.slices.stop()
            # a sync still running in its thread (we were cancelled while awaiting it) must
            # finish first, or it could put the table back after we removed it
            await asyncio.to_thread(self.remove)

    def remove(self) -> None:
        """Take the table away, after any sync in flight, and apply nothing more."""
        table = rules.table_name(self.node.name)
        with self._lock:
            self._stopped = True
            try:
                self._remove(table)
                log.info("removed table %s", table)
            except (nft.NftError, ValueError) as e:
                log.error("removing table %s failed: %s", table, e)
