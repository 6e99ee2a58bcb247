"""The package's module order (``docs/architecture.md``), read from the code's own imports.

Every module of ``jaxrank/`` imports only modules below it: the import graph has no cycle, no
module uses another module's private (``_``-prefixed) names, and the layer table of
``docs/architecture.md`` lists every module above everything it imports. Subpackages are walked
too: ``jaxrank/sklearn/_base.py`` is the module ``sklearn._base`` and a subpackage's face
(``jaxrank/sklearn/__init__.py``) the module ``sklearn``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "jaxrank"
DOC = ROOT / "docs" / "architecture.md"


def _module_names(pkg: Path) -> list[str]:
    """Every module under ``pkg``, subpackages included, named relative to it: ``fit``,
    ``sklearn._base``; a subpackage's ``__init__.py`` is the subpackage (``sklearn``), the
    package's own stays ``__init__``."""
    names = []
    for path in pkg.rglob("*.py"):
        parts = list(path.relative_to(pkg).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        names.append(".".join(parts))
    return sorted(names)


MODULES = _module_names(PKG)
# a NamedTuple's public API has a leading underscore
NAMEDTUPLE_API = frozenset({"_fields", "_replace", "_asdict", "_make", "_field_defaults"})


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _path(module: str) -> Path:
    """The file of ``module`` (a name of :data:`MODULES`)."""
    base = PKG.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _resolve(dotted: str) -> str:
    """The module that ``jaxrank.<dotted>`` lies in: its longest prefix among :data:`MODULES`
    (``sklearn._base.RankClassifier`` -> ``sklearn._base``)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in MODULES:
            return ".".join(parts[:k])
    return dotted


def _imports(module: str) -> tuple[set[str], list[str]]:
    """``(modules imported, private names used from other modules)`` of ``module``'s file,
    deferred imports inside functions included; relative imports resolved against its package."""
    path = _path(module)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" and module != "__init__" else ""
    package = package or module.rpartition(".")[0]
    deps, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from ._base import midpoint, from . import _base
                up = package.split(".") if package else []
                if node.level - 1 > len(up):
                    continue
                up = up[: len(up) - (node.level - 1)]
                full = ".".join([*up, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "jaxrank":
                full = node.module.partition(".")[2]
            else:
                continue
            for a in node.names:
                sub = f"{full}.{a.name}" if full else a.name
                if sub in MODULES:  # from jaxrank import kernels, from jaxrank.sklearn import _base
                    deps.add(sub)
                    aliases[a.asname or a.name] = sub
                elif full:  # from jaxrank.fit import fit_rows
                    dep = _resolve(full)
                    deps.add(dep)
                    if _is_private(a.name):
                        private.append(f"{dep}.{a.name}")
                    # RankClassifier._rare_index through an imported name
                    aliases[a.asname or a.name] = f"{dep}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "jaxrank" and len(parts) > 1:
                    deps.add(_resolve(".".join(parts[1:])))
    for node in ast.walk(tree):  # kernels._sq_dist through an imported module's alias
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and _is_private(node.attr)
                and node.attr not in NAMEDTUPLE_API):  # fmt: skip
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    deps.discard(module)
    return deps, [p for p in private if _resolve(p.rpartition(".")[0]) != module]


GRAPH = {m: _imports(m)[0] for m in MODULES}


def test_no_import_cycle():
    done, active = set(), []

    def visit(m):
        if m in active:
            cycle = [*active[active.index(m) :], m]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if m in done:
            return
        active.append(m)
        for d in sorted(GRAPH.get(m, ())):
            if d in GRAPH and d != "__init__":
                visit(d)
        active.pop()
        done.add(m)

    for m in MODULES:
        visit(m)


@pytest.mark.parametrize("module", MODULES)
def test_no_private_name_of_another_module(module):
    assert _imports(module)[1] == []


def test_detects_cycles_and_private_names(tmp_path, monkeypatch):
    # the checks above can fail: a private name through an alias is caught
    src = "from jaxrank import kernels as _k\nfrom jaxrank.kernels import Gaussian as G\n"
    src += "x = _k._sq_dist\ny = G._private\nz = G._fields\n"
    (tmp_path / "probe.py").write_text(src)
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "PKG", tmp_path)
    monkeypatch.setattr(this, "MODULES", ["kernels", "probe"])
    assert _imports("probe") == ({"kernels"}, ["kernels._sq_dist", "kernels.Gaussian._private"])


def test_walks_subpackages(tmp_path, monkeypatch):
    # a subpackage's modules are checked too: named by their dotted path, relative imports
    # resolved, a face's use of its own submodule's private name caught
    (tmp_path / "fam").mkdir()
    (tmp_path / "kernels.py").write_text("")
    (tmp_path / "fam" / "__init__.py").write_text("from jaxrank.fam._a import f, _g\n")
    (tmp_path / "fam" / "_a.py").write_text(
        "from . import _b\nfrom .._b_top import x\nfrom jaxrank import kernels\n"
        "import jaxrank.fam._b\n"
    )
    (tmp_path / "fam" / "_b.py").write_text("from jaxrank.fam import _a as A\ny = A._h\n")
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "PKG", tmp_path)
    monkeypatch.setattr(this, "MODULES", _module_names(tmp_path))
    assert this.MODULES == ["fam", "fam._a", "fam._b", "kernels"]
    assert _imports("fam") == ({"fam._a"}, ["fam._a._g"])
    assert _imports("fam._a") == ({"fam._b", "_b_top", "kernels"}, [])
    assert _imports("fam._b") == ({"fam._a"}, ["fam._a._h"])


def test_architecture_page_lists_every_module_above_its_imports():
    rows = re.findall(r"^\| (\d+) \| `([\w.]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    layer = {name: int(n) for n, name in rows}
    assert sorted(layer) == MODULES, "docs/architecture.md must list every module once"
    for m, deps in GRAPH.items():
        for d in deps:
            if d in layer and d != "__init__" and m != "__init__":
                assert layer[d] < layer[m], f"{m} (layer {layer[m]}) imports {d} ({layer[d]})"


# Public names of the modules that were split (issue 19), as they were before the split: each is
# still importable from its old module.
OLD_PUBLIC = {
    "jaxrank.fit": [
        "DUAL_MIN_COLUMNS", "PSD_CHECK_MAX_BASIS", "SHARED_GRID_LAMS", "SHARED_GRID_MAX_BYTES",
        "SPECTRAL_MAX_BASIS", "STAGED_MIN_BYTES", "ConvergenceWarning", "RankModel",
        "check_max_kernel_bytes", "check_solver_options", "fit", "fit_rankrc", "fit_ranksvm",
        "fit_rows", "grid_stages", "hessian_diagonal", "keep_transpose", "moment_gram",
        "objective_closures", "pair_curvature", "psd_gram", "resolve_precondition",
    ],
    "jaxrank.mibc": ["MIBCInfo", "MIBCModel", "NegativeMoments", "default_rho", "fit_mibc",
                     "negative_moments", "solve_dual"],
    "jaxrank.dopmid": ["DOPMIDInfo", "DOPMIDModel", "MostViolated", "QPResult", "fit_dopmid",
                       "most_violated", "solve_qp", "structured_loss"],
    "jaxrank.cli": ["MODEL_FORMAT", "MODEL_VERSION", "ModelFile", "PAPER_LOG2_GRID", "demo",
                    "load_model_file", "main", "save_model_file"],
    "jaxrank._cv": ["AUTO_MIN_BASIS", "auto_basis", "auto_basis_size"],
    "jaxrank.sklearn": ["RankRCClassifierCV", "RankRCClassifier", "RankSVMClassifier",
                        "RandomBasisRankClassifier", "SparseAUCClassifier",
                        "NystromRankClassifier", "MultiLevelRankRC"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(OLD_PUBLIC))
def test_names_of_split_modules_stay_importable(module):
    import importlib

    pytest.importorskip("sklearn")
    mod = importlib.import_module(module)
    assert [n for n in OLD_PUBLIC[module] if not hasattr(mod, n)] == []


# The benchmarks (``bench/``, docs/architecture.md "The benchmarks"): a script imports the shared
# layer (``_common``: the run harness; ``_data``: data and model helpers; ``_keel``: the KEEL
# data and protocol) and jaxrank's public API, never another script and never a private module
# or name of jaxrank (``jaxrank.internals`` names the internals a bench measures).
BENCH = ROOT / "bench"
BENCH_SHARED = ("_common", "_data", "_keel")  # in layer order: each imports only those before it


def _bench_violations(path: Path, local: set[str]) -> list[str]:
    """What ``path`` (a bench file) imports against the rules above, deferred imports included:
    another bench script, a shared module above it, a private jaxrank module or name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me, bad, jaxrank_names = path.stem, [], set()
    allowed = set(BENCH_SHARED[: BENCH_SHARED.index(me)] if me in BENCH_SHARED else BENCH_SHARED)

    def local_import(name: str) -> None:
        if name in local and name != me and name not in allowed:
            bad.append(f"imports bench/{name}.py")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                local_import(parts[0])
                if parts[0] == "jaxrank":
                    if any(_is_private(p) for p in parts[1:]):
                        bad.append(f"import {a.name}")
                    jaxrank_names.add(a.asname or parts[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            local_import(parts[0])
            if parts[0] != "jaxrank":
                continue
            if any(_is_private(p) for p in parts[1:]):
                bad.append(f"from {node.module} import ...")
            for a in node.names:
                if _is_private(a.name):
                    bad.append(f"from {node.module} import {a.name}")
                jaxrank_names.add(a.asname or a.name)
    for node in ast.walk(tree):  # jaxrank._cache, kernels._block, RankModel._x through a name
        if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                and node.attr not in NAMEDTUPLE_API):  # fmt: skip
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in jaxrank_names:
                bad.append(f"{ast.unparse(node)}")
    return bad


def _bench_files(folder: Path = BENCH) -> list[Path]:
    return sorted(folder.glob("*.py"))


@pytest.mark.parametrize("path", _bench_files(), ids=lambda p: p.name)
def test_bench_imports_only_the_shared_layer_and_public_jaxrank(path):
    local = {p.stem for p in _bench_files()}
    assert _bench_violations(path, local) == []


def test_bench_shared_layer_exists():
    assert [m for m in BENCH_SHARED if not (BENCH / f"{m}.py").exists()] == []


def test_bench_check_detects_violations(tmp_path):
    # the check above can fail: a script importing another, a private module, a private name
    # through an alias, a shared module importing one above it
    probe = (
        "import _common as C\nimport bases as B\nfrom keel_wide import load_set\n"
        "import jaxrank\nfrom jaxrank import _cv, kernels\nfrom jaxrank.multilevel import _Levels\n"
        "import jaxrank._fitting\n"
        "def f():\n    from jaxrank import _buckets\n    import latency\n"
        "    return jaxrank._cache.x, kernels._block, C._md_row, kernels.Gaussian._fields\n"
    )
    (tmp_path / "probe.py").write_text(probe)
    (tmp_path / "_data.py").write_text("import _keel\nimport _common\n")
    local = {"_common", "_data", "_keel", "bases", "keel_wide", "latency", "probe"}
    assert _bench_violations(tmp_path / "probe.py", local) == [
        "imports bench/bases.py", "imports bench/keel_wide.py", "from jaxrank import _cv",
        "from jaxrank.multilevel import _Levels", "import jaxrank._fitting",
        "from jaxrank import _buckets", "imports bench/latency.py", "kernels._block",
        "jaxrank._cache",
    ]  # fmt: skip
    assert _bench_violations(tmp_path / "_data.py", local) == ["imports bench/_keel.py"]
