"""`raftkube peers build|status`: the upstream peers (kube-apiserver, e2e.test, etcd 3.6, ...)
built from Go modules into the user's cache.

Like the benchmarks (components.cli.bench), their code lives in bench.peers and is imported
only when a `peers` command is parsed: building and hashing peers has nothing to do with the
start-up of `raftkube up`.
"""

from __future__ import annotations

import argparse

from components.cli.bench import LazyBenchParser

COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "build",
        "bench.peers.build",
        "build kube-apiserver, kube-controller-manager, kube-scheduler, e2e.test, ginkgo, agnhost, nonewprivs,"
        " sample-apiserver, etcd, etcdctl, busybox",
    ),
    ("status", "bench.peers.status", "list the built peers: version, path, sha256, present/missing/corrupt"),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("peers", help="build the upstream peers (tests, conformance, benchmarks) and list them")
    peers_sub = parser.add_subparsers(dest="peers", metavar="COMMAND", required=True, parser_class=LazyBenchParser)
    for name, module, helptext in COMMANDS:
        peers_sub.add_parser(name, help=helptext, module=module)
