"""Failpoints and canaries: the parser, the HTTP control, and what each does to a real cluster.

Crash failpoints are armed at runtime (`1*crash` over HTTP) on one member of a live 3-member
cluster, the code path is driven with the matching client operation, and the member must
die by SIGKILL right there; restarted on the same data dir it must rejoin, agree on the key
space (hash_kv) and keep every acknowledged write.  Each canary gets one direct test of the
misbehaviour a checker would see, next to the correct behaviour without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machinery.process import disk
from machinery.process.launch import exit_code, free_ports
from store import failpoints
from store.api import errors as E
from store.api.kv import Event, EventType, RangeRequest
from store.api.watch import WatchResponse
from store.client.client import Client
from store.launcher import LocalCluster
from store.wal.reader import replay
from store.wal.restore import wal_dir
from tests.support.cluster import StoreCluster, fast_settings, running_cluster
from tests.support.paths import ROOT

HTTP_ON = {failpoints.HTTP_ENV: "1"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ====================================================================== parser (in process)
@pytest.fixture
def registry() -> Iterator[None]:
    failpoints.configure("")
    yield
    failpoints.configure("")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("off", failpoints.Action("off")),
        ("crash", failpoints.Action("crash")),
        ("panic", failpoints.Action("crash")),
        ("sleep(250)", failpoints.Action("sleep", 250)),
        (" 3*sleep(10) ", failpoints.Action("sleep", 10, 3)),
        ("1*crash", failpoints.Action("crash", 0, 1)),
    ],
)
def test_parse_action(text: str, want: failpoints.Action) -> None:
    assert failpoints.parse_action(text) == want


@pytest.mark.parametrize("text", ["", "boom", "sleep", "sleep(x)", "sleep(-1)", "0*crash", "*crash", "2*", "crash()"])
def test_parse_action_rejects(text: str) -> None:
    with pytest.raises(failpoints.FailpointError, match="bad failpoint action"):
        failpoints.parse_action(text)


def test_parse_spec() -> None:
    got = failpoints.parse_spec("wal-after-fsync=crash; apply-before=2*sleep(500);;")
    assert got == {
        "wal-after-fsync": failpoints.Action("crash"),
        "apply-before": failpoints.Action("sleep", 500, 2),
    }
    assert failpoints.parse_spec("") == {}


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("wal-after-fsync", "'wal-after-fsync'"),
        ("no-such-point=crash", "unknown failpoint 'no-such-point'"),
        ("apply-before=sleep(fast)", "failpoint 'apply-before'.*'sleep\\(fast\\)'"),
    ],
)
def test_parse_spec_names_the_bad_part(spec: str, names: str) -> None:
    with pytest.raises(failpoints.FailpointError, match=names):
        failpoints.parse_spec(spec)


def test_counted_action_fires_then_turns_off(registry: None) -> None:
    failpoints.configure("apply-after=2*sleep(1)")
    assert failpoints.ENABLED
    for _ in range(4):
        failpoints.hit("apply-after")
    st = failpoints.status()["apply-after"]
    assert st == {"action": "off", "hits": 4}
    assert failpoints.status()["apply-before"] == {"action": "off", "hits": 0}


def test_sleep_action_blocks_the_caller(registry: None) -> None:
    failpoints.set_action("compact-before", "sleep(120)")
    t0 = time.monotonic()
    failpoints.hit("compact-before")
    assert time.monotonic() - t0 >= 0.1
    failpoints.clear("compact-before")
    t0 = time.monotonic()
    failpoints.hit("compact-before")
    assert time.monotonic() - t0 < 0.05


def test_disabled_by_default_and_every_site_name_is_known() -> None:
    """No environment, no failpoints; and each name used in the code is a registered one."""
    env = {k: v for k, v in os.environ.items() if k not in (failpoints.ENV, failpoints.HTTP_ENV)}
    code = "from store import failpoints, canaries; print(failpoints.ENABLED, failpoints.HTTP_ENABLED, canaries.ACTIVE)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False False ()"
    root = ROOT / "store"
    used = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        for part in text.split('failpoints.hit("')[1:]:
            used.add(part.split('"', 1)[0])
    assert used == set(failpoints.NAMES)


# ====================================================================== HTTP control (in process)
async def _http(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), payload


def _serve_and_call(calls: list[tuple[str, str, bytes]]) -> list[tuple[int, bytes]]:
    from store.server.http import HttpEndpoint

    async def go() -> list[tuple[int, bytes]]:
        ep = HttpEndpoint(lambda: (True, {}), lambda: "")
        port = free_ports(1)[0]
        await ep.listen("127.0.0.1", port)
        try:
            return [await _http(port, m, p, b) for m, p, b in calls]
        finally:
            await ep.close()

    return run(go())  # type: ignore[no-any-return]


def test_http_failpoints_are_404_without_the_env_var(registry: None) -> None:
    got = _serve_and_call(
        [
            ("GET", "/debug/failpoints", b""),
            ("PUT", "/debug/failpoints/apply-before", b"crash"),
            ("DELETE", "/debug/failpoints/apply-before", b""),
        ]
    )
    assert [s for s, _ in got] == [404, 404, 404]
    assert failpoints.status()["apply-before"]["action"] == "off"


def test_http_failpoints_set_list_clear(registry: None) -> None:
    failpoints.configure("", http=True)
    got = _serve_and_call(
        [
            ("PUT", "/debug/failpoints/apply-before", b"3*sleep(1)"),
            ("GET", "/debug/failpoints", b""),
            ("PUT", "/debug/failpoints/apply-before", b"explode"),
            ("PUT", "/debug/failpoints/nope", b"crash"),
            ("POST", "/debug/failpoints/apply-before", b"crash"),
            ("DELETE", "/debug/failpoints/apply-before", b""),
        ]
    )
    assert got[0][0] == 200 and json.loads(got[0][1]) == {"apply-before": {"action": "3*sleep(1)", "hits": 0}}
    listing = json.loads(got[1][1])
    assert set(listing) == set(failpoints.NAMES) and listing["apply-before"]["action"] == "3*sleep(1)"
    assert got[2][0] == 400 and b"explode" in got[2][1]
    assert got[3][0] == 404 and b"unknown failpoint" in got[3][1]
    assert got[4][0] == 405
    assert got[5][0] == 200 and failpoints.status()["apply-before"]["action"] == "off"


def test_member_refuses_a_bad_spec_or_canary(tmp_path: Path) -> None:
    """A typo in a test-only setting must not run as if the setting were absent."""
    local = LocalCluster(tmp_path)
    local.create(fast_settings(tmp_path, members=1), ports=free_ports(3))
    for var, value, says in [
        (failpoints.ENV, "wal-after-fsync=crash;wal-after-fsinc=crash", "unknown failpoint 'wal-after-fsinc'"),
        ("RAFTKUBE_UNSAFE", "skip-prev-kv,ack-befor-fsync", "unknown unsafe mode 'ack-befor-fsync'"),
    ]:
        out = subprocess.run(
            [sys.executable, "-m", "store.server.main", str(local.member_dir(1))],
            env={**os.environ, var: value},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 2, out.stderr
        assert says in out.stderr


# ====================================================================== helpers for live clusters
def _member_http(tc: StoreCluster, member_id: int) -> str:
    return next(m.http_url for m in tc.local.members() if m.id == member_id)


def _http_call(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def set_failpoint(tc: StoreCluster, member_id: int, name: str, action: str) -> None:
    status, doc = _http_call(f"{_member_http(tc, member_id)}/debug/failpoints/{name}", "PUT", action.encode())
    assert status == 200, doc
    assert doc[name]["action"] == str(failpoints.parse_action(action))


def clear_failpoint(tc: StoreCluster, member_id: int, name: str) -> None:
    """Best effort (the member may be dead): a point left armed must not hit the next test."""
    with contextlib.suppress(OSError):
        _http_call(f"{_member_http(tc, member_id)}/debug/failpoints/{name}", "DELETE")


def wait_sigkilled(tc: StoreCluster, member_id: int, pid: int, name: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while exit_code(pid) is None:
        assert time.monotonic() < deadline, f"member {member_id} still alive {timeout}s after arming {name}"
        time.sleep(0.02)
    assert exit_code(pid) == -signal.SIGKILL
    log = (tc.local.member_dir(member_id) / "member.log").read_text()
    assert f"failpoint {name}: crash" in log
    (tc.local.member_dir(member_id) / "pid").unlink(missing_ok=True)


async def put_maybe(c: Client, key: bytes, value: bytes, acked: dict[bytes, bytes]) -> bool:
    """A put whose outcome may be unknown (its member may die): only an answer counts."""
    try:
        await c.put(key, value)
    except (E.StoreError, OSError):
        return False
    acked[key] = value
    return True


def converge(tc: StoreCluster, acked: dict[bytes, bytes]) -> None:
    """Every member reaches one revision, hashes its key space alike, and has every acked write."""
    tc.wait_leader(timeout=20)
    members = [m.id for m in tc.local.members()]

    async def mark() -> int:
        # The marker is harness bookkeeping, not a checked write: on a loaded machine the
        # restarted member may still be settling, so an ambiguous outcome is simply retried.
        deadline = time.monotonic() + 30
        async with tc.client(timeout=10) as c:
            while True:
                try:
                    return (await c.put(b"chaos/mark", b"x")).revision
                except (E.LeaderChangedError, E.TimeoutError_, E.UnavailableError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)

    rev = run(mark())
    tc.wait_applied(rev, members, timeout=20)

    async def check() -> None:
        async with tc.client() as c:
            hashes = {ep: (await c.hash_kv(ep, rev))[0] for ep in tc.endpoints}
            assert len(set(hashes.values())) == 1, f"members disagree at revision {rev}: {hashes}"
        for ep in tc.endpoints:
            async with tc.client([ep]) as one:
                for key, value in acked.items():
                    r = await one.range(RangeRequest(key, serializable=True))
                    assert r.kvs and r.kvs[0].value == value, f"{ep} lost acknowledged {key!r}"

    run(check())


@pytest.fixture(scope="module")
def fp_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    """Runtime failpoint control on; small snapshot interval so snapshot points are reached."""
    with running_cluster(
        tmp_path_factory.mktemp("fp"), env=HTTP_ON, snapshot_count=60, snapshot_catchup_entries=10
    ) as tc:
        yield tc


def _pick(tc: StoreCluster, role: str) -> int:
    leader = tc.wait_leader(timeout=20)
    if role == "leader":
        return leader
    return min(m.id for m in tc.local.members() if m.id != leader)


# name -> (which member is armed, the client operation that reaches the point)
CRASH_CASES: dict[str, tuple[str, str]] = {
    "wal-before-append": ("leader", "put"),
    "wal-after-append": ("leader", "put"),
    "wal-after-fsync": ("follower", "put"),
    "raft-before-send": ("leader", "put"),
    "apply-before": ("leader", "put"),
    "apply-after": ("leader", "put"),
    "apply-before-applied-index": ("follower", "put"),
    "compact-before": ("leader", "compact"),
    "compact-after": ("follower", "compact"),
    "snapshot-before-save": ("leader", "writes"),
    "snapshot-after-save": ("follower", "writes"),
    "snapshot-before-install": ("follower", "install"),
    "snapshot-after-install": ("follower", "install"),
    "watch-before-send": ("follower", "watch"),
    "conf-change-before-apply": ("follower", "member_add"),
}


def test_crash_cases_cover_every_failpoint() -> None:
    assert set(CRASH_CASES) == set(failpoints.NAMES)


@pytest.mark.parametrize("name", list(CRASH_CASES))
def test_crash_failpoint_kills_member_there_and_it_recovers(fp_cluster: StoreCluster, name: str) -> None:
    tc = fp_cluster
    role, trigger = CRASH_CASES[name]
    victim = _pick(tc, role)
    acked: dict[bytes, bytes] = {}
    tag = name.encode()

    async def acked_puts(n: int) -> None:
        async with tc.client() as c:
            for i in range(n):
                await put_maybe(c, b"chaos/%s/%d" % (tag, i), b"v%d" % i, acked)

    run(acked_puts(5))
    learner_id = 0
    try:
        if trigger == "install":
            _crash_while_installing(tc, victim, name, acked)
        else:
            pid = tc.local.pid(victim)
            assert pid is not None
            set_failpoint(tc, victim, name, "1*crash")
            learner_id = run(_drive(tc, victim, pid, trigger, tag, acked))
            wait_sigkilled(tc, victim, pid, name)
    finally:
        clear_failpoint(tc, victim, name)
    tc.start_member(victim)
    run(acked_puts(5))
    converge(tc, acked)
    if learner_id:

        async def remove() -> None:
            async with tc.client(timeout=10) as c:
                await c.member_remove(learner_id)

        run(remove())


async def _drive(tc: StoreCluster, victim: int, pid: int, trigger: str, tag: bytes, acked: dict[bytes, bytes]) -> int:
    """Run the client operation that reaches the armed point; returns an added learner's id."""
    async with tc.client() as c:
        if trigger == "put":
            await put_maybe(c, b"chaos/%s/trigger" % tag, b"t", acked)
        elif trigger == "compact":
            r = await c.put(b"chaos/%s/c" % tag, b"1")
            await c.put(b"chaos/%s/c" % tag, b"2")
            with contextlib.suppress(E.StoreError, OSError):
                await c.compact(r.revision)
        elif trigger == "writes":
            for i in range(300):  # a snapshot every 60 applied entries
                if exit_code(pid) is not None:
                    break
                await put_maybe(c, b"chaos/%s/w%d" % (tag, i), b"w", acked)
        elif trigger == "watch":
            async with tc.client([tc.endpoint(victim)]) as one:
                stream = one.watch(b"chaos/", prefix=True)

                async def first() -> None:
                    async for _ in stream:
                        return

                task = asyncio.ensure_future(first())
                deadline = time.monotonic() + 10
                while exit_code(pid) is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, E.StoreError, OSError):
                    await task
        elif trigger == "member_add":
            cp, pp, hp = free_ports(3)
            info = await c.member_add(
                "chaos-learner", f"tcp://127.0.0.1:{pp}", f"tcp://127.0.0.1:{cp}", f"http://127.0.0.1:{hp}", True
            )
            return info.id
        else:
            raise AssertionError(trigger)
    return 0


def _crash_while_installing(tc: StoreCluster, victim: int, name: str, acked: dict[bytes, bytes]) -> None:
    """The victim misses more entries than the leader keeps, so it needs the leader's snapshot;
    it restarts with the point armed from the environment and dies installing it."""
    tc.local.kill_member(victim)

    async def fill() -> None:
        async with tc.client() as c:
            for i in range(200):
                await put_maybe(c, b"chaos/%s/f%d" % (name.encode(), i), b"f", acked)

    run(fill())
    time.sleep(0.3)  # the leader's snapshot record and log compaction run between Readies
    pid = tc.local.start_member(victim, {**HTTP_ON, failpoints.ENV: f"{name}=1*crash"})
    wait_sigkilled(tc, victim, pid, name)


def test_slow_fsync_on_the_leader_moves_leadership(fp_cluster: StoreCluster) -> None:
    """`wal-after-append=sleep(ms)` (the slow-fsync fault) stalls the leader's whole Raft loop
    past the election timeout: the others elect a new leader meanwhile."""
    tc = fp_cluster
    old = tc.wait_leader(timeout=20)
    others = [m.client_url for m in tc.local.members() if m.id != old]
    set_failpoint(tc, old, "wal-after-append", "1*sleep(2000)")
    acked: dict[bytes, bytes] = {}

    async def go() -> int:
        async with tc.client() as c:
            stalled = asyncio.ensure_future(put_maybe(c, b"chaos/slow", b"1", acked))
            deadline = time.monotonic() + 1.8
            new = 0
            while not new and time.monotonic() < deadline:
                for ep in others:
                    async with tc.client([ep], timeout=0.3) as one:
                        try:
                            st = await one.status(endpoint=ep)
                        except (E.StoreError, OSError):
                            continue
                        if st.role == "leader":
                            new = st.id
                await asyncio.sleep(0.02)
            await stalled
            return new

    try:
        new = run(go())
    finally:
        clear_failpoint(tc, old, "wal-after-append")
    assert new and new != old, "no other member took over while the leader was stalled"
    converge(tc, acked)


# ====================================================================== canaries
UNSAFE = "RAFTKUBE_UNSAFE"


@pytest.fixture(scope="module")
def watch_canary_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    env = {UNSAFE: "skip-prev-kv,drop-watch-event-at-compaction"}
    with running_cluster(tmp_path_factory.mktemp("canary-watch"), env=env) as tc:
        yield tc


async def _next_events(it: Any, until: bytes) -> list[Event]:
    """Events from the watch iterator up to and including the one on key `until` (bounded)."""
    got: list[Event] = []
    while not any(e.kv.key == until for e in got):
        resp: WatchResponse = await asyncio.wait_for(it.__anext__(), 5)
        got.extend(resp.events)
    return got


def _delete_events(tc: StoreCluster, prefix: bytes) -> tuple[Event, Event]:
    """(an update's PUT event, a DELETE event), seen by a watch that asked for prev_kv."""

    async def go() -> tuple[Event, Event]:
        async with tc.client() as c:
            it = c.watch(prefix, prefix=True, prev_kv=True).__aiter__()
            assert (await asyncio.wait_for(it.__anext__(), 5)).created
            await c.put(prefix + b"k", b"1")
            await c.put(prefix + b"k", b"2")
            await c.delete(prefix + b"k")
            await c.put(prefix + b"end", b"")
            events = await _next_events(it, prefix + b"end")
            await it.aclose()
        update = next(e for e in events if e.type == EventType.PUT and e.kv.value == b"2")
        delete = next(e for e in events if e.type == EventType.DELETE)
        return update, delete

    return run(go())  # type: ignore[no-any-return]


def test_skip_prev_kv_canary_sends_deletes_without_prev_kv(
    fp_cluster: StoreCluster, watch_canary_cluster: StoreCluster
) -> None:
    update, delete = _delete_events(fp_cluster, b"canary/prev/")
    assert update.prev_kv is not None and update.prev_kv.value == b"1"
    assert delete.prev_kv is not None and delete.prev_kv.value == b"2"
    update, delete = _delete_events(watch_canary_cluster, b"canary/prev/")
    assert update.prev_kv is not None and update.prev_kv.value == b"1"  # only deletes lose it
    assert delete.prev_kv is None


def _keys_around_compaction(tc: StoreCluster, prefix: bytes) -> list[bytes]:
    """Keys a watcher is sent for: a1, then (after a compaction) a2, a3, end."""

    async def go() -> list[bytes]:
        async with tc.client() as c:
            it = c.watch(prefix, prefix=True).__aiter__()
            assert (await asyncio.wait_for(it.__anext__(), 5)).created
            r = await c.put(prefix + b"a1", b"")
            events = await _next_events(it, prefix + b"a1")  # delivered before the compaction
            await c.compact(r.revision)
            for k in (b"a2", b"a3", b"end"):
                await c.put(prefix + k, b"")
            events += await _next_events(it, prefix + b"end")
            await it.aclose()
        return [e.kv.key[len(prefix) :] for e in events]

    return run(go())  # type: ignore[no-any-return]


def test_drop_watch_event_at_compaction_canary_loses_one_event(
    fp_cluster: StoreCluster, watch_canary_cluster: StoreCluster
) -> None:
    assert _keys_around_compaction(fp_cluster, b"canary/drop/") == [b"a1", b"a2", b"a3", b"end"]
    assert _keys_around_compaction(watch_canary_cluster, b"canary/drop/") == [b"a1", b"a3", b"end"]


def test_read_without_readindex_canary_serves_stale_reads_without_quorum(tmp_path: Path) -> None:
    """A member cut off from the quorum, behind an acknowledged write: a linearizable read
    must fail there; with the canary it answers at once with the stale value."""
    with running_cluster(tmp_path) as tc:
        leader = tc.wait_leader()
        lagging, *others = [*sorted(m.id for m in tc.local.members() if m.id != leader), leader]

        async def put(value: bytes) -> int:
            async with tc.client() as c:
                return (await c.put(b"canary/read", value)).revision

        rev1 = run(put(b"v1"))
        tc.wait_applied(rev1, [lagging])
        tc.local.kill_member(lagging)
        run(put(b"v2"))  # acknowledged by the other two
        for m in others:
            tc.local.kill_member(m)

        async def linearizable_get(timeout: float) -> bytes | None:
            async with tc.client([tc.endpoint(lagging)], timeout=timeout) as c:
                r = await c.get(b"canary/read")
                return r.kvs[0].value if r.kvs else None

        tc.local.start_member(lagging)
        with pytest.raises(E.StoreError):
            run(linearizable_get(1.5))
        tc.local.stop_member(lagging)

        tc.local.start_member(lagging, {UNSAFE: "read-without-readindex"})
        deadline = time.monotonic() + 10
        value = None
        while value is None and time.monotonic() < deadline:
            with contextlib.suppress(E.StoreError, OSError):
                value = run(linearizable_get(1.0))
        assert value == b"v1", "a linearizable read on a cut-off member returned the stale value"
        log = (tc.local.member_dir(lagging) / "member.log").read_text()
        assert "UNSAFE MODES ON" in log and "read-without-readindex" in log


@pytest.mark.parametrize("unsafe", [False, True], ids=["fsync", "ack-before-fsync"])
def test_ack_before_fsync_canary_loses_acknowledged_writes_in_a_crash(tmp_path: Path, unsafe: bool) -> None:
    """With the disk layer's ledger: after a SIGKILL of every member and a simulated power
    loss (files cut to their fsynced length), the acknowledged write is in every member's WAL
    - and, with the canary, in none."""
    tc = StoreCluster(fast_settings(tmp_path))
    ledgers = {m: tmp_path / f"ledger-{m}" for m in tc.local.member_ids()}
    try:
        for m, ledger in ledgers.items():
            env = {disk.TRACK_ENV: str(ledger)}
            if unsafe:
                env[UNSAFE] = "ack-before-fsync"
            tc.local.start_member(m, env)
        tc.wait_leader()

        async def put() -> int:
            async with tc.client() as c:
                return (await c.put(b"canary/durable", b"acked")).revision

        rev = run(put())
        tc.wait_applied(rev, list(ledgers))
        for m in ledgers:
            tc.local.kill_member(m)
    finally:
        tc.stop()
    for m, ledger in ledgers.items():
        disk.simulate_crash(ledger)
        entries = replay(wal_dir(tc.local.member_dir(m))).entries
        has_write = any(b"canary/durable" in e.data for e in entries)
        assert has_write is not unsafe, f"member {m}: acknowledged write in WAL after crash: {has_write}"


def test_canary_members_do_not_serve_failpoint_http(watch_canary_cluster: StoreCluster) -> None:
    """No RAFTKUBE_FAILPOINTS_HTTP: the debug routes do not exist on a real member."""
    url = _member_http(watch_canary_cluster, 1)
    assert _http_call(f"{url}/debug/failpoints")[0] == 404
    assert _http_call(f"{url}/debug/failpoints/apply-before", "PUT", b"crash")[0] == 404
