"""etcdctl, a client nobody here wrote, against a real 3-member raftkube store and a real etcd.

The store serves etcd's v3 gRPC API on every member's client port, so the user's path is
plain `etcdctl --endpoints=https://<member> --cacert/--cert/--key <store/pki>`.  Each test
runs the very same etcdctl commands against our cluster and against a real etcd (the
reference: one member, plain http) and compares what etcdctl printed: stdout, exit code and
its `Error:` line.  Only what legitimately differs is taken out first: revisions (each side's
are taken relative to its head when the test starts, and must then agree exactly), cluster,
member and lease ids, raft terms, hashes, timings, db sizes, endpoint URLs and version
strings.  Where three members cannot answer as one does (member list, endpoint
status/health/hashkv, move-leader), the shape is compared (the same JSON fields, the same
line format) and our answer is checked on its own: three members, one leader that all
name, equal hashes, a leader that moves.

Our commands go to a follower unless said otherwise, because that is the harder path: a
follower forwards writes, lease grants/revokes and compactions to the leader through Raft
and relays keep-alive and time-to-live to it; one test checks that against the leader's view.

Run with Debian's etcdctl and etcd 3.4 (CI), and under the `peers` marker with the etcdctl
3.6 that `raftkube peers build` builds (its etcd 3.6 the reference, when built too).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from machinery.process.peers import peer_path
from store.api.protocol import etcd_url
from store.client.layout import CLIENT_NAME
from store.etcdapi.snapshot_file import backup_from_etcd_snapshot
from tests.store.mvcc.etcd import Etcd
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.wait import until

CALL_TIMEOUT = 30.0
"""Any one etcdctl call (its own --command-timeout, 5 s, ends a stuck request well before)."""

COMPACTED = "Error: etcdserver: mvcc: required revision has been compacted"
FUTURE = "Error: etcdserver: mvcc: required revision is a future revision"
NO_LEASE = "etcdserver: requested lease not found"

# ------------------------------------------------------------------------------- the tools


@dataclass(frozen=True)
class Tools:
    etcdctl: str
    etcdctl_minor: tuple[int, int]
    etcd: str
    etcd_minor: tuple[int, int]
    """The reference server's release: a newer one sets fields an older one does not know."""


def clean_env(api3: bool) -> dict[str, str]:
    """The environment without the user's ETCDCTL_* (endpoints, certificates) leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    if api3:
        env["ETCDCTL_API"] = "3"  # 3.4's default anyway; 3.6 warns about the variable
    return env


def minor_version(binary: str, arg: str) -> tuple[int, int]:
    p = subprocess.run([binary, arg], capture_output=True, text=True, timeout=CALL_TIMEOUT, check=False)
    m = re.search(r"(?:etcd|etcdctl) [Vv]ersion: (\d+)\.(\d+)\.", p.stdout)
    assert m, f"{binary} {arg}: no version in {p.stdout!r} {p.stderr!r}"
    return int(m[1]), int(m[2])


def find_tools(flavor: str) -> Tools:
    if flavor == "3.4":
        etcdctl, etcd = shutil.which("etcdctl"), shutil.which("etcd")
        if etcdctl is None or etcd is None:
            pytest.skip(
                "Debian's etcd 3.4 (etcdctl and etcd) is not installed: apt-get install etcd-client etcd-server"
            )
    else:
        built_ctl, built_etcd = peer_path("etcdctl"), peer_path("etcd")
        if not built_ctl.exists():
            pytest.fail(f"etcdctl 3.6 is not built ({built_ctl}): run `raftkube peers build`", pytrace=False)
        etcdctl = str(built_ctl)
        etcd = str(built_etcd) if built_etcd.exists() else shutil.which("etcd")
        if etcd is None:
            pytest.fail(f"no etcd to compare with: neither {built_etcd} nor Debian's etcd", pytrace=False)
    tools = Tools(etcdctl, minor_version(etcdctl, "version"), etcd, minor_version(etcd, "--version"))
    assert ".".join(map(str, tools.etcdctl_minor)) == flavor, tools
    return tools


# ------------------------------------------------------------------------------- one side


@dataclass(frozen=True)
class Out:
    rc: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """etcdctl's last `Error: ...` line (the retry warnings before it depend on timing)."""
        lines = [x for x in (self.stderr + "\n" + self.stdout).splitlines() if x.startswith("Error:")]
        return lines[-1] if lines else ""

    def json(self) -> Any:
        assert self.rc == 0, self
        return json.loads(self.stdout)


@dataclass
class Side:
    name: str
    argv: list[str]
    """etcdctl and its TLS flags."""
    urls: list[str]
    """Every member's etcd URL."""
    env: dict[str, str]
    default: str
    """Where commands go unless told: on our side a follower (set per test)."""
    base: int = 0
    """The head revision when the test started: revisions are compared relative to it."""

    def run(
        self, *args: str, endpoints: Sequence[str] = (), stdin: str | None = None, timeout: float = CALL_TIMEOUT
    ) -> Out:
        eps = ",".join(endpoints or [self.default])
        p = subprocess.run(
            [*self.argv, f"--endpoints={eps}", *args],
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Out(p.returncode, p.stdout, p.stderr)

    def rev(self, relative: int) -> str:
        return str(self.base + relative)

    def head(self) -> int:
        return int(self.run("get", "/no-such-key", "-w", "json").json()["header"]["revision"])

    @contextmanager
    def watch(self, *args: str, log: Path) -> Iterator[Watcher]:
        """`etcdctl watch ...` in the background (`timeout` bounds it), stopped by its pid."""
        w = Watcher(["timeout", "60", *self.argv, f"--endpoints={self.default}", "watch", *args], self.env, log)
        try:
            yield w
        finally:
            w.stop()


class Watcher:
    """A background etcdctl whose output goes to a file, read as it grows."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._file: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._file, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # `timeout` passes SIGTERM on to etcdctl
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._file.close()


# ------------------------------------------------------------------------------- both sides

Arg = str | Callable[[Side], str]
"""A command-line word, or one that depends on the side (a revision, a lease id)."""
Canon = Callable[[Side, str], Any]
"""What of a side's stdout must be equal: the text, or a form with the legitimate differences out."""


def verbatim(side: Side, text: str) -> str:
    return text


def rev(relative: int) -> Callable[[Side], str]:
    """A revision `relative` to the test's start, on each side."""
    return lambda side: side.rev(relative)


@dataclass(frozen=True)
class Seen:
    ours: Out
    etcd: Out
    text: Any
    """What both printed, canonical."""


@dataclass
class Pair:
    tools: Tools
    cluster: StoreCluster
    ours: Side
    etcd: Side
    leader: str
    """Our leader's etcd URL (`ours.default` is a follower's)."""

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.ours, self.etcd

    @property
    def older_reference(self) -> bool:
        """etcdctl 3.6 against Debian's etcd 3.4 (no etcd 3.6 built): ours answers as 3.6 does."""
        return self.tools.etcd_minor < self.tools.etcdctl_minor

    def hashkv(self, side: Side, doc: dict[str, Any]) -> Any:
        """A HashKV answer, canonical; without the hash's revision (3.5.5+) if the reference
        is older."""
        doc = canon_doc(doc, side.base)
        if self.older_reference:
            doc.pop("hash_revision", None)
        return doc

    def both(
        self, *args: Arg, stdin: str | Callable[[Side], str] | None = None, timeout: float = CALL_TIMEOUT
    ) -> tuple[Out, Out]:
        outs = []
        for side in self.sides:
            words = [a(side) if callable(a) else a for a in args]
            text = stdin(side) if callable(stdin) else stdin
            outs.append(side.run(*words, stdin=text, timeout=timeout))
        return outs[0], outs[1]

    def agree(
        self, *args: Arg, canon: Canon = verbatim, stdin: str | Callable[[Side], str] | None = None, ok: bool = True
    ) -> Seen:
        """Both print the same (after `canon`), exit alike and fail alike; `ok`: with 0."""
        o, e = self.both(*args, stdin=stdin)
        shown = " ".join(a if isinstance(a, str) else "<per side>" for a in args)
        assert e.rc == 0 or not ok, f"etcd itself refuses etcdctl {shown}: {e}"
        got, want = canon(self.ours, o.stdout), canon(self.etcd, e.stdout)
        assert (o.rc, got, o.error) == (e.rc, want, e.error), f"etcdctl {shown}\n ours: {o}\n etcd: {e}"
        return Seen(o, e, got)

    def level(self) -> None:
        """Writes on the side behind until both are as far from the test's start (after writes
        made as often as it took on each side): revisions stay in step, in this test and after."""
        for _ in range(100):
            moved = {side.name: side.head() - side.base for side in self.sides}
            if moved["ours"] == moved["etcd"]:
                return
            behind = self.ours if moved["ours"] < moved["etcd"] else self.etcd
            assert behind.run("put", "/~level", "x").rc == 0
        raise AssertionError(f"revisions not in step: {moved}")

    def fail_alike(self, *args: Arg, error: str, stdin: str | None = None) -> None:
        """Both refuse, with etcd's exact words (clients match on them)."""
        seen = self.agree(*args, stdin=stdin, ok=False)
        assert seen.ours.rc != 0 and seen.ours.error == error, seen.ours


# ------------------------------------------------------------------------------- canonical forms

MASKED = {"cluster_id", "member_id", "raft_term", "ID", "id", "lease", "hash", "leader", "raftTerm"}
"""Ids, terms and hashes differ between any two clusters: whether they are set is compared."""
REVISIONS = {"revision", "create_revision", "mod_revision", "compact_revision", "hash_revision"}


def canon_doc(doc: Any, base: int) -> Any:
    """A JSON document with ids masked and revisions relative to `base` (0, unset, and etcd's
    -1, never compacted, stay as they are)."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            if k in MASKED and isinstance(v, int):
                out[k] = "<id>" if v else 0
            elif k in REVISIONS and isinstance(v, int) and v > 0:
                out[k] = v - base
            else:
                out[k] = canon_doc(v, base)
        return out
    if isinstance(doc, list):
        return [canon_doc(x, base) for x in doc]
    return doc


def as_json(side: Side, text: str) -> Any:
    return canon_doc(json.loads(text), side.base)


def as_fields(side: Side, text: str) -> str:
    """`-w fields` output, ids masked and revisions relative."""
    text = re.sub(r'^"(ClusterID|MemberID|RaftTerm|Lease)" : [1-9]\d*$', r'"\1" : <id>', text, flags=re.M)
    return re.sub(
        r'^"(Revision|CreateRevision|ModRevision)" : (\d+)$',
        lambda m: f'"{m[1]}" : {int(m[2]) - side.base}',
        text,
        flags=re.M,
    )


URL = re.compile(r"https?://127\.0\.0\.1:\d+")


UNSET_HERE = {"dbSizeQuota"}
"""etcd fields that are legitimately unset here: the store has no space quota (etcd's
--quota-backend-bytes), so Status says 0 (etcdctl's table: QUOTA 0 B)."""


def assert_same_fields(ours: dict[str, Any], theirs: dict[str, Any], tools: Tools, what: str) -> None:
    """The fields etcd sets, no more, no fewer; against an older reference (no etcd 3.6
    built) ours may set the newer fields it does not know."""
    theirs = {k: v for k, v in theirs.items() if k not in UNSET_HERE}
    detail = f"{what}: ours {sorted(ours)}, etcd {sorted(theirs)}"
    if tools.etcd_minor >= tools.etcdctl_minor:
        assert set(ours) == set(theirs), detail
    else:
        assert set(theirs) <= set(ours), detail


# ------------------------------------------------------------------------------- fixtures

FLAVORS = [
    pytest.param("3.4", id="etcdctl-3.4"),
    pytest.param("3.6", id="etcdctl-3.6", marks=pytest.mark.peers),
]


@dataclass
class World:
    tools: Tools
    cluster: StoreCluster
    ours: Side
    etcd: Side


@pytest.fixture(scope="module", params=FLAVORS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    flavor: str = request.param
    tools = find_tools(flavor)
    etcd = Etcd(tools.etcd, tmp_path_factory.mktemp(f"etcd-{flavor}"))
    try:
        etcd.wait_ready()
        with running_cluster(tmp_path_factory.mktemp(f"rk-{flavor}")) as cluster:
            pki = cluster.local.pki_dir
            tls = [
                f"--cacert={pki / 'ca.crt'}",
                f"--cert={pki / f'{CLIENT_NAME}.crt'}",
                f"--key={pki / f'{CLIENT_NAME}.key'}",
            ]
            env = clean_env(api3=tools.etcdctl_minor < (3, 5))
            urls = [etcd_url(u, insecure=False) for u in cluster.endpoints]
            ours = Side("ours", [tools.etcdctl, *tls], urls, env, default=urls[0])
            theirs = Side("etcd", [tools.etcdctl], [etcd.url], env, default=etcd.url)
            yield World(tools, cluster, ours, theirs)
    finally:
        etcd.stop()


@pytest.fixture
def pair(world: World) -> Pair:
    """Both sides, ours at a follower, each with its head revision as the test's base."""
    c = world.cluster
    leader = c.wait_leader()
    follower = next(m for m in c.local.member_ids() if m != leader)
    world.ours.default = etcd_url(c.endpoint(follower), insecure=False)
    for side in (world.ours, world.etcd):
        side.base = side.head()
    return Pair(world.tools, c, world.ours, world.etcd, etcd_url(c.endpoint(leader), insecure=False))


# ------------------------------------------------------------------------------- KV


def test_put_and_get_print_alike(pair: Pair) -> None:
    """put, and get with every range option etcdctl has, in simple, JSON and fields output."""
    for key, value in [("/kv/a", "1"), ("/kv/b", "22"), ("/kv/c", "333"), ("/kv/d/x", "4444"), ("/kw", "5")]:
        assert pair.agree("put", key, value).text == "OK\n"
    pair.agree("put", "/kv/a", "11")  # /kv/a's version 2, at base+6
    assert pair.agree("get", "/kv/a").text == "/kv/a\n11\n"
    assert pair.agree("get", "/kv/", "--prefix", "--keys-only").text == "/kv/a\n\n/kv/b\n\n/kv/c\n\n/kv/d/x\n\n"
    for args in [
        ("get", "/kv/", "--prefix"),
        ("get", "/kv/", "--prefix", "--print-value-only"),
        ("get", "/kv/", "--prefix", "--limit=2"),
        ("get", "/kv/", "--prefix", "--sort-by=VALUE", "--order=DESCEND"),
        ("get", "/kv/", "--prefix", "--sort-by=MODIFY", "--order=ASCEND", "--limit=3"),
        ("get", "/kv/", "--prefix", "--sort-by=CREATE", "--order=DESCEND"),
        ("get", "/kv/", "--prefix", "--sort-by=KEY", "--order=DESCEND"),
        ("get", "/kv/b", "/kv/d"),
        ("get", "/kv/nothing"),
    ]:
        pair.agree(*args)
    # --from-key runs to the end of the keyspace: "~" keys sort last, and are this test's alone
    for key in ("~kv/a", "~kv/b", "~kv/c"):
        pair.agree("put", key, "v" + key)
    assert pair.agree("get", "~kv/b", "--from-key").text == "~kv/b\nv~kv/b\n~kv/c\nv~kv/c\n"
    assert pair.agree("get", "~kv/b", "--from-key", "--keys-only", "--limit=1").text == "~kv/b\n\n"

    # JSON: etcd's document to the revision, the header's four fields there
    for args in [
        ("get", "/kv/", "--prefix"),
        ("get", "/kv/", "--prefix", "--limit=2"),
        ("get", "/kv/", "--prefix", "--keys-only", "--sort-by=MODIFY", "--order=DESCEND"),
        ("get", "/kv/nothing"),
    ]:
        pair.agree(*args, "-w", "json", canon=as_json)
    doc = pair.ours.run("get", "/kv/", "--prefix", "--limit=2", "-w", "json").json()
    assert set(doc["header"]) == {"cluster_id", "member_id", "revision", "raft_term"}, doc
    assert doc["more"] is True and doc["count"] == 4 and len(doc["kvs"]) == 2, doc
    assert doc["header"]["revision"] == pair.ours.base + 9
    pair.agree("get", "/kv/", "--prefix", "-w", "fields", canon=as_fields)
    if pair.tools.etcdctl_minor >= (3, 5):  # --count-only came in 3.5, for `-w fields` only
        seen = pair.agree("get", "/kv/", "--prefix", "--count-only", "-w", "fields", canon=as_fields)
        assert '"Count" : 4' in seen.text and '"Key"' not in seen.text, seen.text

    # the past: --rev alone and with the range options
    assert pair.agree("get", "/kv/a", "--rev", rev(1)).text == "/kv/a\n1\n"
    assert pair.agree("get", "/kv/", "--prefix", "--rev", rev(2), "--keys-only").text == "/kv/a\n\n/kv/b\n\n"
    pair.agree("get", "/kv/", "--prefix", "--rev", rev(3), "-w", "json", canon=as_json)
    pair.fail_alike("get", "/kv/a", "--rev", rev(1000), error=FUTURE)


def test_del_counts_and_prev_kv(pair: Pair) -> None:
    for key in ("/del/a", "/del/b", "/del/c", "/del/d"):
        pair.agree("put", key, key.upper())
    assert pair.agree("del", "/del/a").text == "1\n"
    assert pair.agree("del", "/del/a").text == "0\n"
    assert pair.agree("del", "/del/b", "--prev-kv").text == "1\n/del/b\n/DEL/B\n"
    seen = pair.agree("del", "/del/", "--prefix", "--prev-kv", "-w", "json", canon=as_json)
    assert seen.text["deleted"] == 2 and [kv["mod_revision"] for kv in seen.text["prev_kvs"]] == [3, 4]
    assert pair.agree("get", "/del/", "--prefix").text == ""


def txn_script(compares: Sequence[str], success: Sequence[str], failure: Sequence[str]) -> str:
    """What `etcdctl txn` reads: compares, a blank line, success ops, a blank line, failure ops."""
    return "".join(line + "\n" for part in (compares, success, failure) for line in [*part, ""])


PROMPTS = ["compares:", "success requests (get, put, del):", "failure requests (get, put, del):"]


def test_txn_compares_and_branches(pair: Pair) -> None:
    """`etcdctl txn -i` fed on stdin: value, version, create and mod compares (revisions per
    side), each branch, and JSON answers whose nested responses are etcd's to the header."""
    pair.agree("put", "/txn/k", "v1")  # base+1
    pair.agree("put", "/txn/k", "v2")  # base+2, version 2

    def taken(s: Side) -> str:
        return txn_script(
            [
                'value("/txn/k") = "v2"',
                'version("/txn/k") = "2"',
                f'create("/txn/k") = "{s.rev(1)}"',
                f'mod("/txn/k") > "{s.rev(1)}"',
            ],
            ["put /txn/ok yes", "get /txn/k", "del /txn/nothing"],
            ["put /txn/failed yes"],
        )

    seen = pair.agree("txn", "-i", stdin=taken)
    assert seen.text.splitlines() == [*PROMPTS, "SUCCESS", "", "OK", "", "/txn/k", "v2", "", "0"], seen.text

    def refused(s: Side) -> str:
        return txn_script(
            ['value("/txn/k") = "v2"', f'mod("/txn/k") < "{s.rev(2)}"'],
            ["put /txn/ok again"],
            ["put /txn/failed yes", "get /txn/ --prefix --keys-only"],
        )

    seen = pair.agree("txn", "-i", stdin=refused)
    assert seen.text.splitlines()[3:] == ["FAILURE", "", "OK", "", "/txn/failed", "", "/txn/k", "", "/txn/ok", ""]
    assert pair.agree("get", "/txn/", "--prefix").text.split() == [
        "/txn/failed",
        "yes",
        "/txn/k",
        "v2",
        "/txn/ok",
        "yes",
    ]
    for compare in ('version("/txn/k") = "2"', 'version("/txn/k") = "9"'):
        ops = txn_script(
            [compare], ["put /txn/j 1", "get /txn/k", "del /txn/nothing"], ["del /txn/ok", "get /txn/ --prefix"]
        )
        pair.agree("txn", "-w", "json", stdin=ops, canon=as_json)
    dup = txn_script([], ["put /txn/dup 1", "put /txn/dup 2"], [])
    pair.fail_alike("txn", stdin=dup, error="Error: etcdserver: duplicate key given in txn request")


# ------------------------------------------------------------------------------- watch


def watch_events(text: str) -> list[list[str]]:
    """`etcdctl watch` simple output as events: PUT or DELETE, then (with --prev-kv and a
    previous value) its key and value, then the key and value; the test's markers (keys
    with "~") left out."""
    events: list[list[str]] = []
    for line in text.splitlines():
        if line in ("PUT", "DELETE"):
            events.append([line])
        elif events:
            events[-1].append(line)
    return [e for e in events if not any("/~" in x for x in e[1:])]


def json_events(text: str) -> list[Any]:
    """The events of `watch -w json` output so far (one response a line; whole lines only)."""
    lines = [x for x in text.split("\n")[:-1] if x.startswith("{")]
    return [ev for line in lines for ev in json.loads(line)["Events"]]


def printed(w: Watcher, text: str) -> Callable[[], bool]:
    return lambda: text in w.text()


def replayed_events(w: Watcher, n: int) -> Callable[[], bool]:
    return lambda: len(json_events(w.text())) >= n


WATCHED = [
    ["PUT", "/watch/a", "1"],
    ["PUT", "/watch/a", "1", "/watch/a", "2"],
    ["PUT", "/watch/b", "3"],
    ["PUT", "/watch/c", "4"],
    ["PUT", "/watch/b", "3", "/watch/b", "5"],
    ["DELETE", "/watch/a", "2", "/watch/a", ""],
]


def test_watch_prints_the_same_events_live_and_replayed(pair: Pair, tmp_path: Path) -> None:
    """A live `watch --prefix --prev-kv` (ours at a follower) prints puts, a txn's two puts
    and a delete as etcd's does; `watch --rev=N` replays that history alike."""
    args = ("/watch/", "--prefix", "--prev-kv")
    with pair.ours.watch(*args, log=tmp_path / "ours") as ours, pair.etcd.watch(*args, log=tmp_path / "etcd") as theirs:
        for side, w in ((pair.ours, ours), (pair.etcd, theirs)):
            # nothing tells that the watch is in place: a marker is put until it comes through
            def through(side: Side = side, w: Watcher = w) -> bool:
                return side.run("put", "/watch/~ready", "x").rc == 0 and "/watch/~ready" in w.text()

            until(f"{side.name}'s watch prints what is put", through, wait=20, step=0.2)
        pair.level()  # the markers were as many as it took on each side
        pair.agree("put", "/watch/a", "1")
        start = {s.name: s.head() for s in pair.sides}  # the first event's revision
        pair.agree("put", "/watch/a", "2")
        pair.agree("put", "/watch/b", "3")
        pair.agree("put", "/unwatched", "x")
        pair.agree("txn", stdin=txn_script([], ["put /watch/c 4", "put /watch/b 5"], []))
        pair.agree("del", "/watch/a")
        pair.agree("put", "/watch/~end", "x")
        for w in (ours, theirs):
            until("the watch prints the end marker", printed(w, "/watch/~end"), wait=20)
        live = watch_events(ours.text()), watch_events(theirs.text())
    assert live[1] == WATCHED, f"etcd's own: {live[1]}"
    assert live[0] == live[1]

    replayed = []
    for side in pair.sides:
        with side.watch(
            "/watch/", "--prefix", f"--rev={start[side.name]}", "-w", "json", log=tmp_path / f"r-{side.name}"
        ) as w:
            until(f"{side.name} replays the history", replayed_events(w, 7), wait=20)
            replayed.append(canon_doc(json_events(w.text()), side.base))
    assert replayed[0] == replayed[1] and len(replayed[0]) == 7, replayed
    with pair.ours.watch(*args, f"--rev={start['ours']}", log=tmp_path / "simple") as w:
        until("our replay in simple output", lambda: len(watch_events(w.text())) >= len(WATCHED), wait=20)
    assert watch_events(w.text()) == WATCHED


# ------------------------------------------------------------------------------- leases


def granted(out: Out) -> int:
    m = re.fullmatch(r"lease ([0-9a-f]+) granted with TTL\((\d+)s\)\n", out.stdout)
    assert m, out
    return int(m[1], 16)


def lease_ids(seen: Seen) -> dict[str, int]:
    return {"ours": granted(seen.ours), "etcd": granted(seen.etcd)}


def lease_arg(ids: dict[str, int]) -> Callable[[Side], str]:
    return lambda side: f"{ids[side.name]:x}"


def any_lease(side: Side, text: str) -> str:
    return re.sub(r"lease [0-9a-f]+ ", "lease <lease> ", text)


def lease_canon(ids: dict[str, int]) -> Canon:
    """Simple lease output: the side's lease id and the seconds remaining masked (the tests
    check them), attached keys sorted (etcd lists them in its map's order)."""

    def canon(side: Side, text: str) -> str:
        lid = ids[side.name]
        text = text.replace(f"{lid:016x}", "<lease>").replace(f"{lid:x}", "<lease>")
        text = re.sub(r"remaining\(\d+s\)", "remaining(~)", text)
        return re.sub(r"keys\(\[([^]]*)\]\)", lambda m: f"keys([{' '.join(sorted(m[1].split()))}])", text)

    return canon


def without_ttl(side: Side, text: str) -> Any:
    doc = as_json(side, text)
    doc.pop("ttl")
    return doc


def test_lease_grant_ttl_keepalive_list_revoke(pair: Pair) -> None:
    """A lease's life through a follower (grant and revoke go through Raft, keep-alive and
    time-to-live are relayed to the leader); the keys on a revoked lease are gone."""
    ids = lease_ids(pair.agree("lease", "grant", "60", canon=any_lease))
    lease, canon = lease_arg(ids), lease_canon(ids)
    pair.agree("put", "/lease/a", "1", "--lease", lease)
    pair.agree("put", "/lease/b", "2", "--lease", lease)
    pair.agree("put", "/lease/kept", "3")
    seen = pair.agree("lease", "timetolive", lease, "--keys", canon=canon)
    assert seen.text == "lease <lease> granted with TTL(60s), remaining(~), attached keys([/lease/a /lease/b])\n"
    assert (
        pair.agree("lease", "timetolive", lease, canon=canon).text
        == "lease <lease> granted with TTL(60s), remaining(~)\n"
    )
    assert (
        pair.agree("lease", "keep-alive", "--once", lease, canon=canon).text
        == "lease <lease> keepalived with TTL(60)\n"
    )
    seen = pair.agree("lease", "timetolive", lease, "-w", "json", canon=without_ttl)
    assert 55 <= seen.ours.json()["ttl"] <= 60 and seen.text["granted-ttl"] == 60, seen.ours
    pair.agree("lease", "keep-alive", "--once", lease, "-w", "json", canon=as_json)
    assert pair.agree("get", "/lease/a", "-w", "json", canon=as_json).ours.json()["kvs"][0]["lease"] == ids["ours"]
    assert "<lease>" in pair.agree("lease", "list", canon=canon).text.splitlines()[1:]
    assert pair.agree("lease", "revoke", lease, canon=canon).text == "lease <lease> revoked\n"
    assert pair.agree("get", "/lease/", "--prefix").text == "/lease/kept\n3\n"
    assert pair.agree("lease", "timetolive", lease, canon=canon).text == "lease <lease> already expired\n"
    assert "<lease>" not in pair.agree("lease", "list", canon=canon).text
    pair.fail_alike("lease", "revoke", lease, error=f"Error: failed to revoke lease ({NO_LEASE})")
    pair.fail_alike("lease", "revoke", "1234abcd", error=f"Error: failed to revoke lease ({NO_LEASE})")
    pair.fail_alike("lease", "keep-alive", "--once", "1234abcd", error=f"Error: {NO_LEASE}")
    pair.fail_alike("put", "/lease/c", "1", "--lease=1234abcd", error=f"Error: {NO_LEASE}")
    assert pair.agree("lease", "timetolive", "1234abcd").text == "lease 000000001234abcd already expired\n"


def test_a_follower_forwards_writes_and_lease_calls_to_the_leader(pair: Pair) -> None:
    """etcd's followers forward proposals and relay keep-alives to the leader; ours too: what
    etcdctl writes at a follower the leader serves, and back."""
    follower, leader = pair.ours.default, pair.leader
    status = pair.ours.run("endpoint", "status", "-w", "json").json()[0]["Status"]
    assert status["leader"] != status["header"]["member_id"], f"{follower} is no follower: {status}"

    def at_leader(*args: str) -> Out:
        return pair.ours.run(*args, endpoints=[leader])

    pair.agree("put", "/fwd/a", "from-follower")
    assert at_leader("get", "/fwd/a", "--print-value-only").stdout == "from-follower\n"
    assert at_leader("put", "/fwd/b", "from-leader").stdout == "OK\n"
    pair.etcd.run("put", "/fwd/b", "from-leader")
    assert pair.agree("get", "/fwd/", "--prefix").text == "/fwd/a\nfrom-follower\n/fwd/b\nfrom-leader\n"
    pair.agree("txn", stdin=txn_script(['value("/fwd/b") = "from-leader"'], ["del /fwd/a"], []))
    assert at_leader("get", "/fwd/", "--prefix", "--keys-only").stdout == "/fwd/b\n\n"

    ids = lease_ids(pair.agree("lease", "grant", "30", canon=any_lease))
    lease, canon = lease_arg(ids), lease_canon(ids)
    ours = f"{ids['ours']:x}"
    pair.agree("put", "/fwd/leased", "x", "--lease", lease)
    assert (
        pair.agree("lease", "keep-alive", "--once", lease, canon=canon).text
        == "lease <lease> keepalived with TTL(30)\n"
    )
    remaining = re.compile(
        rf"lease {ids['ours']:016x} granted with TTL\(30s\), remaining\((\d+)s\), attached keys\(\[/fwd/leased\]\)\n"
    )
    for where, out in (
        ("leader", at_leader("lease", "timetolive", ours, "--keys")),
        ("follower", pair.ours.run("lease", "timetolive", ours, "--keys")),
    ):
        m = remaining.fullmatch(out.stdout)
        assert m and 25 <= int(m[1]) <= 30, (where, out)
    assert (
        at_leader("lease", "keep-alive", "--once", ours).stdout == f"lease {ids['ours']:016x} keepalived with TTL(30)\n"
    )
    pair.agree("lease", "revoke", lease, canon=canon)
    assert at_leader("get", "/fwd/leased").stdout == ""
    assert at_leader("lease", "timetolive", ours).stdout == f"lease {ids['ours']:016x} already expired\n"


# ------------------------------------------------------------------------------- the cluster

MEMBER = re.compile(r"([0-9a-f]+), started, (\S+), (https?://127\.0\.0\.1:\d+), (https?://127\.0\.0\.1:\d+), false")


def test_member_list_shows_our_three_members(pair: Pair) -> None:
    o, e = pair.both("member", "list")
    assert o.rc == e.rc == 0 and MEMBER.fullmatch(e.stdout.strip()), (o, e)
    lines = [MEMBER.fullmatch(x) for x in o.stdout.splitlines()]
    members = [m for m in lines if m]
    assert len(lines) == len(members) == 3, o
    assert sorted(m[4] for m in members) == sorted(pair.ours.urls)  # client URLs: where the etcd API is
    assert all(m[3].startswith("https://") for m in members)
    assert sorted(int(m[1], 16) for m in members) == sorted(pair.cluster.local.member_ids())
    ours, theirs = (x.json() for x in pair.both("member", "list", "-w", "json"))
    assert_same_fields(ours["header"], theirs["header"], pair.tools, "member list header")
    for m in ours["members"]:
        assert_same_fields(m, theirs["members"][0], pair.tools, "member")


def test_endpoint_status_names_one_leader(pair: Pair) -> None:
    """`endpoint status --cluster`: every member answers with etcd's fields, and exactly one
    is the leader that every member names."""
    ours = pair.ours.run("endpoint", "status", "--cluster", "-w", "json").json()
    (theirs,) = pair.etcd.run("endpoint", "status", "--cluster", "-w", "json").json()
    assert sorted(x["Endpoint"] for x in ours) == sorted(pair.ours.urls), ours
    for x in ours:
        assert_same_fields(x, theirs, pair.tools, "endpoint status")
        assert_same_fields(x["Status"], theirs["Status"], pair.tools, "status")
        assert_same_fields(x["Status"]["header"], theirs["Status"]["header"], pair.tools, "status header")
    statuses = [x["Status"] for x in ours]
    leaders = [s["header"]["member_id"] for s in statuses if s["leader"] == s["header"]["member_id"]]
    assert len(leaders) == 1 and {s["leader"] for s in statuses} == set(leaders), statuses
    assert theirs["Status"]["leader"] == theirs["Status"]["header"]["member_id"]
    # the table etcdctl prints by default: the same columns, "true" in the leader's row alone
    o, e = pair.both("endpoint", "status", "--cluster")
    assert o.rc == e.rc == 0, (o, e)
    rows = [x.split(", ") for x in o.stdout.splitlines()]
    (etcd_row,) = [x.split(", ") for x in e.stdout.splitlines()]
    leader_column = etcd_row.index("true")  # etcd's one member leads, and is no learner
    assert len(rows) == 3 and all(len(r) == len(etcd_row) for r in rows), (o, e)
    assert [r[leader_column] for r in rows].count("true") == 1, o.stdout


def test_endpoint_health_of_every_member(pair: Pair) -> None:
    healthy = re.compile(
        r"(https?://127\.0\.0\.1:\d+) is healthy: successfully committed proposal: took = [\d.]+[µm]?s"
    )
    o, e = pair.both("endpoint", "health", "--cluster")
    assert o.rc == e.rc == 0, (o, e)
    # etcdctl prints health to stderr (3.4) or stdout (3.6)
    assert [bool(healthy.fullmatch(x)) for x in (e.stdout + e.stderr).splitlines() if "healthy" in x] == [True], e
    lines = [healthy.fullmatch(x) for x in (o.stdout + o.stderr).splitlines() if "healthy" in x]
    assert sorted(m[1] for m in lines if m) == sorted(pair.ours.urls), o
    ours, theirs = (x.json() for x in pair.both("endpoint", "health", "--cluster", "-w", "json"))
    assert len(ours) == 3 and all(x["health"] is True for x in ours + theirs), (ours, theirs)
    assert all(set(x) == set(theirs[0]) for x in ours), (ours, theirs)


def test_endpoint_hashkv_is_equal_on_every_member(pair: Pair) -> None:
    pair.agree("put", "/hash/a", "1")

    def at(side: Side) -> str:  # every member hashes this revision
        return f"--rev={side.rev(1)}"

    def equal_hashes() -> list[str] | None:
        o = pair.ours.run("endpoint", "hashkv", "--cluster", at(pair.ours))
        hashes = [x.split(", ")[1] for x in o.stdout.splitlines()]  # endpoint, hash[, revision]
        return hashes if o.rc == 0 and len(hashes) == 3 and len(set(hashes)) == 1 else None

    until("equal hashes on the three members", equal_hashes, wait=10, step=0.2)

    def line(side: Side, text: str) -> list[str]:  # endpoint, hash (and 3.6: the hash's revision)
        url, _, *hash_rev = text.strip().split(", ")
        hash_rev = [] if pair.older_reference else [str(int(r) - side.base) for r in hash_rev]
        return [URL.sub("<url>", url), "<hash>", *hash_rev]

    assert pair.agree("endpoint", "hashkv", at, canon=line).text[:2] == ["<url>", "<hash>"]
    ours, (theirs,) = (x.json() for x in pair.both("endpoint", "hashkv", "--cluster", at, "-w", "json"))
    assert len(ours) == 3 and len({x["HashKV"]["hash"] for x in ours}) == 1, ours
    for x in ours:
        assert pair.hashkv(pair.ours, x["HashKV"]) == pair.hashkv(pair.etcd, theirs["HashKV"]), (x, theirs)


def test_snapshot_save_writes_a_checked_file(pair: Pair, tmp_path: Path) -> None:
    """`etcdctl snapshot save` checks the file's SHA-256 trailer itself; ours holds our backup."""
    said = {}
    for side in pair.sides:
        path = tmp_path / side.name / "snap.db"
        path.parent.mkdir()
        o = side.run("snapshot", "save", str(path))
        assert o.rc == 0 and path.stat().st_size > 0 and not path.with_name("snap.db.part").exists(), o
        said[side.name] = re.sub(r"\d+\.\d+\.\d+", "<version>", o.stdout.replace(str(path), "<file>"))
        if pair.older_reference:  # etcdctl 3.6 names the server's version if it says one (3.4 does not)
            said[side.name] = said[side.name].replace("Server version <version>\n", "")
    assert said["ours"] == said["etcd"] and "Snapshot saved at <file>\n" in said["ours"], said
    assert backup_from_etcd_snapshot((tmp_path / "ours" / "snap.db").read_bytes()) is not None


def compacted_at(n: int) -> Canon:
    return lambda side, text: text.replace(side.rev(n), "<N>")


def test_compaction_and_reading_below_it(pair: Pair) -> None:
    for v in ("1", "2", "3", "4"):
        pair.agree("put", "/cmp/k", v)  # base+1 .. base+4
    assert pair.agree("compaction", rev(3), canon=compacted_at(3)).text == "compacted revision <N>\n"
    pair.fail_alike("get", "/cmp/k", "--rev", rev(2), error=COMPACTED)
    assert pair.agree("get", "/cmp/k", "--rev", rev(3)).text == "/cmp/k\n3\n"
    pair.fail_alike("compaction", rev(1), error=COMPACTED)
    pair.fail_alike("compaction", rev(1000), error=FUTURE)
    pair.fail_alike("get", "/cmp/k", "--rev", rev(1000), error=FUTURE)
    # a watch from below the compaction is cancelled, and etcdctl says why
    o, e = pair.both("watch", "/cmp/k", "--rev", rev(1), timeout=20)
    assert (o.rc, o.stdout, o.error) == (e.rc, e.stdout, e.error) and e.rc != 0, (o, e)
    assert "watch was canceled (etcdserver: mvcc: required revision has been compacted)" in o.stdout + o.stderr, o
    pair.agree("compaction", "--physical", rev(4), canon=compacted_at(4))
    ours, theirs = (x.json()[0]["HashKV"] for x in pair.both("endpoint", "hashkv", "-w", "json"))
    assert pair.hashkv(pair.ours, ours) == pair.hashkv(pair.etcd, theirs), (ours, theirs)
    assert ours["compact_revision"] == pair.ours.base + 4


def test_move_leader_moves_it(pair: Pair) -> None:
    """With every member in --endpoints, etcdctl finds the leader and has it hand over."""
    cluster = pair.cluster
    old = cluster.wait_leader()
    new = next(m for m in cluster.local.member_ids() if m != old)
    o = pair.ours.run("move-leader", f"{new:x}", endpoints=pair.ours.urls)
    assert o.rc == 0 and o.stdout == f"Leadership transferred from {old:x} to {new:x}\n", o
    etcd_id = pair.etcd.run("endpoint", "status", "-w", "json").json()[0]["Status"]["header"]["member_id"]
    e = pair.etcd.run("move-leader", f"{etcd_id:x}")  # its only member: to itself
    assert e.rc == 0 and e.stdout == f"Leadership transferred from {etcd_id:x} to {etcd_id:x}\n", e

    def moved() -> bool:
        doc = pair.ours.run("endpoint", "status", "-w", "json", endpoints=pair.ours.urls).json()
        return all(x["Status"]["leader"] == new for x in doc)

    until(f"every member names {new} the leader", moved, wait=10, step=0.1)
    assert cluster.wait_leader() == new
    to_self = pair.ours.run("move-leader", f"{new:x}", "-w", "json", endpoints=pair.ours.urls)
    assert to_self.json() == pair.etcd.run("move-leader", f"{etcd_id:x}", "-w", "json").json() == {}, to_self
    for side in pair.sides:
        bad = side.run("move-leader", "abcdef", endpoints=side.urls)
        assert bad.rc != 0 and bad.error == "Error: etcdserver: bad leader transferee", (side.name, bad)
    alone = etcd_url(cluster.endpoint(old), insecure=False)
    o = pair.ours.run("move-leader", f"{old:x}", endpoints=[alone])
    assert o.rc != 0 and o.error == f"Error: no leader endpoint given at [{alone}]", o


def no_timing(side: Side, text: str) -> str:
    return re.sub(r"\. took \S+", "", URL.sub("<url>", text))  # 3.6 says how long it took


def test_defrag_answers_as_etcd_does(pair: Pair) -> None:
    assert pair.agree("defrag", canon=no_timing).text == "Finished defragmenting etcd member[<url>]\n"
    o = pair.ours.run("defrag", "--cluster")
    assert o.rc == 0 and no_timing(pair.ours, o.stdout) == "Finished defragmenting etcd member[<url>]\n" * 3, o


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("put", "/err/none", "--ignore-value"), "etcdserver: key not found"),
        (("put", "", "v"), "etcdserver: key is not provided"),
        (("lease", "grant", "99999999999"), "failed to grant lease (etcdserver: too large lease TTL)"),
    ],
)
def test_refusals_read_as_etcds(pair: Pair, args: tuple[str, ...], error: str) -> None:
    """Where etcd refuses, ours refuses with etcd's words."""
    pair.fail_alike(*args, error=f"Error: {error}")
