"""`raftkube user add NAME [--group G]...`: a kubeconfig for a person, signed by the cluster's CA.

The apiserver accepts the certificate at once (it checks client certificates against its CA),
as the user NAME in the groups given; what that user may do is RBAC's business:

    raftkube user add ann --group devs
    kubectl create rolebinding ann-view --clusterrole=view --user=ann -n web
    KUBECONFIG=<printed path> kubectl get pods -n web
"""

from __future__ import annotations

import argparse
from pathlib import Path

from apiserver.pki import user_kubeconfig
from machinery.process.command import UsageError
from store.cli import locate


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    user = sub.add_parser("user", help="credentials for people: a kubeconfig per user")
    user_sub = user.add_subparsers(dest="user_command", metavar="COMMAND", required=True)
    add = user_sub.add_parser("add", help="issue a client certificate for a user and write its kubeconfig")
    add.add_argument("name", help="the user name (the certificate's CN)")
    add.add_argument("--group", action="append", default=[], help="a group of the user (repeat for more)")
    add.add_argument(
        "--data-dir", type=Path, default=None, help="the cluster's data dir (default: as `status` finds it)"
    )
    add.add_argument("--out", type=Path, help="where to write the kubeconfig (default: in the data dir)")
    add.set_defaults(run=cmd_add)


def cmd_add(args: argparse.Namespace) -> int:
    data_dir = locate.find(args.data_dir)
    try:
        path = user_kubeconfig(data_dir, args.name, tuple(args.group), out=args.out)
    except ValueError as e:
        raise UsageError(str(e)) from e
    groups = ", ".join(args.group) or "none besides system:authenticated"
    print(f"wrote {path} for user {args.name} (groups: {groups})")
    print(f"  KUBECONFIG={path} kubectl auth whoami")
    print(f"  bind a role: kubectl create rolebinding {args.name}-view --clusterrole=view --user={args.name} -n NS")
    return 0
