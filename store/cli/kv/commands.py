"""`raftkube kv ...`: the subcommands, their arguments, and running one against the cluster
(store errors mapped to exit statuses as the package docstring says)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from machinery.process.command import UsageError
from store.api import methods as M
from store.api.cluster import EMPTY
from store.api.errors import CompactedError, FutureRevisionError, LeaseNotFoundError, Outcome, StoreError
from store.api.kv import CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, SortOrder, SortTarget
from store.api.lease import LeaseGrantRequest, LeaseIdRequest, LeaseTimeToLiveRequest
from store.api.protocol import Header, split_url
from store.api.watch import WatchFilter, WatchResponse
from store.cli.common import add_cluster_arguments, endpoints, make_client
from store.cli.kv.arguments import arg_bytes, key_range, non_negative, positive
from store.cli.kv.lease_ids import lease_hex, lease_ref, resolve_lease
from store.cli.kv.printers import (
    del_json,
    emit_json,
    emit_lines,
    json_text,
    kv_json,
    kv_lines,
    kv_or_null,
    op_lines,
    put_json,
    range_json,
    txn_json,
    txn_lines,
)
from store.cli.kv.txn_grammar import TxnSyntaxError, parse_txn
from store.client.client import Client

_SORT_TARGETS = {
    "KEY": SortTarget.KEY,
    "VERSION": SortTarget.VERSION,
    "CREATE": SortTarget.CREATE,
    "MODIFY": SortTarget.MOD,
    "VALUE": SortTarget.VALUE,
}


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
    get.add_argument("--rev", type=non_negative, default=0, help="read at this revision (0: the latest)")
    get.add_argument("--limit", type=non_negative, default=0, help="at most this many keys (0: no limit)")
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
    watch.add_argument("--rev", type=non_negative, default=0, help="start at this revision (0: from now on)")
    watch.add_argument("--prev-kv", action="store_true", help="also print each key's previous value")
    watch.add_argument("--progress-notify", action="store_true", help="print progress notifications")
    watch.add_argument(
        "--filter", action="append", choices=("noput", "nodelete"), default=[], help="drop puts or deletes"
    )
    watch.add_argument("--count", type=positive, help="exit after this many events (default: run until Ctrl-C)")
    watch.set_defaults(run=cmd_watch)

    compact = ksub.add_parser("compact", help="discard the history before revision REV")
    add_cluster_arguments(compact)
    compact.add_argument("revision", type=positive, metavar="REV")
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


def _arg_range(args: argparse.Namespace) -> tuple[bytes, bytes]:
    end = arg_bytes(args.range_end) if args.range_end is not None else None
    return key_range(arg_bytes(args.key), end, args.prefix, args.from_key)


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
            emit_json({"header": header.to_json(), **put_json(r)})
        else:
            emit_lines(op_lines(r))
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
            emit_json({"header": header.to_json(), **range_json(r)})
        elif args.count_only:
            emit_lines([str(r.count)])
        else:
            emit_lines(kv_lines(r.kvs, keys_only=args.keys_only, value_only=args.print_value_only))
        return 0

    return _run(args, go)


def cmd_del(args: argparse.Namespace) -> int:
    key, end = _arg_range(args)
    req = DeleteRangeRequest(key, end, args.prev_kv)

    async def go(c: Client) -> int:
        header, r = await c.call(M.DELETE_RANGE, req)
        if args.output == "json":
            emit_json({"header": header.to_json(), **del_json(r)})
        else:
            emit_lines(op_lines(r))
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
            emit_json({"header": header.to_json(), **txn_json(r)})
        else:
            emit_lines(txn_lines(r))
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
                        emit_json({"type": kind, "kv": kv_json(ev.kv), "prev_kv": kv_or_null(ev.prev_kv)})
                    else:
                        prev = kv_lines([ev.prev_kv]) if ev.prev_kv is not None else []
                        emit_lines([kind, *prev, *kv_lines([ev.kv])])
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
    return {"header": header.to_json(), "id": lease_id, "id_hex": lease_hex(lease_id), **rest}


def cmd_lease_grant(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        header, r = await c.call(M.LEASE_GRANT, LeaseGrantRequest(args.ttl))
        if args.output == "json":
            emit_json(_lease_json(header, r.id, ttl=r.ttl))
        else:
            emit_lines([f"lease {lease_hex(r.id)} granted with TTL({r.ttl}s)"])
        return 0

    return _run(args, go)


def cmd_lease_revoke(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        lease_id = await resolve_lease(c, args.lease)
        header, _ = await c.call(M.LEASE_REVOKE, LeaseIdRequest(lease_id))
        if args.output == "json":
            emit_json(_lease_json(header, lease_id, revoked=True))
        else:
            emit_lines([f"lease {lease_hex(lease_id)} revoked"])
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
                emit_lines([f"lease {lease_hex(r.id)} keepalived with TTL({r.ttl})"])
            if args.once:
                return 0
            await asyncio.sleep(max(r.ttl / 3, 0.1))

    return _run(args, go)


def cmd_lease_ttl(args: argparse.Namespace) -> int:
    async def go(c: Client) -> int:
        lease_id = await resolve_lease(c, args.lease)
        header, r = await c.call(M.LEASE_TTL, LeaseTimeToLiveRequest(lease_id, args.keys))
        if args.output == "json":
            keys = [json_text(k) for k in r.keys]
            emit_json(_lease_json(header, lease_id, ttl=r.ttl, granted_ttl=r.granted_ttl, keys=keys))
        elif r.ttl == -1:
            emit_lines([f"lease {lease_hex(lease_id)} already expired"])
        else:
            line = f"lease {lease_hex(lease_id)} granted with TTL({r.granted_ttl}s), remaining({r.ttl}s)".encode()
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
            emit_json({"header": header.to_json(), "leases": [{"id": i, "id_hex": lease_hex(i)} for i in ids]})
        else:
            emit_lines([f"found {len(ids)} leases", *(lease_hex(i) for i in ids)])
        return 0

    return _run(args, go)
