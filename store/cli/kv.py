"""`raftkube kv ...`: etcdctl-style reads, writes, txns, watches, compaction and leases.

Choices the issue left open, so that scripts can rely on them:

* Bytes.  Keys and values on the command line are the bytes the shell passed (os.fsencode;
  normally UTF-8), txn text is read as bytes.  Human output writes keys and values
  as raw bytes, as etcdctl does, so `kv get K --print-value-only > f` round-trips binary
  values.  JSON output decodes them as UTF-8 with errors="backslashreplace": a byte 0xff
  shows as the four characters `\\xff` (indistinguishable from those characters stored
  literally; use human output for binary data).  JSON is always written as UTF-8.
* Exit status.  0 success; 2 bad usage or a request the store refused (the message names the
  error code, `raftkube: key-empty: ...`): retrying the same command cannot help.  1 when the
  cluster could not serve it (unavailable, no leader, timeout, leader changed, internal
  error): retrying may help, and a write's outcome may be unknown.  Ctrl-C exits 130.
* Lease IDs are accepted as `0x`-prefixed hex, hex with a letter in it, or decimal.  A string
  of digits only could be either (lease grant prints hex): it is looked up in the lease list
  and means whichever of the two exists; decimal when neither does.
* JSON shapes: a key-value is {key, value, create_revision, mod_revision, version, lease};
  txn responses are {"op": "get", kvs, count, more}, {"op": "put", prev_kv} and
  {"op": "del", deleted, prev_kvs}; watch prints one line per event, plus
  {"type": "PROGRESS", "revision": R} lines only when --progress-notify asked for them;
  lease commands print {header, id, id_hex, ...}; compact prints {header, compact_revision}.
* Human output of `get --count-only` is the count (etcdctl prints nothing there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from machinery.process.command import UsageError
from store.api import methods as M
from store.api.cluster import EMPTY
from store.api.errors import CompactedError, FutureRevisionError, LeaseNotFoundError, Outcome, StoreError
from store.api.kv import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    ResponseOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.api.lease import LeaseGrantRequest, LeaseIdRequest, LeaseTimeToLiveRequest
from store.api.protocol import Header, split_url
from store.api.watch import WatchFilter, WatchResponse
from store.cli.common import add_cluster_arguments, endpoints, make_client
from store.client.client import Client

_SORT_TARGETS = {
    "KEY": SortTarget.KEY,
    "VERSION": SortTarget.VERSION,
    "CREATE": SortTarget.CREATE,
    "MODIFY": SortTarget.MOD,
    "VALUE": SortTarget.VALUE,
}


# ====================================================================== registration
def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    kv = sub.add_parser("kv", help="read and write keys, txns, watches, compaction and leases (etcdctl-like)")
    ksub = kv.add_subparsers(dest="kv_command", metavar="COMMAND", required=True)

    put = ksub.add_parser("put", help="put KEY VALUE (VALUE from stdin when omitted)")
    add_cluster_arguments(put)
    put.add_argument("key")
    put.add_argument("value", nargs="?", help="the value; read from stdin (as is) when omitted")
    put.add_argument("--lease", type=lease_ref, help="attach to this lease (hex or decimal ID)")
    put.add_argument("--prev-kv", action="store_true", help="also print the previous key-value")
    put.add_argument("--ignore-value", action="store_true", help="keep the current value (update the lease only)")
    put.add_argument("--ignore-lease", action="store_true", help="keep the current lease (update the value only)")
    put.set_defaults(run=cmd_put)

    get = ksub.add_parser("get", help="get KEY or the range [KEY, RANGE_END)")
    add_cluster_arguments(get)
    _range_arguments(get)
    get.add_argument("--rev", type=_non_negative, default=0, help="read at this revision (0: the latest)")
    get.add_argument("--limit", type=_non_negative, default=0, help="at most this many keys (0: no limit)")
    get.add_argument("--keys-only", action="store_true", help="keys without values")
    get.add_argument("--count-only", action="store_true", help="only the number of keys")
    get.add_argument(
        "--consistency", choices=("l", "s"), default="l", help="l: linearizable (default), s: serializable"
    )
    get.add_argument("--order", type=str.upper, choices=("ASCEND", "DESCEND"), help="sort order")
    get.add_argument("--sort-by", type=str.upper, choices=tuple(_SORT_TARGETS), help="sort target")
    get.add_argument("--print-value-only", action="store_true", help="values without keys (human output)")
    get.set_defaults(run=cmd_get)

    delete = ksub.add_parser("del", help="delete KEY or the range [KEY, RANGE_END)")
    add_cluster_arguments(delete)
    _range_arguments(delete)
    delete.add_argument("--prev-kv", action="store_true", help="also print the deleted key-values")
    delete.set_defaults(run=cmd_del)

    txn = ksub.add_parser(
        "txn",
        help="run a transaction read from stdin (or --file)",
        description=(
            "etcdctl's txn syntax: compares, a blank line, success ops, a blank line, failure ops.  "
            'Compares: mod("k") > "5", value("k") = "v", version("k") != "0", create("k") < "3", '
            'lease("k") = "694d77aa9e38260f" (hex); operators = != < >.  Ops: put k v, get k [end] '
            "[--prefix|--from-key] [--limit N] [--rev N] [--keys-only] [--count-only], del k [end] "
            "[--prefix|--from-key] [--prev-kv].  Keys and values may be double-quoted (Go escapes)."
        ),
    )
    add_cluster_arguments(txn)
    txn.add_argument("--file", type=Path, help="read the txn from this file instead of stdin")
    txn.set_defaults(run=cmd_txn)

    watch = ksub.add_parser("watch", help="print changes to KEY or [KEY, RANGE_END) as they happen")
    add_cluster_arguments(watch)
    _range_arguments(watch)
    watch.add_argument("--rev", type=_non_negative, default=0, help="start at this revision (0: from now on)")
    watch.add_argument("--prev-kv", action="store_true", help="also print each key's previous value")
    watch.add_argument("--progress-notify", action="store_true", help="print progress notifications")
    watch.add_argument(
        "--filter", action="append", choices=("noput", "nodelete"), default=[], help="drop puts or deletes"
    )
    watch.add_argument("--count", type=_positive, help="exit after this many events (default: run until Ctrl-C)")
    watch.set_defaults(run=cmd_watch)

    compact = ksub.add_parser("compact", help="discard the history before revision REV")
    add_cluster_arguments(compact)
    compact.add_argument("revision", type=_positive, metavar="REV")
    compact.add_argument("--physical", action="store_true", help="return once the space is reclaimed")
    compact.set_defaults(run=cmd_compact)

    lease = ksub.add_parser("lease", help="grant, revoke, keep alive and inspect leases")
    lsub = lease.add_subparsers(dest="lease_command", metavar="ACTION", required=True)
    grant = lsub.add_parser("grant", help="grant a lease with a TTL in seconds")
    add_cluster_arguments(grant)
    grant.add_argument("ttl", type=int, metavar="TTL")
    grant.set_defaults(run=cmd_lease_grant)
    revoke = lsub.add_parser("revoke", help="revoke a lease (deleting its keys)")
    add_cluster_arguments(revoke)
    revoke.add_argument("lease", type=lease_ref, metavar="ID")
    revoke.set_defaults(run=cmd_lease_revoke)
    keep = lsub.add_parser("keepalive", help="renew a lease every TTL/3 until Ctrl-C")
    add_cluster_arguments(keep)
    keep.add_argument("lease", type=lease_ref, metavar="ID")
    keep.add_argument("--once", action="store_true", help="renew once and exit")
    keep.set_defaults(run=cmd_lease_keepalive)
    ttl = lsub.add_parser("ttl", help="a lease's remaining and granted TTL")
    add_cluster_arguments(ttl)
    ttl.add_argument("lease", type=lease_ref, metavar="ID")
    ttl.add_argument("--keys", action="store_true", help="also list the keys attached to it")
    ttl.set_defaults(run=cmd_lease_ttl)
    ls = lsub.add_parser("list", help="every live lease")
    add_cluster_arguments(ls)
    ls.set_defaults(run=cmd_lease_list)


def _range_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("range_end", nargs="?", metavar="RANGE_END", help="end of the range (exclusive)")
    p.add_argument("--prefix", action="store_true", help="every key starting with KEY")
    p.add_argument("--from-key", action="store_true", help="every key >= KEY")


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {n}")
    return n


def _positive(text: str) -> int:
    n = _non_negative(text)
    if n == 0:
        raise argparse.ArgumentTypeError("must be positive, got 0")
    return n


# ====================================================================== lease IDs
@dataclass(frozen=True, slots=True)
class LeaseRef:
    """A lease ID as typed: digits only may be decimal or hex, resolved against the cluster."""

    text: str
    candidates: tuple[int, ...]


_MAX_LEASE_ID = (1 << 63) - 1


def lease_ref(text: str) -> LeaseRef:
    t = text.strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", t):
        values: tuple[int, ...] = (int(t[2:], 16),)
    elif re.fullmatch(r"[0-9]+", t):
        dec, hexa = int(t, 10), int(t, 16)
        values = (dec,) if dec == hexa else (dec, hexa)
    elif re.fullmatch(r"[0-9a-f]+", t):
        values = (int(t, 16),)
    else:
        raise argparse.ArgumentTypeError(f"not a lease ID (hex or decimal): {text!r}")
    values = tuple(v for v in values if v <= _MAX_LEASE_ID)
    if not values:
        raise argparse.ArgumentTypeError(f"lease ID out of range (at most 63 bits): {text!r}")
    return LeaseRef(text, values)


async def resolve_lease(c: Client, ref: LeaseRef) -> int:
    """The lease `ref` means: the one candidate, or the candidate that exists in the cluster."""
    if len(ref.candidates) == 1:
        return ref.candidates[0]
    leases = set(await c.leases())
    live = [v for v in ref.candidates if v in leases]
    if len(live) == 2:
        dec, hexa = ref.candidates
        raise UsageError(
            f"lease ID {ref.text} names two leases (decimal {dec} and hex {hexa:016x}); "
            f"write 0x{ref.text} for the hex one, or the other in hex ({dec:016x})"
        )
    return live[0] if live else ref.candidates[0]


def _hex(lease_id: int) -> str:
    return f"{lease_id:016x}"


# ====================================================================== bytes, JSON, output
def arg_bytes(text: str) -> bytes:
    """A command-line argument back to the exact bytes the shell passed, whatever the locale."""
    return os.fsencode(text)


def _txn_bytes(text: str) -> bytes:
    """Txn text is decoded as UTF-8 with surrogateescape (see cmd_txn): this undoes it exactly."""
    return text.encode("utf-8", "surrogateescape")


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


def kv_json(kv: KeyValue) -> dict[str, Any]:
    return {
        "key": _text(kv.key),
        "value": _text(kv.value),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "lease": kv.lease,
    }


def _kv_or_null(kv: KeyValue | None) -> dict[str, Any] | None:
    return None if kv is None else kv_json(kv)


def _range_json(r: RangeResponse) -> dict[str, Any]:
    return {"kvs": [kv_json(kv) for kv in r.kvs], "count": r.count, "more": r.more}


def _put_json(r: PutResponse) -> dict[str, Any]:
    return {"prev_kv": _kv_or_null(r.prev_kv)}


def _del_json(r: DeleteRangeResponse) -> dict[str, Any]:
    return {"deleted": r.deleted, "prev_kvs": [kv_json(kv) for kv in r.prev_kvs]}


def _txn_json(r: TxnResponse) -> dict[str, Any]:
    return {"succeeded": r.succeeded, "responses": [_op_json(x) for x in r.responses]}


def _op_json(r: ResponseOp) -> dict[str, Any]:
    if isinstance(r, RangeResponse):
        return {"op": "get", **_range_json(r)}
    if isinstance(r, PutResponse):
        return {"op": "put", **_put_json(r)}
    if isinstance(r, DeleteRangeResponse):
        return {"op": "del", **_del_json(r)}
    return {"op": "txn", **_txn_json(r)}


def _write(data: bytes) -> None:
    """Write and flush at once: watch and keepalive lines must reach a pipe as they happen."""
    sys.stdout.flush()
    buf = getattr(sys.stdout, "buffer", None)
    if buf is None:  # a text-only stream (an in-process test): best effort
        sys.stdout.write(data.decode("utf-8", "backslashreplace"))
        sys.stdout.flush()
        return
    buf.write(data)
    buf.flush()


def emit_json(obj: Any) -> None:
    """One compact JSON document on one line, UTF-8 whatever the locale says."""
    _write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")


def emit_lines(lines: Iterable[bytes | str]) -> None:
    _write(b"".join((x.encode("utf-8") if isinstance(x, str) else x) + b"\n" for x in lines))


def _kv_lines(kvs: Iterable[KeyValue], keys_only: bool = False, value_only: bool = False) -> list[bytes]:
    out: list[bytes] = []
    for kv in kvs:
        if keys_only:
            out.append(kv.key)
        elif value_only:
            out.append(kv.value)
        else:
            out += [kv.key, kv.value]
    return out


def _range_lines(r: RangeResponse) -> list[bytes]:
    return _kv_lines(r.kvs)


def _op_lines(r: ResponseOp) -> list[bytes]:
    """etcdctl's simple printer for one txn response: kvs for a get, OK for a put, the count for a del."""
    if isinstance(r, RangeResponse):
        return _range_lines(r)
    if isinstance(r, PutResponse):
        return [b"OK", *(_kv_lines([r.prev_kv]) if r.prev_kv else [])]
    if isinstance(r, DeleteRangeResponse):
        return [str(r.deleted).encode(), *_kv_lines(r.prev_kvs)]
    return _txn_lines(r)


def _txn_lines(r: TxnResponse) -> list[bytes]:
    out = [b"SUCCESS" if r.succeeded else b"FAILURE"]
    for x in r.responses:
        out += [b"", *_op_lines(x)]
    return out


# ====================================================================== running a command
def _describe(e: StoreError) -> str:
    text = f"{e.code}: {e.message}"
    if isinstance(e, CompactedError):
        text += f" (compact revision {e.compact_revision})"
    elif isinstance(e, FutureRevisionError):
        text += f" (current revision {e.current_revision})"
    elif isinstance(e, LeaseNotFoundError):
        text += f" (decimal {e.lease_id})"  # the message gives it in hex; the user may have typed decimal
    elif e.code == "unavailable":
        text += " (is the cluster running? see `raftkube store status`)"
    return text


def _endpoints(args: argparse.Namespace) -> list[str]:
    eps = endpoints(args)
    for ep in eps:
        try:
            split_url(ep)
        except ValueError as e:
            raise UsageError(f"--endpoints: {e}") from None
    return eps


def _run(args: argparse.Namespace, fn: Callable[[Client], Awaitable[int]]) -> int:
    """Run `fn` with a client; map store errors to exit statuses (see the module docstring)."""
    eps = _endpoints(args)

    async def go() -> int:
        async with make_client(args, eps) as c:
            return await fn(c)

    try:
        return asyncio.run(go())
    except StoreError as e:
        if e.outcome is not Outcome.REFUSED:  # the cluster could not serve it: exit 1
            print(f"raftkube: {_describe(e)}", file=sys.stderr)
            return 1
        raise UsageError(_describe(e)) from e
    except BrokenPipeError:
        # Whoever read our output went away (`kv watch ... | head -1`): that ends the command.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def key_range(k: bytes, range_end: bytes | None, prefix: bool, from_key: bool) -> tuple[bytes, bytes]:
    """(key, range_end) as etcdctl computes them; an empty KEY with --prefix/--from-key means every key."""
    if prefix and from_key:
        raise UsageError("--prefix and --from-key exclude each other")
    if range_end is not None and (prefix or from_key):
        raise UsageError("give RANGE_END or --prefix/--from-key, not both")
    if prefix:
        return (k, prefix_end(k)) if k else (b"\0", b"\0")
    if from_key:
        return (k or b"\0"), b"\0"
    return k, range_end if range_end is not None else b""


def _arg_range(args: argparse.Namespace) -> tuple[bytes, bytes]:
    end = arg_bytes(args.range_end) if args.range_end is not None else None
    return key_range(arg_bytes(args.key), end, args.prefix, args.from_key)


# ====================================================================== commands
def cmd_put(args: argparse.Namespace) -> int:
    if args.value is not None:
        value = arg_bytes(args.value)
    elif args.ignore_value:
        value = b""
    elif sys.stdin.isatty():
        raise UsageError("give VALUE, or pipe the value on stdin")
    else:
        value = sys.stdin.buffer.read()

    async def go(c: Client) -> int:
        lease = await resolve_lease(c, args.lease) if args.lease is not None else 0
        req = PutRequest(arg_bytes(args.key), value, lease, args.prev_kv, args.ignore_value, args.ignore_lease)
        header, r = await c.call(M.PUT, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), **_put_json(r)})
        else:
            emit_lines(_op_lines(r))
        return 0

    return _run(args, go)


def cmd_get(args: argparse.Namespace) -> int:
    key, end = _arg_range(args)
    req = RangeRequest(
        key,
        end,
        limit=args.limit,
        revision=args.rev,
        sort_order=SortOrder[args.order] if args.order else SortOrder.NONE,
        sort_target=_SORT_TARGETS[args.sort_by] if args.sort_by else SortTarget.KEY,
        serializable=args.consistency == "s",
        keys_only=args.keys_only,
        count_only=args.count_only,
    )

    async def go(c: Client) -> int:
        header, r = await c.call(M.RANGE, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), **_range_json(r)})
        elif args.count_only:
            emit_lines([str(r.count)])
        else:
            emit_lines(_kv_lines(r.kvs, keys_only=args.keys_only, value_only=args.print_value_only))
        return 0

    return _run(args, go)


def cmd_del(args: argparse.Namespace) -> int:
    key, end = _arg_range(args)
    req = DeleteRangeRequest(key, end, args.prev_kv)

    async def go(c: Client) -> int:
        header, r = await c.call(M.DELETE_RANGE, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), **_del_json(r)})
        else:
            emit_lines(_op_lines(r))
        return 0

    return _run(args, go)


def cmd_txn(args: argparse.Namespace) -> int:
    if args.file is not None:
        try:
            raw = args.file.read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror or e}") from e
    else:
        raw = sys.stdin.buffer.read()
    try:
        req = parse_txn(raw.decode("utf-8", "surrogateescape"))
    except TxnSyntaxError as e:
        raise UsageError(f"txn: {e}") from e

    async def go(c: Client) -> int:
        header, r = await c.call(M.TXN, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), **_txn_json(r)})
        else:
            emit_lines(_txn_lines(r))
        return 0

    return _run(args, go)


def cmd_watch(args: argparse.Namespace) -> int:
    key, end = _arg_range(args)
    filters = tuple(WatchFilter.NOPUT if f == "noput" else WatchFilter.NODELETE for f in dict.fromkeys(args.filter))

    async def go(c: Client) -> int:
        w = c.watch(
            key,
            end,
            start_revision=args.rev,
            prev_kv=args.prev_kv,
            progress_notify=args.progress_notify,
            filters=filters,
        )
        seen = 0
        # aclosing: leaving early (--count) cancels the watch on the member at once.
        stream = cast(AsyncGenerator[WatchResponse, None], w.__aiter__())
        async with contextlib.aclosing(stream):
            async for resp in stream:
                if resp.canceled:
                    if resp.compact_revision:
                        raise CompactedError(resp.compact_revision)
                    raise StoreError(f"the watch was canceled: {resp.cancel_reason or 'no reason given'}")
                if resp.is_progress_notify:
                    if args.progress_notify:
                        if args.output == "json":
                            emit_json({"type": "PROGRESS", "revision": resp.revision})
                        else:
                            emit_lines([f"progress notify: {resp.revision}"])
                    continue
                for ev in resp.events:
                    kind = ev.type.name
                    if args.output == "json":
                        emit_json({"type": kind, "kv": kv_json(ev.kv), "prev_kv": _kv_or_null(ev.prev_kv)})
                    else:
                        prev = _kv_lines([ev.prev_kv]) if ev.prev_kv is not None else []
                        emit_lines([kind, *prev, *_kv_lines([ev.kv])])
                    seen += 1
                    if args.count is not None and seen >= args.count:
                        return 0
        return 0

    return _run(args, go)


def cmd_compact(args: argparse.Namespace) -> int:
    req = CompactionRequest(args.revision, args.physical)

    async def go(c: Client) -> int:
        header, _ = await c.call(M.COMPACT, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), "compact_revision": args.revision})
        else:
            emit_lines([f"compacted revision {args.revision}"])
        return 0

    return _run(args, go)


def _lease_json(header: Header, lease_id: int, **rest: Any) -> dict[str, Any]:
    return {"header": header.to_json(), "id": lease_id, "id_hex": _hex(lease_id), **rest}


def cmd_lease_grant(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        header, r = await c.call(M.LEASE_GRANT, LeaseGrantRequest(args.ttl))
        if args.output == "json":
            emit_json(_lease_json(header, r.id, ttl=r.ttl))
        else:
            emit_lines([f"lease {_hex(r.id)} granted with TTL({r.ttl}s)"])
        return 0

    return _run(args, go)


def cmd_lease_revoke(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        lease_id = await resolve_lease(c, args.lease)
        header, _ = await c.call(M.LEASE_REVOKE, LeaseIdRequest(lease_id))
        if args.output == "json":
            emit_json(_lease_json(header, lease_id, revoked=True))
        else:
            emit_lines([f"lease {_hex(lease_id)} revoked"])
        return 0

    return _run(args, go)


def cmd_lease_keepalive(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        lease_id = await resolve_lease(c, args.lease)
        while True:
            header, r = await c.call(M.LEASE_KEEPALIVE, LeaseIdRequest(lease_id))
            if args.output == "json":
                emit_json(_lease_json(header, r.id, ttl=r.ttl))
            else:
                emit_lines([f"lease {_hex(r.id)} keepalived with TTL({r.ttl})"])
            if args.once:
                return 0
            await asyncio.sleep(max(r.ttl / 3, 0.1))

    return _run(args, go)


def cmd_lease_ttl(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        lease_id = await resolve_lease(c, args.lease)
        header, r = await c.call(M.LEASE_TTL, LeaseTimeToLiveRequest(lease_id, args.keys))
        if args.output == "json":
            keys = [_text(k) for k in r.keys]
            emit_json(_lease_json(header, lease_id, ttl=r.ttl, granted_ttl=r.granted_ttl, keys=keys))
        elif r.ttl == -1:
            emit_lines([f"lease {_hex(lease_id)} already expired"])
        else:
            line = f"lease {_hex(lease_id)} granted with TTL({r.granted_ttl}s), remaining({r.ttl}s)".encode()
            if args.keys:
                line += b", attached keys([" + b" ".join(r.keys) + b"])"
            emit_lines([line])
        return 0

    return _run(args, go)


def cmd_lease_list(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        header, r = await c.call(M.LEASE_LEASES, EMPTY)
        ids = sorted(r.ids)
        if args.output == "json":
            emit_json({"header": header.to_json(), "leases": [{"id": i, "id_hex": _hex(i)} for i in ids]})
        else:
            emit_lines([f"found {len(ids)} leases", *(_hex(i) for i in ids)])
        return 0

    return _run(args, go)


# ====================================================================== txn syntax
class TxnSyntaxError(ValueError):
    """A txn text that cannot be parsed; the message names the line."""


_QUOTED = r'"(?:[^"\\]|\\.)*"|`[^`]*`'
_COMPARE_RE = re.compile(
    rf"^(?P<target>[A-Za-z]+)\s*\(\s*(?P<key>{_QUOTED}|[^()\s]+)\s*\)\s*"
    rf"(?P<op>!=|==|=|<|>)\s*(?P<value>{_QUOTED}|\S+)$"
)
_TOKEN_RE = re.compile(rf"\s*(?:(?P<q>{_QUOTED})|(?P<w>\S+))")
_TARGETS = {
    "ver": CompareTarget.VERSION,
    "version": CompareTarget.VERSION,
    "c": CompareTarget.CREATE,
    "create": CompareTarget.CREATE,
    "m": CompareTarget.MOD,
    "mod": CompareTarget.MOD,
    "val": CompareTarget.VALUE,
    "value": CompareTarget.VALUE,
    "lease": CompareTarget.LEASE,
}
_RESULTS = {
    "=": CompareResult.EQUAL,
    "==": CompareResult.EQUAL,
    "!=": CompareResult.NOT_EQUAL,
    "<": CompareResult.LESS,
    ">": CompareResult.GREATER,
}
_SIMPLE_ESCAPES = {
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\v",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
}


def unquote(token: str) -> bytes:
    """A key or value as written: "Go-quoted", `raw`, or bare."""
    if token.startswith("`"):
        return _txn_bytes(token[1:-1])
    if not token.startswith('"'):
        return _txn_bytes(token)
    body = token[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += _txn_bytes(ch)
            i += 1
            continue
        esc = body[i + 1]  # the pattern only matches a backslash followed by a character
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            i += 2
        elif esc == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2 : i + 4]):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif esc in "uU":
            n = 4 if esc == "u" else 8
            digits = body[i + 2 : i + 2 + n]
            try:
                if not re.fullmatch(rf"[0-9a-fA-F]{{{n}}}", digits):
                    raise ValueError(digits)
                out += chr(int(digits, 16)).encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                raise TxnSyntaxError(f"bad escape \\{esc}{digits} in {token}") from None
            i += 2 + n
        elif re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]) and int(body[i + 1 : i + 4], 8) < 256:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raise TxnSyntaxError(f"bad escape \\{esc} in {token}")
    return bytes(out)


def _tokens(line: str) -> list[tuple[str, bool]]:
    """Shell-like words of an op line: (text, quoted)."""
    out: list[tuple[str, bool]] = []
    for m in _TOKEN_RE.finditer(line):
        if m.group("q") is not None:
            out.append((m.group("q"), True))
        else:
            w = m.group("w")
            if w[0] in '"`':
                raise TxnSyntaxError(f"unterminated quote in {w}")
            out.append((w, False))
    return out


def parse_compare(line: str) -> Compare:
    m = _COMPARE_RE.match(line)
    if m is None:
        hint = ""
        if line.split(maxsplit=1)[0] in ("put", "get", "del", "delete"):
            hint = " (compares come first: an op list starts after a blank line)"
        raise TxnSyntaxError(f'malformed comparison {line!r}; expected like mod("key") > "5"{hint}')
    target = _TARGETS.get(m.group("target").lower())
    if target is None:
        raise TxnSyntaxError(f"unknown compare target {m.group('target')!r} (version, create, mod, value, lease)")
    key = unquote(m.group("key"))
    raw = unquote(m.group("value"))
    value: int | bytes
    if target is CompareTarget.VALUE:
        value = raw
    else:
        text = raw.decode("utf-8", "replace").strip()
        try:
            if target is CompareTarget.LEASE:
                # etcdctl reads lease IDs in compares as hex.
                value = int(text[2:] if text.lower().startswith("0x") else text, 16)
            else:
                value = int(text, 10)
        except ValueError:
            kind = "a hex lease ID" if target is CompareTarget.LEASE else "an integer"
            raise TxnSyntaxError(f"{m.group('target')} compares against {kind}, got {text!r}") from None
    return Compare(_RESULTS[m.group("op")], target, key, value)


_OP_FLAGS: dict[str, dict[str, bool]] = {
    # flag -> takes a value
    "put": {"--prev-kv": False, "--ignore-value": False, "--ignore-lease": False},
    "get": {
        "--prefix": False,
        "--from-key": False,
        "--keys-only": False,
        "--count-only": False,
        "--limit": True,
        "--rev": True,
    },
    "del": {"--prefix": False, "--from-key": False, "--prev-kv": False},
}


def parse_op(line: str) -> RequestOp:
    toks = _tokens(line)
    name = toks[0][0]
    if toks[0][1] or name not in ("put", "get", "del", "delete"):
        raise TxnSyntaxError(f"unknown operation {name!r} (put, get, del)")
    name = "del" if name == "delete" else name
    allowed = _OP_FLAGS[name]
    flags: dict[str, str | None] = {}
    pos: list[str] = []
    rest = toks[1:]
    i = 0
    while i < len(rest):
        text, quoted = rest[i]
        i += 1
        if quoted or not text.startswith("--"):
            pos.append(text)
            continue
        flag, eq, val = text.partition("=")
        if flag not in allowed:
            raise TxnSyntaxError(f"{name}: unknown flag {flag} (allowed: {', '.join(allowed) or 'none'})")
        if allowed[flag] and not eq:
            if i >= len(rest):
                raise TxnSyntaxError(f"{name}: {flag} needs a value")
            val = rest[i][0]
            i += 1
        elif not allowed[flag] and eq:
            raise TxnSyntaxError(f"{name}: {flag} takes no value")
        flags[flag] = val if allowed[flag] else None

    def number(flag: str) -> int:
        text = flags.get(flag)
        if text is None:
            return 0
        try:
            return _non_negative(text)
        except argparse.ArgumentTypeError as e:
            raise TxnSyntaxError(f"{name}: {flag}: {e}") from None

    if name == "put":
        want = 1 if "--ignore-value" in flags else 2
        if len(pos) != want:
            usage = "KEY (with --ignore-value)" if want == 1 else "KEY VALUE"
            raise TxnSyntaxError(f"put needs {usage}, got {len(pos)} arguments")
        value = unquote(pos[1]) if want == 2 else b""
        return PutRequest(
            unquote(pos[0]), value, 0, "--prev-kv" in flags, "--ignore-value" in flags, "--ignore-lease" in flags
        )
    if not 1 <= len(pos) <= 2:
        raise TxnSyntaxError(f"{name} needs KEY [RANGE_END] (got {len(pos)} arguments)")
    try:
        end = unquote(pos[1]) if len(pos) == 2 else None
        key, end = key_range(unquote(pos[0]), end, "--prefix" in flags, "--from-key" in flags)
    except UsageError as e:
        raise TxnSyntaxError(f"{name}: {e}") from None
    if name == "del":
        return DeleteRangeRequest(key, end, "--prev-kv" in flags)
    return RangeRequest(
        key,
        end,
        limit=number("--limit"),
        revision=number("--rev"),
        keys_only="--keys-only" in flags,
        count_only="--count-only" in flags,
    )


def parse_txn(text: str) -> TxnRequest:
    """etcdctl's txn text: compares, blank line, success ops, blank line, failure ops."""
    sections: list[list[tuple[int, str]]] = [[], [], []]
    section = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            section += 1
            continue
        if section > 2:
            raise TxnSyntaxError(
                f"line {lineno}: text after the failure ops (a txn is compares, a blank line, "
                "success ops, a blank line, failure ops)"
            )
        sections[section].append((lineno, line))
    req = TxnRequest()
    for lineno, line in sections[0]:
        req.compare.append(_at(lineno, parse_compare, line))
    for lineno, line in sections[1]:
        req.success.append(_at(lineno, parse_op, line))
    for lineno, line in sections[2]:
        req.failure.append(_at(lineno, parse_op, line))
    return req


def _at(lineno: int, parse: Callable[[str], Any], line: str) -> Any:
    try:
        return parse(line)
    except TxnSyntaxError as e:
        raise TxnSyntaxError(f"line {lineno}: {e}") from None
