"""The member's side of watch streams: which connection owns which watch, and getting the
hub's responses onto the sockets without letting a slow reader cost unbounded memory.

Each watch belongs to the connection that created it; cancels and progress requests from
any other connection are refused (watch IDs are small integers anyone could guess).

Memory stays bounded whatever a client does:
* a connection whose unsent backlog is over `pause_bytes` gets no new watch output: its
  watchers keep their place in the hub (a bounded buffer of shared events, then a position
  in history) and catch up once it reads again; the other watchers, on this connection or
  any other, are not held up;
* a connection holds at most MAX_WATCHES_PER_CONNECTION watches, a member MAX_WATCHES;
* a connection whose backlog passes `limit_bytes` anyway (one huge revision) is aborted:
  the socket and its unsent bytes are dropped at once and its watchers cancelled.  Its
  client resumes on any member from the last revision it got;
* all connections together owe at most a budget made from `output_limit` (`budget_for`,
  watch_budget.py): past it, the connections that have gone longest without reading are
  aborted the same way, so that no number of slow clients grows the member by more than
  `output_limit`.

An aborted connection gets no error frame: what it owes is dropped with it (it is not
reading, so a frame queued behind megabytes it will never read would change nothing), and
the member log says why it went.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from store import canaries, failpoints
from store.api import errors as E
from store.api.watch import WatchCreateRequest, WatchResponse
from store.server import memory
from store.server.state import ReplicatedState
from store.server.unsafe_watch import drop_after_compaction, strip_delete_prev_kv
from store.server.watch_budget import OutputBudget
from store.watch.watcher import Watcher

log = logging.getLogger("raftkube.watch")

DISPATCH_EVENTS = 50_000
"""Events sent per dispatch round at most; the rest go out on the next loop turn."""
DISPATCH_BYTES = 16 << 20
"""Bytes of frames made per dispatch round at most (about: the response that passes it is
kept), whatever the number of connections: a round's frames are all in memory at once.
Less when watch_output_limit is small (`round_bytes_for`)."""
PAUSE_BYTES = 4 << 20
"""Unsent bytes on a connection above which its watchers get no new output for now."""
MAX_WATCHES_PER_CONNECTION = 10_000
MAX_WATCHES = 200_000
"""Watches a member holds at most (each costs about a kilobyte, more while it catches up)."""
OUTPUT_COST = 2
"""Bytes of member memory one counted unsent byte may cost.  Measured with
bench/store_slow_flood.py (101 TLS connections that never read, 2,000 watches): RSS grew
1.1-1.6 bytes per counted byte beyond the round's own cost, the rest being the allocator's
slack and the socket transport's buffer growing ahead of its contents."""
ROUND_COPIES = 3
"""Copies of a dispatch round's bytes alive at once at most: the frames, each connection's
frames joined, and that encrypted."""


def round_bytes_for(output_limit: int) -> int:
    """Bytes of frames one dispatch round makes at most: DISPATCH_BYTES, or an eighth of the
    limit if that is less (so a small limit still leaves most of itself to the budget)."""
    return max(1, min(DISPATCH_BYTES, output_limit // 8))


def budget_for(output_limit: int) -> int:
    """Unsent bytes all connections together may owe, so that the member's memory for watch
    output stays under `output_limit`: what a dispatch round may take is set aside, and each
    counted byte is taken to cost OUTPUT_COST."""
    return max(1, (output_limit - ROUND_COPIES * round_bytes_for(output_limit)) // OUTPUT_COST)


class FrameEncoder(Protocol):
    """Makes the bytes of watch responses for one kind of owner, for one dispatch round
    (it may cache pieces shared between watchers for the round)."""

    def watch_frame(self, token: int, resp: WatchResponse) -> bytes: ...


class WatchOwner(Protocol):
    """What owns watches: a connection of our protocol (store/server/client_conn.py), or a
    Watch call of the etcd API (store/etcdapi/watch.py)."""

    watches: dict[int, int]
    """Hub watch id -> the owner's token for it (our request id; etcd's per-stream watch id)."""

    @property
    def closed(self) -> bool: ...

    @property
    def peer(self) -> str: ...

    def token(self, resp: WatchResponse) -> int | None:
        """The owner's token for the watch `resp` answers (None: not its watch any more)."""
        ...

    def frame_encoder(self, header: list[int]) -> FrameEncoder:
        """A new encoder for a round, from the member's response header: one per round is
        shared by every owner of the same type."""
        ...

    def backlog(self) -> int:
        """Bytes this owner owes its client; over all owners, each unsent byte counted once."""
        ...

    def connection_watches(self) -> int:
        """Watches held by this owner's client connection (MAX_WATCHES_PER_CONNECTION)."""
        ...

    def send(self, data: bytes) -> None: ...

    def abort(self) -> None: ...


SYNC_IDLE = 0.02
"""Seconds between two catch-up rounds when there was nothing to catch up."""


class WatchStreams:
    def __init__(
        self,
        state: ReplicatedState,
        header: Callable[[], list[int]],
        progress_interval: float,
        limit_bytes: int,
        output_limit: int,
        pause_bytes: int = PAUSE_BYTES,
    ) -> None:
        self.state = state
        self.header = header
        self.progress_interval = progress_interval
        self.limit_bytes = limit_bytes
        self.pause_bytes = min(pause_bytes, limit_bytes // 2)
        self.output_limit = output_limit
        self.round_bytes = round_bytes_for(output_limit)
        self.budget: OutputBudget[WatchOwner] = OutputBudget(budget_for(output_limit))
        """What all connections owe together, and who is cut off first past `budget_for(output_limit)`."""
        self._owner: dict[int, WatchOwner] = {}
        self._scheduled = False
        self._compact_seen = state.kv.compact_revision
        """drop-watch-event-at-compaction: the compact revision the canary last acted on."""
        self._drop_armed: dict[int, None] = {}
        """drop-watch-event-at-compaction: watch ids whose next event is to be dropped."""
        self.cut_off = 0
        """Connections aborted for not reading (a metric)."""
        self._round_bytes = 0
        """Bytes of frames made so far in the dispatch round under way."""

    # ------------------------------------------------------------------ requests
    def create(self, conn: WatchOwner, rid: int, req: WatchCreateRequest) -> int:
        """Start a watch owned by `conn` under its token `rid`; the hub's id for it."""
        held = conn.connection_watches()
        if held >= MAX_WATCHES_PER_CONNECTION:
            raise E.TooManyWatchesError(f"this connection holds {held} watches, the most allowed")
        if self.state.hub.watcher_count() >= MAX_WATCHES:
            raise E.TooManyWatchesError(f"this member holds {MAX_WATCHES} watches, the most allowed")
        wid = self.state.hub.create(req)
        conn.watches[wid] = rid
        self._owner[wid] = conn
        self.schedule()
        return wid

    def cancel(self, conn: WatchOwner, watch_id: int) -> None:
        if watch_id not in conn.watches:
            raise E.WatchNotFoundError(f"no watch {watch_id} on this connection")
        self._forget(conn, watch_id)

    def progress(self, conn: WatchOwner, watch_id: int) -> None:
        """A progress notification for one of this connection's watches (0: all of them)."""
        if watch_id == 0:
            for wid in list(conn.watches):
                self.state.hub.request_progress(wid)
        elif watch_id in conn.watches:
            self.state.hub.request_progress(watch_id)
        else:
            raise E.WatchNotFoundError(f"no watch {watch_id} on this connection")
        self.schedule()

    def drop(self, conn: WatchOwner) -> int:
        """The connection is gone: its watches end, and what it owed no longer counts.
        Returns what it owed, as last counted."""
        owed = self.budget.forget(conn)
        for wid in list(conn.watches):
            self._forget(conn, wid)
        return owed

    def _forget(self, conn: WatchOwner, watch_id: int) -> None:
        self.state.hub.cancel(watch_id)
        conn.watches.pop(watch_id, None)
        self._owner.pop(watch_id, None)
        self._drop_armed.pop(watch_id, None)

    def watcher_count(self) -> int:
        return self.state.hub.watcher_count()

    # ------------------------------------------------------------------ sending
    def schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _held(self, w: Watcher, queued: dict[WatchOwner, int] | None = None) -> bool:
        """Whether `w` gets no output now: its connection is gone or has more unsent than
        `pause_bytes` (counting `queued`, what this round has for it but not written yet).
        A watcher nobody owns is not held: the hub drains it."""
        conn = self._owner.get(w.id)
        if conn is None:
            return False
        if self._round_bytes > self.round_bytes:
            return True  # this round has made enough: the rest on the next loop turn
        extra = queued.get(conn, 0) if queued else 0
        return conn.closed or conn.backlog() + extra > self.pause_bytes

    def _dispatch(self) -> None:
        self._scheduled = False
        hub = self.state.hub
        header = self.header()
        encoders: dict[Any, FrameEncoder] = {}
        pending: dict[WatchOwner, list[bytes]] = {}
        sizes: dict[WatchOwner, int] = {}
        self._round_bytes = 0

        responses = hub.drain_iter(max_events=DISPATCH_EVENTS, held=lambda w: self._held(w, sizes))
        if canaries.DROP_WATCH_EVENT_AT_COMPACTION:
            responses = iter(self._drop_event_after_compaction(list(responses)))
        for resp in responses:
            if canaries.SKIP_PREV_KV:
                resp = strip_delete_prev_kv(resp)
            conn = self._owner.get(resp.watch_id)
            if conn is None:
                continue
            rid = conn.token(resp)
            if rid is None:
                continue
            enc = encoders.get(type(conn))
            if enc is None:
                enc = encoders[type(conn)] = conn.frame_encoder(header)
            frame = enc.watch_frame(rid, resp)
            pending.setdefault(conn, []).append(frame)
            sizes[conn] = sizes.get(conn, 0) + len(frame)
            self._round_bytes += len(frame)
            if resp.canceled:
                conn.watches.pop(resp.watch_id, None)
                self._owner.pop(resp.watch_id, None)
        # Bounded work per loop turn: the rest goes out on the next one.  (Watchers that are
        # held stay pending too; the sync loop reschedules once they may go on.)
        self._round_bytes = 0
        if hub.deliverable(self._held):
            self.schedule()
        for conn, frames in pending.items():
            if failpoints.ENABLED:
                failpoints.hit("watch-before-send")
            self.budget.before_send(conn)
            conn.send(b"".join(frames))
            self.budget.after_send(conn)
            if conn.backlog() > self.limit_bytes:
                self._cut_off(
                    conn,
                    f"{conn.backlog()} unsent bytes of watch responses, over watch_backlog_limit ({self.limit_bytes})",
                )
        self._enforce_budget()

    def _enforce_budget(self) -> None:
        """Past the member-wide budget, abort the connections stalled longest until under it."""
        if self.budget.total <= self.budget.limit_bytes:
            return
        now = self.budget.clock()
        for conn, owed, since in self.budget.over():
            self._cut_off(
                conn,
                f"{owed} unsent bytes of watch responses, nothing read for {now - since:.1f}s, and the member's "
                f"unsent watch output passed its budget ({self.budget.limit_bytes} bytes, from watch_output_limit "
                f"{self.output_limit}); "
                "the connections that stopped reading longest go first",
            )

    def _cut_off(self, conn: WatchOwner, why: str) -> None:
        """A client that does not read its watch streams must not grow our memory without
        bound: drop the connection and everything queued for it."""
        self.cut_off += 1
        log.warning("aborting client connection from %s: %s", conn.peer, why)
        conn.abort()
        self.drop(conn)
        memory.release_soon()

    def _drop_event_after_compaction(self, responses: list[WatchResponse]) -> list[WatchResponse]:
        """drop-watch-event-at-compaction: once a new compaction shows, every watcher that
        exists then loses the next event it would be sent."""
        compact = self.state.kv.compact_revision
        if compact != self._compact_seen:
            self._compact_seen = compact
            self._drop_armed.update(dict.fromkeys(self._owner))
        drop_after_compaction(responses, self._drop_armed)
        return responses

    # ------------------------------------------------------------------ catching up
    async def sync_loop(self) -> None:
        """Catch up slow or historic watchers from history, send the periodic progress
        notifications, and restart delivery to connections that read again.

        Catch-up runs batch after batch, yielding to the event loop in between, for as long
        as there is history to replay; watchers whose connection is not reading are left
        where they are, so one slow reader holds up nobody else."""
        loop = asyncio.get_running_loop()
        next_progress = loop.time() + self.progress_interval
        while True:
            hub = self.state.hub
            busy = False
            if hub.unsynced_count() and hub.sync_unsynced(held=self._held):
                busy = True
            if loop.time() >= next_progress:
                next_progress = loop.time() + self.progress_interval
                if hub.progress_tick():
                    busy = True
            if busy or hub.deliverable(self._held):
                self.schedule()
            await asyncio.sleep(0 if busy else SYNC_IDLE)
