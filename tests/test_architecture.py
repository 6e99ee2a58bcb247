"""The package's module order (``docs/architecture.md``), read from the code's own imports.

Every module of ``jaxrank/`` imports only modules below it: the import graph has no cycle, no
module uses another module's private (``_``-prefixed) names, and the layer table of
``docs/architecture.md`` lists every module above everything it imports.
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
MODULES = sorted(p.stem for p in PKG.glob("*.py"))
# a NamedTuple's public API has a leading underscore
NAMEDTUPLE_API = frozenset({"_fields", "_replace", "_asdict", "_make", "_field_defaults"})


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(module: str) -> tuple[set[str], list[str]]:
    """``(modules imported, private names used from other modules)`` of ``jaxrank/<module>.py``,
    deferred imports inside functions included."""
    tree = ast.parse((PKG / f"{module}.py").read_text(encoding="utf-8"))
    deps, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "jaxrank"
        ):
            parts = node.module.split(".")
            if len(parts) == 1:  # from jaxrank import kernels as _kernels
                for a in node.names:
                    if a.name in MODULES:
                        deps.add(a.name)
                        aliases[a.asname or a.name] = a.name
            else:  # from jaxrank.fit import fit_rows
                deps.add(parts[1])
                private += [f"{parts[1]}.{a.name}" for a in node.names if _is_private(a.name)]
                for a in node.names:  # RankClassifier._rare_index through an imported name
                    aliases[a.asname or a.name] = f"{parts[1]}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "jaxrank" and len(parts) > 1:
                    deps.add(parts[1])
    for node in ast.walk(tree):  # kernels._sq_dist through an imported module's alias
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and _is_private(node.attr)
                and node.attr not in NAMEDTUPLE_API):  # fmt: skip
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    deps.discard(module)
    return deps, [p for p in private if not p.startswith(f"{module}.")]


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


def test_architecture_page_lists_every_module_above_its_imports():
    rows = re.findall(r"^\| (\d+) \| `([\w]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
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
