"""The notebooks in ``notebooks/``: valid nbformat-4 JSON, and every code cell runs, in order,
in a fresh namespace, at the small size (``JAXRANK_NB_SMALL=1``), with and without matplotlib.

No Jupyter dependency: the JSON is parsed and each code cell is ``exec``-uted; matplotlib (in
the test extra) uses the Agg backend and ``plt.show`` does nothing. The notebooks import
matplotlib conditionally, so they must also run when it is missing. Where the ``notebooks``
extra is installed (Jupyter: nbclient, ipykernel), the quickstart also runs as a reader runs it,
in a Jupyter kernel; elsewhere that test skips, naming the extra.
"""

import builtins
import json
import os
import re
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxrank

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}


def _cells(path, kind="code"):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == kind]


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _run(path, monkeypatch, *, matplotlib: bool, promotion: str = "strict") -> dict:
    """Execute every code cell of ``path`` in order in one fresh namespace; returns it."""
    monkeypatch.setenv("JAXRANK_NB_SMALL", "1")
    if matplotlib:
        mpl = pytest.importorskip("matplotlib")
        mpl.use("Agg", force=True)
        import matplotlib.pyplot as plt

        monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    else:
        real_import = builtins.__import__

        def no_matplotlib(name, *args, **kwargs):
            if name == "matplotlib" or name.startswith("matplotlib."):
                raise ImportError(f"No module named {name!r} (hidden by the test)")
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    namespace = {"__name__": "__main__"}
    with warnings.catch_warnings(), jax.numpy_dtype_promotion(promotion):
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        for k, cell in enumerate(_cells(path)):
            code = compile(_source(cell), f"{path.name} [code cell {k}]", "exec")
            exec(code, namespace)
    if matplotlib:
        import matplotlib.pyplot as plt

        plt.close("all")
    return namespace


def test_notebooks_exist():
    assert {"quickstart", "paper_walkthrough", "auc_network", "implicit_tuning"} <= set(NOTEBOOKS)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_valid_nbformat4(name):
    nb = json.loads(NOTEBOOKS[name].read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 4
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and isinstance(cell["metadata"], dict)
        assert isinstance(cell["source"], list) and all(isinstance(s, str) for s in cell["source"])
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    # no IPython magics or shell escapes: the cells are plain Python
    for cell in _cells(NOTEBOOKS[name]):
        compile(_source(cell), name, "exec")
        assert not re.search(r"^\s*[%!]", _source(cell), re.M)


def test_quickstart_runs(monkeypatch):
    ns = _run(NOTEBOOKS["quickstart"], monkeypatch, matplotlib=True)
    assert ns["SMALL"] and ns["plt"] is not None
    y, Z = ns["y_test"], ns["Z_test"]
    # the model picked by CV is the grid member at the best λ, and its printed AUC is its AUC
    best, cv = ns["best"], ns["cv"]
    assert float(best.lam) == cv.best_lam == ns["lams"][cv.best_index]
    from sklearn.metrics import roc_auc_score

    assert ns["rankrc_auc"] == pytest.approx(
        roc_auc_score(y == 1, np.asarray(best.decision_function(Z))), abs=1e-12
    )
    assert 0.5 < ns["rankrc_auc"] <= 1 and 0.5 < ns["svm_auc"] <= 1
    assert ns["rankrc_auc"] <= ns["bayes_auc"] + 0.05  # nothing ranks much above the Bayes rule


def test_walkthrough_runs(monkeypatch):
    ns = _run(NOTEBOOKS["paper_walkthrough"], monkeypatch, matplotlib=True)
    models = ns["models"]
    assert {m.n_basis for m in models.values()} == {20, 200}
    # RankSVM's basis contains the others: its objective is the smallest at every λ (eq. 11)
    svm = np.asarray(models["RANK-SVM"].info.objective)
    for name in ("RANK-RC", "RANK-RND"):
        assert np.all(svm <= np.asarray(models[name].info.objective) + 1e-9), name
    assert len(ns["table"]["RANK-RC"]) == ns["n_trials"] == 2
    if ns["X_keel"] is not None:
        assert 50 < ns["keel"]["RANK-RC"][0] <= 100


@pytest.mark.slow
def test_auc_network_runs(monkeypatch):
    # optax's adam mixes an int32 step count into float powers: refused under the suite's strict
    # promotion (optax's code, not the notebook's); users run with JAX's standard promotion
    ns = _run(NOTEBOOKS["auc_network"], monkeypatch, matplotlib=True, promotion="standard")
    assert ns["SMALL"]
    res = ns["results"]
    assert {"jaxrank pairwise", "cross-entropy", "RankRC (kernel)"} <= set(res)
    assert all(0.0 <= r["test_auc"] <= 1.0 for r in res.values())
    # the all-pairs loss trains: its loss falls, and it ranks above chance on held-out rows
    curve = ns["curves"]["jaxrank pairwise"]
    assert curve[-1] < curve[0] and res["jaxrank pairwise"]["test_auc"] > 0.55
    if ns["rax"] is not None:  # the same pairs, the same hinge: the same network trains alike
        assert res["rax pairwise hinge"]["test_auc"] > 0.55


@pytest.mark.slow
def test_implicit_tuning_runs(monkeypatch):
    ns = _run(NOTEBOOKS["implicit_tuning"], monkeypatch, matplotlib=True)
    # the implicit derivative is the finite difference of the (tightly solved) fit
    assert float(ns["g0"][0]) == pytest.approx(float(ns["fd"]), rel=1e-3)
    path, grid_auc = ns["path"], ns["grid_auc"]
    assert path[-1, 2] > path[0, 2]  # gradient steps raised the validation AUC
    assert grid_auc.shape == (4, 5) and 0.5 < ns["grid_best"][2] <= 1
    # the ARD cells: a scale per column, the one-hot group sharing one factor
    ard = ns["ard"]
    fs = ard.feature_scales_
    assert fs.shape == (8,) and np.all(fs >= 0)
    base = jaxrank.kernels.binary_scales(ns["X_ard"]) if ard.kernel_choice_ == "binary" else None
    ratio = fs[5:] / (1.0 if base is None else base[5:])
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-6)


def test_quickstart_runs_without_matplotlib(monkeypatch):
    ns = _run(NOTEBOOKS["quickstart"], monkeypatch, matplotlib=False)
    assert ns["plt"] is None and 0.5 < ns["rankrc_auc"] <= 1


@pytest.mark.slow
def test_quickstart_runs_in_a_jupyter_kernel(monkeypatch):
    # what `jupyter execute notebooks/quickstart.ipynb` (README) does: a real kernel, the cells'
    # outputs recorded, the first error raised as CellExecutionError
    nbclient = pytest.importorskip("nbclient", reason="needs pip install -e '.[notebooks]'")
    nbformat = pytest.importorskip("nbformat", reason="needs pip install -e '.[notebooks]'")
    pytest.importorskip("ipykernel", reason="needs pip install -e '.[notebooks]'")
    monkeypatch.setenv("JAXRANK_NB_SMALL", "1")  # the kernel inherits this environment
    # the kernel is the user's python, not this session's: no x64, no strict promotion
    for name in [k for k in os.environ if k.startswith("JAX_")]:
        monkeypatch.delenv(name)
    nb = nbformat.read(NOTEBOOKS["quickstart"], as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={
        "metadata": {"path": str(ROOT / "notebooks")}}).execute()  # fmt: skip
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "small run: True" in text
