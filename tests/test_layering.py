"""The layering contract (DESIGN.md, "Shared machinery and layering"), checked on the source.

Layers import only downward:

    components/cli    the `raftkube` command: may import every layer; benchmarks only lazily
    components        -> the components' own client library and the rest of components, machinery
    apiserver         -> machinery, the store's client and API (and the store's local layout)
    store             -> machinery; its client and API never import its server or CLI
    machinery         -> nothing of the project's

and nothing but the benchmarks themselves and the tests imports `bench` at load time: the CLI
imports a benchmark's module when that benchmark runs (components.cli.bench;
tests/components/cli/test_bench_commands.py checks it at run time).

Each rule is an allowlist of the project packages a layer may import, checked on every
`import` statement (module level or inside a function, absolute or relative) of every module
by parsing it, so a new module cannot slip in an upward import unnoticed, nor a
function-level one hide it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PROJECT = ("store", "apiserver", "components", "machinery", "bench", "tests")
"""The top-level packages of this repository; imports of anything else are not ours to check."""


@dataclass(frozen=True)
class Import:
    importer: str
    """The importing module, dotted (`components.kubelet.main`)."""
    line: int
    module: str
    """The module imported, dotted and absolute (`from store import pki` imports `store.pki`)."""
    at_load: bool
    """At module level (run when the importer is loaded), not inside a function."""

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.module}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path, source: str | None = None) -> Iterator[Import]:
    """Every project import in the module at `path`."""
    importer = module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    tree = ast.parse(source if source is not None else path.read_text(), str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from store import pki` imports the module store.pki; `from store.x import name` imports store.x
            modules = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        for module in dict.fromkeys(modules):
            if module.split(".")[0] in PROJECT:
                yield Import(importer, node.lineno, module, id(node) not in in_function)


def project_modules(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (ROOT / root).rglob("*.py") if "__pycache__" not in p.parts)


def within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


# ---------------------------------------------------------------------- the rules
@dataclass(frozen=True)
class Rule:
    name: str
    applies: Callable[[str], bool]
    """Whether the rule governs this importing module."""
    allowed: Callable[[Import], bool]


RULES = [
    Rule(
        "machinery imports nothing above it (it is the layer below all others)",
        lambda m: within(m, "machinery"),
        lambda i: within(i.module, "machinery"),
    ),
    Rule(
        "the store imports only itself and machinery",
        lambda m: within(m, "store"),
        lambda i: within(i.module, "store", "machinery"),
    ),
    Rule(
        "the store's client and API never import its server, CLI or launcher (clients link them alone)",
        lambda m: within(m, "store.client", "store.api"),
        lambda i: within(i.module, "store.client", "store.api", "machinery"),
    ),
    Rule(
        "the apiserver imports machinery and the store's client and API, never its server or CLI",
        lambda m: within(m, "apiserver"),
        lambda i: within(i.module, "apiserver", "machinery", "store.client", "store.api"),
    ),
    Rule(
        "components (but the CLI) import only components (their client library) and machinery",
        lambda m: within(m, "components") and not within(m, "components.cli"),
        lambda i: within(i.module, "components", "machinery") and not within(i.module, "components.cli"),
    ),
    Rule(
        "the CLI imports benchmarks only when one runs (inside a function, or by importlib)",
        lambda m: within(m, "components.cli"),
        lambda i: not (within(i.module, "bench") and i.at_load),
    ),
    Rule(
        "no layer imports the tests (the benchmarks may reuse their support)",
        lambda m: within(m, "store", "apiserver", "components", "machinery"),
        lambda i: not within(i.module, "tests"),
    ),
]


@cache
def violations() -> list[tuple[Rule, Import]]:
    """Every import that breaks a rule, each with the rule (the tree is scanned once)."""
    found = []
    for path in project_modules("store", "apiserver", "components", "machinery", "bench"):
        for imp in imports_of(path):
            found += [(rule, imp) for rule in RULES if rule.applies(imp.importer) and not rule.allowed(imp)]
    return found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_layers_import_only_downward(rule: Rule) -> None:
    broken = [str(imp) for r, imp in violations() if r is rule]
    assert broken == [], f"{rule.name}:\n" + "\n".join(broken)


def test_every_layer_is_scanned() -> None:
    counts = {root: len(project_modules(root)) for root in ("store", "apiserver", "components", "machinery")}
    assert all(n >= 5 for n in counts.values()), counts
    assert any(within(module_name(p), "components.cli") for p in project_modules("components"))


def test_the_scan_sees_every_kind_of_import() -> None:
    """Absolute, `from package import module`, relative and function-level imports are all seen."""
    path = ROOT / "components" / "kubelet" / "probe_example.py"
    source = (
        "import apiserver.quantity\n"
        "from store import launcher\n"
        "from .config import KubeletSettings\n"
        "from .. import health\n"
        "def run():\n"
        "    from bench.store import cli\n"
    )
    found = {(i.module, i.at_load) for i in imports_of(path, source)}
    assert found == {
        ("apiserver.quantity", True),
        ("store.launcher", True),
        ("components.kubelet.config", True),
        ("components.health", True),
        ("bench.store.cli", False),
    }
    components = next(r for r in RULES if r.name.startswith("components (but the CLI)"))
    assert components.applies("components.kubelet.probe_example")
    bad = {i.module for i in imports_of(path, source) if not components.allowed(i)}
    assert bad == {"apiserver.quantity", "store.launcher", "bench.store.cli"}
