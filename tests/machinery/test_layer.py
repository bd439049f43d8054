"""The machinery is the layer below the apiserver and the components: it imports none of the
project's other packages, so both can import it without importing each other."""

from __future__ import annotations

import ast
from pathlib import Path

MACHINERY = Path(__file__).resolve().parents[2] / "machinery"
ABOVE = ("store", "apiserver", "components", "bench", "tests")


def test_machinery_imports_nothing_above_it() -> None:
    found = []
    for path in sorted(MACHINERY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ABOVE]
    assert len(list(MACHINERY.rglob("*.py"))) >= 5
    assert found == []
