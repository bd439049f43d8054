"""What every store command shares: finding the cluster, errors that exit 2, output modes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from store.config import ConfigError
from store.launcher import LauncherError, LocalCluster

DEFAULT_DATA_DIR = Path(".raftkube")


class UsageError(Exception):
    """Bad usage or a refused request: printed as `raftkube: <message>`, exit status 2."""


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"the cluster's data dir (default {DEFAULT_DATA_DIR}/ in the working directory)",
    )
    p.add_argument("--endpoints", help="comma-separated client URLs, instead of finding them in the data dir")
    p.add_argument("-o", "--output", choices=("human", "json"), default="human", help="output format")
    p.add_argument("--timeout", type=float, default=5.0, help="request timeout in seconds")


def data_dir(args: argparse.Namespace) -> Path:
    return args.data_dir if args.data_dir is not None else DEFAULT_DATA_DIR


def endpoints(args: argparse.Namespace) -> list[str]:
    if args.endpoints:
        eps = [e.strip() for e in args.endpoints.split(",") if e.strip()]
        if not eps:
            raise UsageError("--endpoints is empty")
        return eps
    cluster = LocalCluster(data_dir(args))
    try:
        return cluster.client_urls()
    except LauncherError as e:
        raise UsageError(f"{e}; or give --endpoints") from e


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=None, separators=(",", ":"), ensure_ascii=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def fail(message: str) -> NoReturn:
    raise UsageError(message)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


__all__ = ["ConfigError", "UsageError", "add_cluster_arguments", "data_dir", "endpoints", "fail", "print_json", "table"]
