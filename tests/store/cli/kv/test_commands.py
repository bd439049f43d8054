"""`raftkube kv ...` as a user runs it: real processes against a real 3-member cluster.

Checks the output contract (JSON shapes and types, etcdctl-like human lines) and that every
refused request or bad input exits 2 with a message naming the error.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from machinery.process.launch import free_ports
from store.launcher import LocalCluster
from tests.support.cli import raftkube, raftkube_interactive
from tests.support.cluster import running_cluster
from tests.support.paths import ROOT

HEADER_KEYS = {"cluster_id", "member_id", "revision", "raft_term"}
KV_KEYS = ["key", "value", "create_revision", "mod_revision", "version", "lease"]
NOWHERE = ["--endpoints", "tcp://127.0.0.1:1"]
"""For invocations that must fail before contacting any cluster."""
T = TypeVar("T")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("kvcli")
    with running_cluster(d):
        yield d


def kv(d: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return raftkube("kv", *args, "--data-dir", str(d), stdin=stdin)


def ok_json(d: Path, *args: str, stdin: str | None = None) -> Any:
    proc = kv(d, *args, "-o", "json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1, proc.stdout  # one document, one line
    return json.loads(proc.stdout)


def ok_human(d: Path, *args: str, stdin: str | None = None) -> str:
    proc = kv(d, *args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """Run independent invocations at once: each one pays for an interpreter start."""
    with ThreadPoolExecutor(max_workers=4) as ex:
        return list(ex.map(lambda f: f(), calls))


def refused(proc: subprocess.CompletedProcess[str], code: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"raftkube: {code}: "), proc.stderr
    assert proc.stdout == ""


def check_header(h: dict[str, Any]) -> None:
    assert set(h) == HEADER_KEYS
    assert all(isinstance(v, int) and v > 0 for v in h.values()), h


def check_kv(kv_obj: dict[str, Any]) -> None:
    assert list(kv_obj) == KV_KEYS
    assert isinstance(kv_obj["key"], str) and isinstance(kv_obj["value"], str)
    assert all(isinstance(kv_obj[k], int) for k in KV_KEYS[2:])


# ---------------------------------------------------------------------- put / get / del
def test_put_get_round_trip_has_the_documented_json_shapes(data_dir: Path) -> None:
    """put prints OK / {header, prev_kv}; get prints key and value / {header, kvs, count, more}."""
    assert ok_human(data_dir, "put", "rt/k", "v1") == "OK\n"
    put = ok_json(data_dir, "put", "rt/k", "héllo wörld", "--prev-kv")
    assert list(put) == ["header", "prev_kv"]
    check_header(put["header"])
    check_kv(put["prev_kv"])
    assert put["prev_kv"]["value"] == "v1"
    assert ok_json(data_dir, "put", "rt/other", "x")["prev_kv"] is None

    got = ok_json(data_dir, "get", "rt/k")
    assert list(got) == ["header", "kvs", "count", "more"]
    check_header(got["header"])
    assert got["header"]["revision"] >= put["header"]["revision"]
    assert got["count"] == 1 and got["more"] is False
    (item,) = got["kvs"]
    check_kv(item)
    assert item["key"] == "rt/k" and item["value"] == "héllo wörld"
    assert item["version"] == 2 and item["lease"] == 0
    assert item["mod_revision"] == put["header"]["revision"] > item["create_revision"]
    assert ok_human(data_dir, "get", "rt/k") == "rt/k\nhéllo wörld\n"

    # --endpoints instead of --data-dir finds the same data, given the TLS files as etcdctl takes them.
    eps = ",".join(LocalCluster(data_dir).client_urls()[:2])
    pki = LocalCluster(data_dir).pki_dir
    tls = ["--cacert", str(pki / "ca.crt"), "--cert", str(pki / "admin.crt"), "--key", str(pki / "admin.key")]
    proc = raftkube("kv", "get", "rt/k", "--print-value-only", "--endpoints", eps, *tls)
    assert proc.returncode == 0 and proc.stdout == "héllo wörld\n", proc.stderr
    # Without them the CLI says what it needs, and refuses to talk plaintext to a TLS cluster.
    proc = raftkube("kv", "get", "rt/k", "--endpoints", eps)
    assert proc.returncode == 2 and "--cacert" in proc.stderr, proc.stderr
    proc = raftkube("kv", "get", "rt/k", "--endpoints", eps, "--insecure", "--timeout", "1")
    assert proc.returncode == 1 and "unavailable" in proc.stderr, proc.stderr


def test_non_utf8_bytes_round_trip_raw_and_show_backslash_escaped_in_json(data_dir: Path) -> None:
    """Bytes from argv are stored as given; human output is raw, JSON uses backslashreplace."""
    base = [sys.executable, "-m", "components.cli", "kv"]
    tail = [b"--data-dir", str(data_dir).encode()]
    put = subprocess.run(
        [*base, b"put", b"bin/k", b"a\xffb", *tail], cwd=ROOT, capture_output=True, timeout=30, check=False
    )
    assert put.returncode == 0, put.stderr
    raw = subprocess.run(
        [*base, b"get", b"bin/k", b"--print-value-only", *tail], cwd=ROOT, capture_output=True, timeout=30, check=False
    )
    assert raw.stdout == b"a\xffb\n"
    assert ok_json(data_dir, "get", "bin/k")["kvs"][0]["value"] == "a\\xffb"


def test_get_range_flags(data_dir: Path) -> None:
    """--prefix, RANGE_END, --from-key, --limit, --rev, --keys-only, --count-only, sorting, --consistency."""
    first = ok_json(data_dir, "put", "rg/a", "3")["header"]["revision"]
    ok_human(data_dir, "txn", stdin="\nput rg/b 1\nput rg/c 2\nput rh outside\n")
    ok_human(data_dir, "put", "rg/a", "4")  # rg/a: version 2, newest mod revision

    queries: list[tuple[str, ...]] = [
        ("rg/", "--prefix"),
        ("rg/a", "rg/c", "--consistency", "s"),
        ("rg/c", "--from-key"),
        ("rg/", "--prefix", "--limit", "2", "--keys-only"),
        ("rg/", "--prefix", "--rev", str(first)),
        ("rg/", "--prefix", "--count-only"),
        ("rg/", "--prefix", "--sort-by", "VERSION", "--order", "DESCEND"),
        ("rg/", "--prefix", "--sort-by", "value"),
    ]
    human_queries: list[tuple[str, ...]] = [
        ("rg/", "--prefix", "--keys-only"),
        ("rg/", "--prefix", "--count-only"),
        ("rg/", "--prefix", "--print-value-only", "--sort-by", "VALUE", "--order", "DESCEND"),
    ]
    calls: list[Callable[[], Any]] = [lambda q=q: ok_json(data_dir, "get", *q) for q in queries]
    calls += [lambda q=q: ok_human(data_dir, "get", *q) for q in human_queries]
    prefix, ranged, from_key, limited, old, count_only, by_version, by_value, *human = side_by_side(*calls)

    def keys(resp: dict[str, Any]) -> list[str]:
        return [x["key"] for x in resp["kvs"]]

    assert keys(prefix) == ["rg/a", "rg/b", "rg/c"] and prefix["count"] == 3 and prefix["more"] is False
    assert keys(ranged) == ["rg/a", "rg/b"]
    assert keys(from_key)[:2] == ["rg/c", "rh"]
    assert keys(limited) == ["rg/a", "rg/b"] and limited["count"] == 3 and limited["more"] is True
    assert [x["value"] for x in limited["kvs"]] == ["", ""]  # --keys-only
    assert [(x["key"], x["value"]) for x in old["kvs"]] == [("rg/a", "3")]
    assert count_only["kvs"] == [] and count_only["count"] == 3
    assert keys(by_version)[0] == "rg/a"
    assert keys(by_value) == ["rg/b", "rg/c", "rg/a"]
    assert human == ["rg/a\nrg/b\nrg/c\n", "3\n", "4\n2\n1\n"]


def test_del_prints_count_and_prev_kvs(data_dir: Path) -> None:
    """del prints the count (and deleted kvs with --prev-kv) / {header, deleted, prev_kvs}."""
    ok_human(data_dir, "put", "dl/a", "1")
    ok_human(data_dir, "put", "dl/b", "2")
    out = ok_json(data_dir, "del", "dl/", "--prefix", "--prev-kv")
    assert list(out) == ["header", "deleted", "prev_kvs"]
    check_header(out["header"])
    assert out["deleted"] == 2
    for x in out["prev_kvs"]:
        check_kv(x)
    assert [(x["key"], x["value"]) for x in out["prev_kvs"]] == [("dl/a", "1"), ("dl/b", "2")]
    assert ok_json(data_dir, "del", "dl/a")["prev_kvs"] == []
    assert ok_human(data_dir, "del", "dl/", "--prefix") == "0\n"
    ok_human(data_dir, "put", "dl/c", "3")
    assert ok_human(data_dir, "del", "dl/c", "--prev-kv") == "1\ndl/c\n3\n"


# ---------------------------------------------------------------------- txn
def test_txn_from_stdin_takes_the_success_then_the_failure_branch(data_dir: Path, tmp_path: Path) -> None:
    """The same txn text succeeds once (compare holds), then fails (it no longer does)."""
    ok_human(data_dir, "put", "tx/k", "v1")
    text = (
        'value("tx/k") = "v1"\n'
        'version("tx/k") != "0"\n'
        'create("tx/k") > "0"\n'
        'mod("tx/k") < "999999"\n'
        'lease("tx/k") = "0"\n'
        "\n"
        'put tx/k "v 2"\n'
        "get tx/ --prefix\n"
        "\n"
        "put tx/failed yes\n"
        "del tx/nothing --prev-kv\n"
    )
    assert ok_human(data_dir, "txn", stdin=text) == "SUCCESS\n\nOK\n\ntx/k\nv 2\n"
    out = ok_json(data_dir, "txn", stdin=text)
    assert list(out) == ["header", "succeeded", "responses"]
    check_header(out["header"])
    assert out["succeeded"] is False
    assert out["responses"] == [{"op": "put", "prev_kv": None}, {"op": "del", "deleted": 0, "prev_kvs": []}]
    f = tmp_path / "txn.txt"
    f.write_text('value("tx/k") = "v 2"\n\nget tx/k\n\n')
    out = ok_json(data_dir, "txn", "--file", str(f))
    assert out["succeeded"] is True
    (resp,) = out["responses"]
    assert list(resp) == ["op", "kvs", "count", "more"] and resp["op"] == "get"
    check_kv(resp["kvs"][0])
    assert resp["kvs"][0]["value"] == "v 2" and resp["count"] == 1
    assert ok_human(data_dir, "get", "tx/failed") == "tx/failed\nyes\n"


TXN_SYNTAX_ERRORS = [
    # (txn text, line named in the message, words in the message)
    ("put a b\n", 1, "malformed comparison"),
    ('value("a") = "1"\nmod("a") > "x"\n', 2, "integer"),
    ('value("a") = "1"\n\nput a\n', 3, "put needs KEY VALUE"),
    ('\nget a --bogus\nput "a b\n', 2, "unknown flag --bogus"),
    ("\nput a 1\n\nput a 2\n\nput a 3\n", 6, "after the failure ops"),
]


def test_txn_syntax_error_exits_2_naming_the_line() -> None:
    """Parsed before any request is sent: the message names the line and what is wrong."""
    calls = [lambda t=t: raftkube("kv", "txn", *NOWHERE, stdin=t) for t, _, _ in TXN_SYNTAX_ERRORS]
    for (text, line, what), proc in zip(TXN_SYNTAX_ERRORS, side_by_side(*calls), strict=True):
        assert proc.returncode == 2, text
        assert proc.stderr.startswith(f"raftkube: txn: line {line}: "), (text, proc.stderr)
        assert what in proc.stderr, (text, proc.stderr)


# ---------------------------------------------------------------------- watch
def test_watch_json_prints_one_line_per_event_and_exits_after_count(data_dir: Path) -> None:
    """A running watch sees puts and deletes made after it started, one JSON object per line."""
    rev = ok_json(data_dir, "put", "wt-start", "x")["header"]["revision"]
    args = ["kv", "watch", "wt/", "--prefix", "--prev-kv", "--count", "3", "--rev", str(rev + 1), "-o", "json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.cli", *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ok_human(data_dir, "put", "wt/a", "1")
        ok_human(data_dir, "put", "wt/a", "2")
        ok_human(data_dir, "del", "wt/a")
        ok_human(data_dir, "put", "wt/a", "after the count")
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in events] == ["PUT", "PUT", "DELETE"]
    for e in events:
        assert list(e) == ["type", "kv", "prev_kv"]
        check_kv(e["kv"])
    assert [e["kv"]["value"] for e in events] == ["1", "2", ""]
    assert events[0]["prev_kv"] is None
    assert events[1]["prev_kv"]["value"] == "1" and events[2]["prev_kv"]["value"] == "2"
    assert events[0]["kv"]["mod_revision"] == rev + 1


def test_watch_human_output_and_filters(data_dir: Path) -> None:
    """Human lines are TYPE, key, value; --filter noput leaves only the deletes (here from history)."""
    rev = ok_json(data_dir, "put", "wh/a", "1")["header"]["revision"]
    ok_human(data_dir, "del", "wh/a")
    assert ok_human(data_dir, "watch", "wh/a", "--rev", str(rev), "--count", "2") == "PUT\nwh/a\n1\nDELETE\nwh/a\n\n"
    assert ok_human(data_dir, "watch", "wh/", "--prefix", "--rev", str(rev), "--count", "1", "--filter", "noput") == (
        "DELETE\nwh/a\n\n"
    )


# ---------------------------------------------------------------------- leases
def test_lease_grant_ttl_keepalive_revoke(data_dir: Path) -> None:
    """A lease's whole life through the CLI, with put --lease by hex and by decimal ID."""
    g, human = side_by_side(
        lambda: ok_json(data_dir, "lease", "grant", "60"), lambda: ok_human(data_dir, "lease", "grant", "60")
    )
    assert list(g) == ["header", "id", "id_hex", "ttl"]
    check_header(g["header"])
    lid, lhex = g["id"], g["id_hex"]
    assert isinstance(lid, int) and lhex == f"{lid:016x}" and g["ttl"] == 60
    assert re.fullmatch(r"lease [0-9a-f]{16} granted with TTL\(60s\)\n", human), human

    assert side_by_side(
        lambda: ok_human(data_dir, "put", "ls/a", "1", "--lease", lhex),
        lambda: ok_human(data_dir, "put", "ls/b", "2", "--lease", str(lid)),
    ) == ["OK\n", "OK\n"]

    got, t, t_human = side_by_side(
        lambda: ok_json(data_dir, "get", "ls/a"),
        lambda: ok_json(data_dir, "lease", "ttl", lhex, "--keys"),
        lambda: ok_human(data_dir, "lease", "ttl", lhex, "--keys"),
    )
    assert got["kvs"][0]["lease"] == lid
    assert list(t) == ["header", "id", "id_hex", "ttl", "granted_ttl", "keys"]
    assert t["id"] == lid and t["id_hex"] == lhex and t["granted_ttl"] == 60 and 0 < t["ttl"] <= 60
    assert sorted(t["keys"]) == ["ls/a", "ls/b"]
    assert re.fullmatch(rf"lease {lhex} granted with TTL\(60s\), remaining\(\d+s\), attached keys\(\[.*\]\)\n", t_human)

    k, k_human, listed = side_by_side(
        lambda: ok_json(data_dir, "lease", "keepalive", lhex, "--once"),
        lambda: ok_human(data_dir, "lease", "keepalive", lhex, "--once"),
        lambda: ok_json(data_dir, "lease", "list"),
    )
    assert list(k) == ["header", "id", "id_hex", "ttl"] and k["id"] == lid and k["ttl"] == 60
    assert k_human == f"lease {lhex} keepalived with TTL(60)\n"
    assert {"id": lid, "id_hex": lhex} in listed["leases"]

    assert ok_human(data_dir, "lease", "revoke", lhex) == f"lease {lhex} revoked\n"
    after, gone, gone_human, again = side_by_side(
        lambda: ok_json(data_dir, "get", "ls/", "--prefix"),
        lambda: ok_json(data_dir, "lease", "ttl", lhex),
        lambda: ok_human(data_dir, "lease", "ttl", lhex),
        lambda: kv(data_dir, "lease", "revoke", lhex),
    )
    assert after["count"] == 0
    assert gone["ttl"] == -1 and gone["keys"] == []
    assert gone_human == f"lease {lhex} already expired\n"
    refused(again, "lease-not-found")


def test_lease_keepalive_renews_every_ttl_third_until_ctrl_c(data_dir: Path) -> None:
    # a TTL the start of a second CLI process cannot outlast on a loaded machine (3 s did: the
    # lease expired before its first renewal)
    lid = ok_json(data_dir, "lease", "grant", "9")["id"]
    argv = ("kv", "lease", "keepalive", str(lid), "-o", "json", "--data-dir", str(data_dir))
    with raftkube_interactive(*argv) as proc:  # its pipes closed whatever happens
        try:
            assert proc.stdout is not None and proc.stderr is not None
            lines = []
            for _ in range(2):  # 3 s apart (TTL/3)
                line = proc.stdout.readline()
                assert line, f"keepalive ended early (exit {proc.wait(timeout=10)}): {proc.stderr.read()}"
                lines.append(json.loads(line))
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert all(x["id"] == lid and x["ttl"] == 9 for x in lines)
    assert proc.returncode == 130, err
    assert ok_json(data_dir, "lease", "ttl", str(lid))["granted_ttl"] == 9


# ---------------------------------------------------------------------- compaction
def test_compact_then_reading_below_it_is_refused(data_dir: Path) -> None:
    before = ok_json(data_dir, "put", "cp/k", "old")["header"]["revision"]
    rev = ok_json(data_dir, "put", "cp/k", "new")["header"]["revision"]
    out = ok_json(data_dir, "compact", str(rev))
    assert list(out) == ["header", "compact_revision"] and out["compact_revision"] == rev
    check_header(out["header"])
    proc = kv(data_dir, "get", "cp/k", "--rev", str(before))
    refused(proc, "compacted")
    assert f"compact revision {rev}" in proc.stderr
    refused(kv(data_dir, "watch", "cp/k", "--rev", str(before)), "compacted")
    refused(kv(data_dir, "compact", str(rev), "--physical"), "compacted")
    assert ok_human(data_dir, "get", "cp/k", "--rev", str(rev)) == "cp/k\nnew\n"


# ---------------------------------------------------------------------- refusals and bad usage
REFUSED: list[tuple[list[str], str | None, str]] = [
    # (arguments, stdin, error code the message must name)
    (["put", "", "v"], None, "key-empty"),
    (["put", "k", "v", "--lease", "0x7fff0000dead"], None, "lease-not-found"),
    (["get", "k", "--rev", "999999999"], None, "future-revision"),
    (["get", "b", "a"], None, "invalid-range"),
    (["put", "never-written", "--ignore-value"], None, "key-not-found"),
    (["txn"], "\nput d 1\nput d 2\n", "duplicate-key"),
    (["txn"], "\n" + "".join(f"put many/{i} v\n" for i in range(129)), "too-many-ops"),
    (["put", "big"], "x" * (1_572_864 + 100), "request-too-large"),  # the value from stdin
]


def test_refused_requests_exit_2_naming_the_error(data_dir: Path) -> None:
    calls = [lambda a=a, i=i: kv(data_dir, *a, stdin=i) for a, i, _ in REFUSED]
    for (args, _, code), proc in zip(REFUSED, side_by_side(*calls), strict=True):
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert proc.stderr.startswith(f"raftkube: {code}: "), (args, proc.stderr)
        assert proc.stdout == "", args
    assert ok_json(data_dir, "get", "many/", "--prefix", "--count-only")["count"] == 0


BAD_USAGE: list[tuple[list[str], str]] = [
    # (arguments, text the message must contain)
    (["get", "k", "--limit", "-1"], "must not be negative"),
    (["get", "k", "--sort-by", "SIZE"], "invalid choice: 'SIZE'"),
    (["put"], "the following arguments are required: key"),
    (["lease", "ttl", "not-hex"], "not a lease ID"),
    (["get", "a", "b", "--prefix"], "give RANGE_END or --prefix/--from-key, not both"),
    (["txn", "--file", "/nonexistent/txn"], "cannot read /nonexistent/txn"),
]


def test_bad_usage_exits_2_with_a_message() -> None:
    calls = [lambda a=a: raftkube("kv", *a, *NOWHERE) for a, _ in BAD_USAGE]
    for (args, what), proc in zip(BAD_USAGE, side_by_side(*calls), strict=True):
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert what in proc.stderr, (args, proc.stderr)


@pytest.mark.parametrize(
    ("tls_args", "says"),
    [
        (["--cert", "c.crt"], "give --cert and --key together"),
        (["--insecure", "--cacert", "ca.crt"], "--insecure excludes --cacert"),
        (["--cacert", "/nonexistent/ca.crt"], "TLS credentials: "),
        ([], "--endpoints: give --cacert, --cert and --key"),
    ],
)
def test_bad_tls_arguments_exit_2_saying_what_is_wrong(tmp_path: Path, tls_args: list[str], says: str) -> None:
    (port,) = free_ports(1)
    proc = raftkube("kv", "get", "k", "--endpoints", f"tcp://127.0.0.1:{port}", "--data-dir", str(tmp_path), *tls_args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr, proc.stderr


def test_unreachable_cluster_exits_1_with_a_clear_message() -> None:
    """No member answers: not a usage error (retrying may help), so exit 1, naming the endpoint."""
    (port,) = free_ports(1)
    proc = raftkube("kv", "get", "k", "--endpoints", f"tcp://127.0.0.1:{port}", "--timeout", "0.5", "--insecure")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"raftkube: unavailable: cannot connect to tcp://127.0.0.1:{port}")
    proc = raftkube("kv", "get", "k", "--endpoints", "nonsense")
    assert proc.returncode == 2 and "not a host:port address" in proc.stderr
