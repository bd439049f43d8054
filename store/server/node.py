"""The Raft loop of a member: the only place that touches the RawNode.

Each Ready is persisted with one WAL write and one fdatasync.  A small Ready is written on
the event loop's own thread: handing a few hundred bytes to a disk thread and back cost
more (two thread wake-ups per hop, about half a millisecond per write at one request in
flight) than the fdatasync itself.  A big Ready (a busy leader's group commit) goes to the
disk thread, so that the loop keeps decoding and stepping requests meanwhile; they land in
the next Ready together.  Either way the loop waits for the write before going on, so the
WAL has a single writer at a time; other WAL writes (snapshot markers, releases) are
`defer`red to run between Readies.  After
persisting, the loop updates the in-memory storage, sends, applies, then advances.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from store import failpoints
from store.raft import ConfChange, ConfState, RawNode, Ready, Status
from store.raft.errors import ProposalDroppedError, RaftError
from store.raft.storage import MemoryStorage
from store.raft.types import NONE, Message, Snapshot, StateType
from store.wal.errors import DiskWriteError

log = logging.getLogger("raftkube.node")

OFFLOAD_PERSIST_ENTRIES = 8
"""Readies with at least this many entries are written on the disk thread."""
NO_SPACE_RETRY = 0.2
"""Seconds between two attempts to write a Ready while the disk is full."""
RETRIED_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE})
"""Write failures that pass by themselves (space freed, descriptors closed): the WAL rolled
the failed write back, so the same Ready is written again until it goes through."""


class RaftNode:
    def __init__(
        self,
        raw: RawNode,
        storage: MemoryStorage,
        persist: Callable[[Ready], None],
        save_snapshot_file: Callable[[Snapshot], None],
        send: Callable[[list[Message]], None],
        apply: Callable[[Ready], None],
        tick_seconds: float,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.raw = raw
        self.storage = storage
        self.persist = persist
        self.save_snapshot_file = save_snapshot_file
        self.send = send
        self.apply = apply
        self.tick_seconds = tick_seconds
        self.on_tick = on_tick
        self._wake = asyncio.Event()
        self.disk_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshots")
        """For snapshot files only: the WAL is written from the loop thread (one writer)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._deferred: list[Callable[[], None]] = []
        self.stopped = asyncio.Event()
        self.fatal: BaseException | None = None
        self.no_space = False
        """The last write failed with ENOSPC: the member refuses new writes until one succeeds."""
        st = raw.status()
        self.term = st.term
        """The core's term, leader and role as of the last Ready: read on every response,
        so kept here rather than copied out of the core each time."""
        self.lead = st.lead
        self.role = st.state
        # Metrics.
        self.readies = 0
        self.fsyncs = 0
        self.fsync_seconds = 0.0
        self.apply_seconds = 0.0
        self.entries_persisted = 0

    # ------------------------------------------------------------------ inputs
    def step(self, msgs: list[Message]) -> None:
        raw = self.raw
        for m in msgs:
            try:
                raw.step(m)
            except RaftError as e:
                log.debug("dropped %s from %d: %s", m.type.name, m.frm, e)
        self._wake.set()

    def propose(self, datas: list[bytes]) -> None:
        """Raises ProposalDroppedError when the core cannot take them (no leader...)."""
        self.raw.propose_many(datas)
        self._wake.set()

    def read_index(self, ctx: bytes) -> None:
        self.raw.read_index(ctx)
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def propose_conf_change(self, cc: ConfChange) -> None:
        """Raises ProposalDroppedError when not the leader or a change is still pending."""
        self.raw.propose_conf_change(cc)
        self._wake.set()

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Called by the apply loop for each committed conf change entry, in order."""
        return self.raw.apply_conf_change(cc)

    def transfer_leader(self, transferee: int) -> None:
        self.raw.transfer_leader(transferee)
        self._wake.set()

    def report_unreachable(self, peer: int) -> None:
        with contextlib.suppress(RaftError):
            self.raw.report_unreachable(peer)

    def report_snapshot(self, peer: int, failed: bool) -> None:
        with contextlib.suppress(RaftError):
            self.raw.report_snapshot(peer, failed)
        self._wake.set()

    def status(self) -> Status:
        """A copy of the core's state (membership, progress of each peer, indexes)."""
        return self.raw.status()

    @property
    def is_leader(self) -> bool:
        return self.role == StateType.LEADER

    @property
    def has_leader(self) -> bool:
        return self.lead != NONE

    def _observe(self, rd: Ready) -> None:
        if rd.soft_state is not None:
            self.lead = rd.soft_state.lead
            self.role = rd.soft_state.raft_state
        if rd.hard_state is not None:
            self.term = rd.hard_state.term

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        """Run the Ready and tick loops.  The election clock starts two ticks short of the
        election timeout (etcd's --initial-election-tick-advance, on by default there too): a
        member just started campaigns after 2 to election_ticks + 2 silent ticks instead of
        election_ticks to 2 * election_ticks, so a fresh cluster on the default 100 ms x 10 ticks
        has its leader ~1 s sooner (`raftkube up` waited 2.3 s for it).  A member that restarts
        into a cluster with a leader hears its heartbeat first, or pre-votes and is refused by
        the followers in the leader's lease (check quorum): no leader is disturbed."""
        for _ in range(max(0, self.raw.raft.election_timeout - 2)):
            self.raw.tick()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._ready_loop(), name="raft-ready"),
            loop.create_task(self._tick_loop(), name="raft-tick"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self.disk_thread.shutdown(wait=True)

    def defer(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the loop between two Readies: for WAL writes outside the Ready path
        (snapshot markers, segment release), so that the WAL only ever has one writer."""
        self._deferred.append(fn)
        self._wake.set()

    def _run_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)()

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at += self.tick_seconds
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            if loop.time() - next_at > 5 * self.tick_seconds:
                next_at = loop.time()  # we were stalled (e.g. SIGSTOP): do not burst ticks
            self.raw.tick()
            if self.on_tick is not None:
                self.on_tick()
            self._wake.set()

    async def _write(self, rd: Ready, loop: asyncio.AbstractEventLoop) -> None:
        """Persist one Ready.  A full disk (or a process out of file descriptors when a new
        segment is due) is waited out: the WAL rolled the failed write back, so the same
        Ready is written again until it succeeds (meanwhile the member refuses new writes,
        and peers elect another leader if this one stalls)."""
        while True:
            try:
                if rd.snapshot is not None:
                    if failpoints.ENABLED and rd.snapshot.metadata.index > 1:  # not the bootstrap
                        failpoints.hit("snapshot-before-install")
                    # The file must exist before the WAL record that points at it.
                    await loop.run_in_executor(self.disk_thread, self.save_snapshot_file, rd.snapshot)
                if len(rd.entries) >= OFFLOAD_PERSIST_ENTRIES:
                    # A big batch: let the loop decode and step what keeps arriving while
                    # the disk works (the WAL still has one writer at a time: this loop,
                    # which waits here).
                    await loop.run_in_executor(self.disk_thread, self.persist, rd)
                else:
                    self.persist(rd)
            except DiskWriteError as e:
                if e.errno not in RETRIED_ERRNOS:
                    raise
                if not self.no_space:
                    log.error("%s: writes are refused until it passes", e)
                self.no_space = True
                await asyncio.sleep(NO_SPACE_RETRY)
                continue
            if self.no_space:
                log.warning("disk space is back: writes are accepted again")
                self.no_space = False
            return

    async def _ready_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                self._run_deferred()
                while self.raw.has_ready():
                    rd = self.raw.ready()
                    self.readies += 1
                    self._observe(rd)
                    # A leader may replicate while it writes to its own disk (thesis §10.2.1):
                    # its messages promise nothing about its own durability, and a commit
                    # index counting these entries can only reach followers in a later
                    # Ready, after this one is persisted.
                    early = self.is_leader and rd.messages
                    if early:
                        if failpoints.ENABLED:
                            failpoints.hit("raft-before-send")
                        self.send(rd.messages)
                    if rd.snapshot is not None or rd.entries or rd.hard_state is not None:
                        t0 = time.perf_counter()
                        await self._write(rd, loop)
                        if rd.must_sync:
                            self.fsyncs += 1
                            self.fsync_seconds += time.perf_counter() - t0
                        self.entries_persisted += len(rd.entries)
                        st = self.storage
                        if rd.snapshot is not None:
                            st.apply_snapshot(rd.snapshot)
                        if rd.entries:
                            st.append(rd.entries)
                        if rd.hard_state is not None:
                            st.set_hard_state(rd.hard_state)
                    if rd.messages and not early:
                        self.send(rd.messages)
                    t1 = time.perf_counter()
                    self.apply(rd)
                    self.apply_seconds += time.perf_counter() - t1
                    if failpoints.ENABLED and rd.committed_entries:
                        failpoints.hit("apply-before-applied-index")
                    self.raw.advance(rd)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            # A failed fsync or apply leaves the member in an unknown state: stop it
            # rather than acknowledge anything more (etcd does the same).
            log.critical("raft loop stopped: %s: %s", type(e).__name__, e)
            self.fatal = e
            self.stopped.set()
            raise


__all__ = ["ProposalDroppedError", "RaftNode"]
