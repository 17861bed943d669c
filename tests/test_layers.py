"""The layers hold: imports only go down (import-linter's contracts in ``.importlinter``), no module
imports itself back through others, and no private name crosses a module boundary."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "structgen"


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is part of the test set-up (pyproject's test extra)"
    out = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " BROKEN" not in out.stdout and out.stdout.count(" KEPT") >= 3


def _module_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (lazy imports included)."""
    graph = grimp.build_graph("structgen", exclude_type_checking_imports=False)
    modules = sorted(m for m in graph.modules if (PACKAGE.parent / (m.replace(".", "/") + ".py")).exists())
    groups: dict[str, set[str]] = {}
    for i, a in enumerate(modules):
        for b in modules[i + 1:]:
            if graph.chain_exists(importer=a, imported=b) and graph.chain_exists(importer=b, imported=a):
                group = groups.get(a) or groups.get(b) or {a}
                group |= {a, b}
                groups[a] = groups[b] = group
    return [list(g) for g in sorted({tuple(sorted(g)) for g in groups.values()})]


def test_no_import_cycles():
    assert _module_cycles() == []


def _private_imports() -> list[str]:
    """``from structgen.x import _name`` in a module other than x (a package's own ``__init__`` aside)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("structgen"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{alias.name}")
    return found


def test_no_private_name_crosses_modules():
    assert _private_imports() == []


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")))
def test_modules_stay_small(path):
    """One concern a module: none grows past 700 lines (the aim is 600)."""
    assert len((ROOT / path).read_text(encoding="utf-8").splitlines()) <= 700
