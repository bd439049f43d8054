"""The state-machine packages stay pure like the Raft core: they run inside the replicated
apply loop, so they must not do I/O, read clocks, start threads or draw random numbers."""

from __future__ import annotations

import ast

import pytest

from tests.lint.test_raft_purity import FORBIDDEN, imported_roots
from tests.support.paths import ROOT

STORE = ROOT / "store"


@pytest.mark.parametrize("package", ["mvcc", "watch", "lease"])
def test_package_imports_nothing_impure(package: str) -> None:
    modules = sorted((STORE / package).glob("*.py"))
    assert len(modules) >= 3, f"expected modules in store/{package}"
    offenders = [
        f"{path.name}:{line} imports {root}"
        for path in modules
        for root, line in imported_roots(ast.parse(path.read_text(), str(path)))
        if root in FORBIDDEN
    ]
    assert not offenders, f"impure imports in store/{package}:\n" + "\n".join(offenders)
