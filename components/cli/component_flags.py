"""The [controller_manager] and [scheduler] sections of cluster.toml: extra flags `up` starts
each of its components with, as kind's `extraArgs` do for kube's.

    [controller_manager]
    args = ["--node-monitor-grace-period", "15"]
    replicas = 2          # a standby on the same Lease (at most 3; 1 by default)
    [scheduler]
    args = ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3"]

The flags are checked when `up` reads the file, by the component's own parser and checks, so a
typo is a ConfigError naming the file and key (exit 2) rather than a component that dies at
every restart.  `--kubeconfig`, `--health-port` and `--health-address` are `up`'s to give
(each component's own credential, a free port, and its host's address) and are refused here.
The flags apply to our components; an upstream one (`up --upstream`) keeps its own command line.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from machinery.process.config import ConfigError, load_section

RESERVED = ("--kubeconfig", "--health-port", "--health-address")
"""Flags `up` sets itself for every component it starts."""


@dataclass(frozen=True, kw_only=True)
class ComponentFlags:
    args: tuple[str, ...] = ()
    """Flags added to the component's command line, after the ones `up` gives it."""
    replicas: int = field(default=1, metadata={"max": 3})
    """Processes of it: one leads (holds the Lease), the others stand by, as kube's HA
    control planes run them.  Ours only: an upstream part (`up --upstream`) runs once."""


class _Refusal(Exception):
    """argparse's complaint, raised instead of printed with an exit."""


class _CheckingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Refusal(message)


_COMPONENTS: dict[str, tuple[str, str, str]] = {
    "controller-manager": ("controller_manager", "components.controller_manager", "options"),
    "scheduler": ("scheduler", "components.scheduler.main", "check"),
}
"""Component -> (its cluster.toml section, the module with its parser's `add_arguments`, the
checks that module runs at start).  The module is imported only when the section has flags to
check: it is the whole controller-manager (0.45 s of every `up`, `down` and `status` when it
was imported up front)."""


def _parser_and_check(
    module_name: str, check_name: str
) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], object]]:
    module = importlib.import_module(module_name)
    return module.add_arguments, getattr(module, check_name)


def _checked(
    path: Path,
    section: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    check: Callable[[argparse.Namespace], object],
    args: tuple[str, ...],
) -> tuple[str, ...]:
    what = f"{path}: {section}.args"
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in RESERVED:
            raise ConfigError(f"{what}: {name} is set by `raftkube up` for each component; leave it out")
    parser = _CheckingParser(prog=section, add_help=False, exit_on_error=False)
    add_arguments(parser)
    try:
        ns = parser.parse_args(["--kubeconfig", "-", *args])
        check(ns)
    except (_Refusal, argparse.ArgumentError, ValueError) as e:
        raise ConfigError(f"{what}: {e}") from None
    return args


def load_component_flags(path: Path) -> dict[str, ComponentFlags]:
    """Each component's extra flags and replicas from `path` (the defaults when the file or its
    section is missing); ConfigError names the file and key of a flag the component would refuse."""
    out: dict[str, ComponentFlags] = {}
    for component, (section, module_name, check_name) in _COMPONENTS.items():
        values = load_section(ComponentFlags, path, section, missing_file_ok=True)
        flags = ComponentFlags(**values)
        if flags.args:  # no flags, nothing to refuse
            _checked(path, section, *_parser_and_check(module_name, check_name), flags.args)
        out[component] = flags
    return out
