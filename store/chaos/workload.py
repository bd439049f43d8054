"""The recorded workload of a chaos run: sequential KV clients, lease users, a compactor
and watchers, every request written down as an `Operation` (see history.py).

Shaped after etcd's robustness traffic: a few hot keys so that operations collide; every
written value unique (client id + sequence) so that the checker can find each write in the
applied history; every client strictly sequential (one request at a time) so that its
operations are ordered; some clients pinned to one member, others on all endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Protocol

from store.api import errors as E
from store.api import methods as M
from store.api.kv import (
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.api.lease import LeaseGrantResponse, LeaseKeepAliveResponse
from store.chaos.history import FAIL, OK, UNKNOWN, Operation, WatchRecord, WatchResponseSeen
from store.client.client import Client, Watch

PREFIX = b"/chaos/"

DECODERS: dict[str, Any] = {
    "range": RangeResponse.from_wire,
    "put": PutResponse.from_wire,
    "delete_range": DeleteRangeResponse.from_wire,
    "txn": TxnResponse.from_wire,
    "compact": CompactionResponse.from_wire,
    "lease_grant": LeaseGrantResponse.from_wire,
    "lease_keepalive": LeaseKeepAliveResponse.from_wire,
    "lease_revoke": lambda w: w,
}


def outcome_of(err: BaseException) -> str:
    """FAIL when the error proves the request had no effect (refused, or never proposed),
    else UNKNOWN (a lost connection, a timeout, a leader change, a member's own failure)."""
    if isinstance(err, E.StoreError) and err.outcome in (E.Outcome.REFUSED, E.Outcome.NOT_APPLIED):
        return FAIL
    return UNKNOWN


@dataclass
class WorkloadSettings:
    keys: int = 10
    request_timeout: float = 1.0
    lease_ttl: int = 5
    watchers: int = 4
    compaction_interval: tuple[float, float] = (0.1, 0.2)
    pinned_per_member: int = 2
    shared_clients: int = 2
    non_unique_writes: int = 3
    """At most this many deletes and revokes in flight at once (they cannot be told apart
    in the applied history, which is what makes a history hard to check)."""
    api: str = "native"
    """"etcd": the KV clients and the compactor go through the members' etcd gRPC API."""
    tls: ssl.SSLContext | None = None
    """Our protocol's client TLS (the admin certificate) when the members speak TLS."""
    grpc_credentials: Any = None
    """The etcd API's channel credentials when the members speak TLS."""


class RequestClient(Protocol):
    """What the workload sends through: our Client, or the etcd API client (same interface)."""

    async def request(self, method: M.Method[Any, Any], args: Any, endpoint: str | None = None) -> tuple[Any, Any]: ...

    async def close(self) -> None: ...


def request_client(endpoints: list[str], s: WorkloadSettings, connect_timeout: float | None = None) -> RequestClient:
    if s.api == "etcd":
        from store.etcdapi.client import EtcdApiClient  # noqa: PLC0415 - grpcio only when asked for

        return EtcdApiClient(endpoints, timeout=s.request_timeout, credentials=s.grpc_credentials)
    if connect_timeout is None:
        return Client(endpoints, timeout=s.request_timeout, tls=s.tls)
    return Client(endpoints, timeout=s.request_timeout, connect_timeout=connect_timeout, tls=s.tls)


class Recorder:
    """Collects every operation of the run; shared by all clients of one process."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []
        self.watches: list[WatchRecord] = []
        self.max_revision = 0

    async def call(self, client: RequestClient, op: Operation, method: str, wire: Any, endpoint: str | None) -> Any:
        """Send one request and write down what happened to it."""
        self.operations.append(op)
        op.call = time.monotonic()
        try:
            header, result = await client.request(M.METHODS[method], wire, endpoint=endpoint)
        except Exception as e:  # every failure is part of the history
            op.outcome = outcome_of(e)
            op.error = getattr(e, "code", type(e).__name__)
            if op.outcome == FAIL:
                op.ret = time.monotonic()
            return None
        op.ret = time.monotonic()
        op.outcome = OK
        op.member = header.member_id
        op.revision = header.revision
        self.max_revision = max(self.max_revision, header.revision)
        op.response = DECODERS[op.kind](result)
        return op.response


class KVClient:
    """One strictly sequential client: picks an operation, waits for its answer, repeats."""

    def __init__(
        self,
        cid: int,
        endpoints: list[str],
        pinned: bool,
        rec: Recorder,
        s: WorkloadSettings,
        rng: random.Random,
        non_unique: asyncio.Semaphore,
    ) -> None:
        self.cid = cid
        self.client = request_client(endpoints, s, connect_timeout=min(0.5, s.request_timeout))
        self.endpoint = endpoints[0] if pinned else ""
        self.rec = rec
        self.s = s
        self.rng = rng
        self.non_unique = non_unique
        self.seq = 0
        self.last_failed = False
        self.mod_revisions: dict[bytes, int] = {}
        self.lease = 0
        self.lease_kept = True

    def key(self) -> bytes:
        return PREFIX + b"k%02d" % self.rng.randrange(self.s.keys)

    def value(self) -> bytes:
        self.seq += 1
        return b"c%d-%d" % (self.cid, self.seq)

    def op(self, kind: str, request: Any) -> Operation:
        return Operation(self.cid, len(self.rec.operations), kind, request, 0.0, endpoint=self.endpoint)

    async def send(self, kind: str, request: Any, wire: Any) -> Any:
        # A pinned client reads from its member; writes go to the leader, which the
        # client finds by itself (a follower redirects).
        ep = self.endpoint if kind == "range" and self.endpoint else None
        resp = await self.rec.call(self.client, self.op(kind, request), kind, wire, ep)
        self.last_failed = resp is None
        return resp

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                await self.step()
        finally:
            await self.client.close()

    async def step(self) -> None:
        r = self.rng.random() * 100
        if self.last_failed:
            await self.list_keys()  # etcd's traffic does the same: look around after a failure
        elif r < 15:
            await self.get()
        elif r < 25:
            await self.stale_get()
        elif r < 33:
            await self.list_keys(paginate=self.rng.random() < 0.5)
        elif r < 55:
            await self.put()
        elif r < 60:
            async with self.non_unique:
                await self.send("delete_range", req := DeleteRangeRequest(self.key(), prev_kv=True), req.to_wire())
        elif r < 70:
            await self.txn()
        elif r < 76:
            await self.compare_and_set()
        elif r < 84:
            await self.put_with_lease()
        elif r < 92:
            await self.keepalive()
        else:
            await self.revoke()

    async def get(self) -> None:
        k = self.key()
        resp = await self.send("range", req := RangeRequest(k), req.to_wire())
        if isinstance(resp, RangeResponse):
            self.mod_revisions[k] = resp.kvs[0].mod_revision if resp.kvs else 0

    async def stale_get(self) -> None:
        rev = max(1, self.rec.max_revision - self.rng.randrange(0, 20))
        req = RangeRequest(self.key(), revision=rev, serializable=True)
        await self.send("range", req, req.to_wire())

    async def list_keys(self, paginate: bool = False) -> None:
        end = prefix_end(PREFIX)
        req = RangeRequest(PREFIX, end, limit=3 if paginate else 0)
        resp = await self.send("range", req, req.to_wire())
        if paginate and isinstance(resp, RangeResponse) and resp.more and resp.kvs:
            nxt = RangeRequest(resp.kvs[-1].key + b"\0", end, limit=3, revision=resp.revision)
            await self.send("range", nxt, nxt.to_wire())

    async def put(self) -> None:
        req = PutRequest(self.key(), self.value(), prev_kv=True)
        await self.send("put", req, req.to_wire())

    async def txn(self) -> None:
        """Four operations, at least one put: compare a key's version, write two keys either way."""
        k1, k2, k3 = self.rng.sample(range(self.s.keys), 3)
        key = [PREFIX + b"k%02d" % k for k in (k1, k2, k3)]
        cmp = Compare(CompareResult.GREATER, CompareTarget.VERSION, key[0], 0)
        success: list[RequestOp] = [PutRequest(key[1], self.value()), RangeRequest(key[0])]
        failure: list[RequestOp] = [PutRequest(key[2], self.value()), RangeRequest(key[1])]
        req = TxnRequest([cmp], success, failure)
        await self.send("txn", req, req.to_wire())

    async def compare_and_set(self) -> None:
        k = self.key()
        if k not in self.mod_revisions:
            await self.get()
            return
        cmp = Compare(CompareResult.EQUAL, CompareTarget.MOD, k, self.mod_revisions.pop(k))
        req = TxnRequest([cmp], [PutRequest(k, self.value())], [RangeRequest(k)])
        await self.send("txn", req, req.to_wire())

    async def put_with_lease(self) -> None:
        if self.lease == 0:
            lease_id = self.cid * 1_000_000 + self.seq + 1
            self.seq += 1
            resp = await self.send(
                "lease_grant", {"id": lease_id, "ttl": self.s.lease_ttl}, [self.s.lease_ttl, lease_id]
            )
            if isinstance(resp, LeaseGrantResponse):
                self.lease = resp.id
                # Some leases are left to expire, to check expiry times.
                self.lease_kept = self.rng.random() < 0.7
            return
        req = PutRequest(self.key(), self.value(), lease=self.lease, prev_kv=True)
        await self.send("put", req, req.to_wire())

    async def keepalive(self) -> None:
        if self.lease == 0 or not self.lease_kept:
            await self.get()
            return
        resp = await self.send("lease_keepalive", {"id": self.lease}, [self.lease])
        if isinstance(resp, LeaseKeepAliveResponse) and resp.ttl <= 0:
            self.lease = 0  # expired (it may have been left alone during a fault)
        elif resp is None and self.rec.operations[-1].error == "lease-not-found":
            self.lease = 0

    async def revoke(self) -> None:
        if self.lease == 0:
            await self.get()
            return
        lease, self.lease = self.lease, 0
        async with self.non_unique:
            await self.send("lease_revoke", {"id": lease}, [lease])


class Compactor:
    """Compacts every 100-200 ms to a random revision in [last, current + 5]: some land in
    the future and must be refused."""

    def __init__(self, cid: int, endpoints: list[str], rec: Recorder, s: WorkloadSettings, rng: random.Random) -> None:
        self.cid = cid
        self.client = request_client(endpoints, s)
        self.rec = rec
        self.s = s
        self.rng = rng
        self.last = 0

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                lo, hi = self.s.compaction_interval
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.rng.uniform(lo, hi))
                if stop.is_set() or self.rec.max_revision < 2:
                    continue
                rev = self.rng.randint(max(1, self.last), self.rec.max_revision + 5)
                req = CompactionRequest(rev)
                op = Operation(self.cid, len(self.rec.operations), "compact", req, 0.0)
                resp = await self.rec.call(self.client, op, "compact", req.to_wire(), None)
                if resp is not None:
                    self.last = rev
        finally:
            await self.client.close()


class Watcher:
    """A prefix watch opened near the current revision (±100: past, compacted or future),
    with prev_kv and progress requests; reopened when compaction cancels it."""

    def __init__(self, wid: int, endpoints: list[str], rec: Recorder, s: WorkloadSettings, rng: random.Random) -> None:
        self.wid = wid
        self.client = Client(endpoints, timeout=max(2.0, s.request_timeout), tls=s.tls)
        self.rec = rec
        self.rng = rng

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                start = max(0, self.rec.max_revision + self.rng.randint(-100, 100)) if self.rec.max_revision else 0
                await self.watch_once(start, stop)
                await asyncio.sleep(0.05)
        finally:
            await self.client.close()

    async def watch_once(self, start: int, stop: asyncio.Event) -> None:
        rec = WatchRecord(self.wid, PREFIX, prefix_end(PREFIX), start, True, time.monotonic())
        self.rec.watches.append(rec)
        w = self.client.watch(PREFIX, prefix=True, start_revision=start, prev_kv=True, progress_notify=True)
        await consume(w, rec, stop, progress_every=(0.1, 0.5), rng=self.rng)


async def consume(
    w: Watch,
    rec: WatchRecord,
    stop: asyncio.Event,
    progress_every: tuple[float, float] | None = None,
    rng: random.Random | None = None,
    until_revision: int = 0,
    deadline: float = math.inf,
) -> None:
    """Record a watch stream's responses until `stop`, a cancel, an error, or (with
    `until_revision`) a response at or past that revision."""
    rng = rng or random.Random(0)
    it = w.__aiter__()

    async def ask_progress() -> None:
        assert progress_every is not None
        while True:
            await asyncio.sleep(rng.uniform(*progress_every))
            await w.progress()

    pinger = asyncio.create_task(ask_progress()) if progress_every else None
    stopper = asyncio.create_task(stop.wait())
    try:
        while time.monotonic() < deadline:
            nxt = asyncio.ensure_future(it.__anext__())
            done, _ = await asyncio.wait(
                {nxt, stopper}, timeout=max(0.0, deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
            )
            if nxt not in done:
                nxt.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, E.StoreError):
                    await nxt
                break
            try:
                resp = nxt.result()
            except StopAsyncIteration:
                break
            except E.StoreError as e:
                rec.error = f"{e.code}: {e}"
                break
            rec.responses.append(
                WatchResponseSeen(
                    time.monotonic(),
                    0,
                    resp.revision,
                    resp.events,
                    resp.created,
                    resp.canceled,
                    resp.compact_revision,
                    resp.is_progress_notify,
                )
            )
            if resp.canceled:
                break
            if until_revision and resp.revision >= until_revision and not resp.created:
                break
            if until_revision and resp.events and resp.events[-1].kv.mod_revision >= until_revision:
                break
    finally:
        stopper.cancel()
        if pinger is not None:
            pinger.cancel()
        await w.cancel()
        with contextlib.suppress(BaseException):
            await it.aclose()  # type: ignore[attr-defined]


class Workload:
    """Every client of a run, started and stopped together."""

    def __init__(self, endpoints: list[str], s: WorkloadSettings, seed: int) -> None:
        self.rec = Recorder()
        self.s = s
        self.stop = asyncio.Event()
        rng = random.Random(seed)
        sem = asyncio.Semaphore(s.non_unique_writes)
        self.clients: list[KVClient] = []
        cid = 1
        for ep in endpoints:
            for _ in range(s.pinned_per_member):
                self.clients.append(KVClient(cid, [ep], True, self.rec, s, random.Random(rng.random()), sem))
                cid += 1
        for _ in range(s.shared_clients):
            self.clients.append(KVClient(cid, list(endpoints), False, self.rec, s, random.Random(rng.random()), sem))
            cid += 1
        self.compactor = Compactor(cid, list(endpoints), self.rec, s, random.Random(rng.random()))
        self.watchers = [
            Watcher(i + 1, list(endpoints), self.rec, s, random.Random(rng.random())) for i in range(s.watchers)
        ]
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        runners = [c.run(self.stop) for c in self.clients] + [self.compactor.run(self.stop)]
        runners += [w.run(self.stop) for w in self.watchers]
        self.tasks = [asyncio.create_task(r) for r in runners]

    async def finish(self, grace: float) -> None:
        """Stop issuing; requests still out after `grace` stay unknown in the history."""
        self.stop.set()
        _, pending = await asyncio.wait(self.tasks, timeout=grace)
        for t in pending:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def ok_ops_between(self, t0: float, t1: float) -> int:
        return sum(1 for o in self.rec.operations if o.outcome == OK and t0 <= o.ret < t1)
