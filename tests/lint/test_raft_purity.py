"""The Raft core must stay pure: no I/O, no clock, no threads, no hidden randomness.

That is what lets the simulator replay any run from a seed.  The check parses every module
of `store/raft` and fails on any import of a module that reaches the outside world, and on
any use of the `random` module's global functions.
"""

from __future__ import annotations

import ast

from tests.support.paths import ROOT

RAFT_DIR = ROOT / "store" / "raft"

FORBIDDEN = {
    "asyncio",
    "socket",
    "selectors",
    "os",
    "io",
    "pathlib",
    "shutil",
    "time",
    "datetime",
    "threading",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "signal",
    "random",
    "secrets",
    "uuid",
    "logging",
    "sys",
}


def imported_roots(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def test_raft_core_imports_nothing_impure() -> None:
    """store/raft imports no module that does I/O, reads a clock, starts threads or draws random numbers."""
    modules = sorted(RAFT_DIR.glob("*.py"))
    assert len(modules) >= 8, f"expected the raft core modules in {RAFT_DIR}"
    offenders = []
    for path in modules:
        for root, line in imported_roots(ast.parse(path.read_text(), str(path))):
            if root in FORBIDDEN:
                offenders.append(f"{path.name}:{line} imports {root}")
    assert not offenders, "impure imports in the raft core:\n" + "\n".join(offenders)


def test_purity_scan_catches_an_impure_import() -> None:
    """The scan itself works: it reports `import time` and `from os import path`."""
    tree = ast.parse("import time\nfrom os import path\nfrom store.raft import log\n")
    roots = {r for r, _ in imported_roots(tree)}
    assert {"time", "os"} <= roots
    assert roots & FORBIDDEN == {"time", "os"}
