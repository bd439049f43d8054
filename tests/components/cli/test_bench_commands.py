"""Benchmark commands are loaded only when run (components.cli.bench): importing the CLI,
building its parser and running any other command import no `bench` module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from components.cli.bench import BENCHMARKS
from tests.support.paths import ROOT


def bench_modules_after(code: str) -> list[str]:
    """The `bench` modules a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'bench')))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_imports_no_benchmark() -> None:
    assert bench_modules_after("import components.cli") == []


def test_parsing_another_command_imports_no_benchmark() -> None:
    code = (
        "from components.cli.main import build_parser\n"
        "build_parser().parse_args(['status'])\n"
        "build_parser().parse_args(['kv', 'get', 'k'])"
    )
    assert bench_modules_after(code) == []


def test_parsing_a_conformance_command_imports_no_benchmark() -> None:
    """`raftkube conformance` declares its flags in the CLI; bench.conformance is imported
    only when the command runs."""
    code = (
        "from components.cli.main import build_parser\n"
        "args = build_parser().parse_args(['conformance', '--focus', 'x', '--parallel', '2'])\n"
        "assert args.parallel == 2 and args.run.__module__ == 'components.cli.conformance'\n"
        "args = build_parser().parse_args(['conformance', 'report', 'junit_01.xml'])\n"
        "assert args.run.__name__ == '_report'"
    )
    assert bench_modules_after(code) == []


def test_the_benchmark_parsed_is_the_only_one_imported() -> None:
    code = (
        "from components.cli.main import build_parser\n"
        "args = build_parser().parse_args(['bench', 'raft-core', '--seconds', '0.1'])\n"
        "assert args.run.__module__ == 'bench.raft_core' and args.seconds == 0.1"
    )
    assert bench_modules_after(code) == ["bench", "bench.raft_core"]


@pytest.mark.parametrize(("name", "module"), [(name, module) for name, module, _ in BENCHMARKS])
def test_every_benchmark_declares_its_arguments_and_runs(name: str, module: str) -> None:
    """Each listed module has what the lazy parser calls, and its help is reachable."""
    __import__(module)
    bench = sys.modules[module]
    assert callable(bench.add_arguments) and callable(bench.run)
    from components.cli.main import build_parser

    args = build_parser().parse_args(["bench", name])
    assert args.run is bench.run
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["bench", name, "--help"])
    assert done.value.code == 0


def test_help_lists_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    from components.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name, _, _ in BENCHMARKS)


def test_the_command_table_names_the_module_that_registers_each_command() -> None:
    """COMMANDS (what a run imports) must match what each module registers: a command missing
    from it would be unknown, one mapped to the wrong module would not parse."""
    import argparse
    import importlib

    from components.cli.main import COMMANDS

    registered: dict[str, str] = {}
    for module in dict.fromkeys(COMMANDS.values()):
        p = argparse.ArgumentParser()
        sub = p.add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        registered |= dict.fromkeys(sub.choices, module)
    assert registered == COMMANDS


def test_a_store_command_does_not_load_the_apiserver() -> None:
    """`raftkube kv ...` imports its own module only (the apiserver's took 0.6 s of each run)."""
    code = (
        "import json, sys\n"
        "from components.cli.main import build_parser\n"
        "build_parser('kv').parse_args(['kv', 'get', 'k'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('apiserver', 'components.kubelet')))))"
    )
    argv = [sys.executable, "-c", code]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
