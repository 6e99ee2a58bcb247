"""Seed 000, Sec. 6.1: Table 2 (test AUC on the simulated rare-class data) and Fig. 5, one command.

The paper's protocol (seed 000 Sec. 6 and 6.1), followed here:

* **Data** (``jaxrank.datasets``): six rare-class Gaussian centres, fifteen majority centres at
  ``t·μ_i + (1−t)·μ_j``, spherical σ = 0.5, d = 5; overlap high / medium / low = t 0.9 / 0.75 /
  0.6, imbalance ρ = m+/m = 10, 20, 30, 40 % — 12 settings ("cells"). Per cell and trial, new
  centres (``rare_class_centers``) and, from them, 1,000 training, 1,000 validation and 10,000
  test rows; **10 trials** (the paper's count; ``--trials`` changes it and the JSON says so). The
  keys: ``jax.random.split(fold_in(fold_in(key(seed), cell), trial), 5)`` → centres, training,
  validation, test, methods (cell = the index in :data:`CELLS`, so a cell draws the same data
  whichever cells run). Every set is standardised with the training rows' mean and s.d.
* **Kernel**: Gaussian ``exp(−||u − v||²/σ²)``, σ² = mean squared pairwise distance of the
  training rows (``jaxrank.kernels.sigma2_heuristic``) for every SVM and ranking method (SVC's
  ``gamma = 1/σ²``; for SVM-RUS and SVM-SMT the same σ² as the others, of the 1,000 rows).
* **Hyper-parameters**: λ over ``log2 λ = −20, −18, …, 10`` for the SVMs and rankers, k over
  ``1, …, ⌊min(100, √m)⌋`` for KNN, each chosen by the **AUC on the independent validation
  set** (the paper's "validation points"; ties to the larger λ / larger k); the model fitted on
  the training rows at that value is scored on the test set. γ is not searched (the paper fixes
  σ²). The SVMs solve the paper's eq. (2)/(3) ``(1/n) Σ ω_i hinge + (λ/2)||w||²``, i.e. LIBSVM
  (scikit-learn ``SVC``) with ``C = 1/(n λ)``, n the rows it is fitted on.
* **Methods**: KNN (posterior ``P(y = 1 | x)`` = fraction of rare neighbours,
  ``KNeighborsClassifier.predict_proba``); SVM (``SVC``); SVM-W (``class_weight`` ω+ = m/(2m+),
  ω− = m/(2m−)); SVM-RUS (imbalanced-learn ``RandomUnderSampler``: the majority class cut to m+
  rows); SVM-SMT (imbalanced-learn ``SMOTE``, 5 neighbours, the rare class grown to m− rows);
  RANK-SVM (``jaxrank.fit_ranksvm``), RANK-RND (``jaxrank.fit(basis="random")``, |R| = m+
  uniform rows), RANK-RC (``jaxrank.fit_rankrc``): smoothed hinge ε = 0.5, tol 1e-6, float32,
  the whole λ grid in one call (``path="warm", chains=4`` as ``bench/bases.py``). The SVM scores
  are ``decision_function``. True Bayes: the AUC on the test rows of the generator's exact log
  likelihood ratio (``datasets.bayes_scores``).
* **Table**: test AUC (points) mean ± standard error over trials, the paper's Table 2 beside it
  (:data:`PAPER_TABLE2`, typed from seed 000 Table 2) and, per cell, whether RANK-RC is within
  :data:`WITHIN` points of the paper. The paper gives one True-Bayes value per overlap level.
* **Fig. 5**: the empirical hinge ranking loss ``R̂_h = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} max(0, 1 −
  f(x_i) + f(x_j))`` (``jaxrank.losses.hinge`` through ``jaxrank.pairwise.value_and_grad``) on
  the training and the test rows against λ, for RANK-RC, RANK-SVM and RANK-RND on the first
  trial of one cell (:data:`FIG5_CELL`; the paper shows four unnamed cells). Written as a PNG
  beside the JSON.

Timing: ``select_s`` is the wall time of a method's whole hyper-parameter search (fit at every
λ or k, validation scores), ``test_s`` of scoring the test rows; both medians over trials in
the summary. Measured on a shared 2-core machine: expect noise of tens of percent.

Usage::

    python bench/table2.py                 # the paper's protocol: 12 cells x 10 trials
    python bench/table2.py --save          # ... and copy the JSON + PNG to bench/results/
    python bench/table2.py --trials 2 --cells medium-10 low-40
    python bench/table2.py --quick         # tiny sizes, one cell, 1 trial (smoke test)

``--max-minutes`` bounds the run: trials run trial-major (every cell of trial 0, then of trial
1, ...) and a new round starts only if the time spent plus the last round's duration stays
within the bound, so a long run ends with fewer, but complete, trials per cell; the JSON's
``settings.trials_done`` and ``settings.trials_note`` say so, and the printed table too.

Writes ``bench/out/table2.json`` (``--quick``: ``table2_quick.json``; or ``--out``) and
``<stem>_fig5.png`` beside it, and prints the markdown table (:func:`markdown`).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
import warnings
from pathlib import Path

import _common as C
import jax
import numpy as np

import jaxrank
from jaxrank import datasets, losses, metrics, pairwise

ROOT = Path(__file__).resolve().parent
RESULTS_DIR = ROOT / "results"
DTYPE = "float32"
OVERLAPS = {"high": 0.9, "medium": 0.75, "low": 0.6}
RHOS = (0.1, 0.2, 0.3, 0.4)
CELLS = tuple((ov, rho) for ov in OVERLAPS for rho in RHOS)  # the rows of Table 2, in order
M_TRAIN, M_VAL, M_TEST = 1000, 1000, 10_000
TRIALS = 10
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
GRID_PATH = dict(path="warm", chains=4)
WITHIN = 2.0  # AUC points: the issue's "RANK-RC within 2 points of the paper"
FIG5_CELL = ("medium", 0.1)
SMOTE_K = 5

METHODS = ("knn", "svm", "svm-w", "svm-rus", "svm-smote", "rank-svm", "rank-rnd", "rank-rc")
PAPER_NAMES = {
    "knn": "KNN",
    "svm": "SVM",
    "svm-w": "SVM-W",
    "svm-rus": "SVM-RUS",
    "svm-smote": "SVM-SMT",
    "rank-svm": "RANK-SVM",
    "rank-rnd": "RANK-RND",
    "rank-rc": "RANK-RC",
}
RANKERS = ("rank-svm", "rank-rnd", "rank-rc")


def cell_label(overlap: str, rho: float) -> str:
    """``"medium-10"`` for (medium, ρ = 0.1): the ``--cells`` spelling."""
    return f"{overlap}-{round(100 * rho)}"


def parse_cell(text: str) -> tuple[str, float]:
    """Inverse of :func:`cell_label`; raises ``ValueError`` on a cell not in Table 2."""
    overlap, _, pct = text.partition("-")
    try:
        cell = (overlap, int(pct) / 100)
    except ValueError:
        cell = None
    if cell not in CELLS:
        good = " ".join(cell_label(*c) for c in CELLS)
        raise ValueError(f"unknown cell {text!r}; use one of: {good}")
    return cell


# Seed 000, Table 2 ("Comparison of Test AUC Results for Simulated Datasets"): mean ± s.e. over
# 10 trials, per (overlap, ρ), in the order of METHODS (KNN, SVM, SVM-W, SVM-RUS, SVM-SMT,
# RANK-SVM, RANK-RND, RANK-RC).
_P = {
    "high-10": "56.3 0.4  57.3 0.3  59.8 0.3  59.1 0.4  58.9 0.4  61.5 0.3  61.4 0.3  61.4 0.2",
    "high-20": "55.5 0.4  59.2 0.2  61.2 0.1  61.0 0.4  60.9 0.4  61.6 0.3  61.3 0.4  62.3 0.3",
    "high-30": "57.3 1.0  61.1 0.2  62.2 0.4  62.2 0.1  61.8 0.3  62.3 0.4  62.2 0.3  62.6 0.4",
    "high-40": "59.0 0.7  62.8 0.2  63.2 0.3  63.3 0.2  62.8 0.2  62.7 0.3  62.5 0.2  62.7 0.3",
    "medium-10": "54.9 0.6  56.8 0.5  59.5 0.5  58.8 0.3  58.6 0.9  61.4 0.5  60.1 0.5  61.4 0.4",
    "medium-20": "54.5 0.3  60.1 0.4  62.1 0.2  62.1 0.3  62.0 0.5  62.8 0.4  61.5 0.4  63.4 0.2",
    "medium-30": "57.6 0.8  63.4 0.1  64.0 0.3  63.3 0.1  63.4 0.4  64.1 0.4  62.4 0.5  64.6 0.5",
    "medium-40": "58.0 0.7  65.3 0.2  65.5 0.1  65.4 0.1  65.3 0.2  64.6 0.3  63.0 0.2  64.9 0.3",
    "low-10": "55.9 1.0  61.1 0.6  64.0 0.4  63.5 0.2  63.0 0.8  65.3 0.5  62.7 0.6  65.5 0.4",
    "low-20": "57.2 0.4  64.2 0.3  66.6 0.2  66.2 0.2  66.4 0.2  67.1 0.3  63.5 0.4  67.3 0.2",
    "low-30": "59.9 0.9  69.1 0.4  69.4 0.2  68.9 0.1  69.2 0.2  69.2 0.4  65.8 0.4  69.8 0.4",
    "low-40": "61.6 1.5  71.1 0.1  70.7 0.3  70.5 0.1  71.1 0.1  69.8 0.3  65.8 0.3  69.9 0.3",
}


def _parse_paper(rows: dict) -> dict:
    out = {}
    for label, text in rows.items():
        v = [float(s) for s in text.split()]
        out[parse_cell(label)] = {name: (v[2 * i], v[2 * i + 1]) for i, name in enumerate(METHODS)}
    return out


PAPER_TABLE2: dict[tuple[str, float], dict[str, tuple[float, float]]] = _parse_paper(_P)
"""Seed 000 Table 2: ``{(overlap, ρ): {method: (mean, s.e.)}}`` in AUC points."""
PAPER_BAYES = {"high": 66.8, "medium": 69.5, "low": 74.4}
"""Seed 000 Table 2, "True Bayes" column: one value per overlap level."""

QUICK = dict(
    cells=(("medium", 0.1),),
    trials=1,
    m_train=200,
    m_val=200,
    m_test=2000,
    lams=2.0 ** np.array([-12.0, -8.0, -4.0, 0.0]),
)


# ---------------------------------------------------------------------------- helpers


def standardise(Xtr: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Centre and scale by the training rows' mean and standard deviation (constant columns: 1)."""
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(A - mu) / sd for A in (Xtr, *others)]


def pick_best(params, aucs) -> int:
    """Index of the largest validation AUC; ties go to the larger parameter (λ or k)."""
    params = np.asarray(params, dtype=np.float64)
    aucs = np.asarray(aucs, dtype=np.float64)
    best = np.flatnonzero(aucs == np.nanmax(aucs))
    return int(best[np.argmax(params[best])])


def mean_se(values) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / √n; NaN for one value)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(np.mean(v)), se


def knn_k_grid(m: int) -> np.ndarray:
    """The paper's KNN grid ``k = 1, 2, …, ⌊min(100, √m)⌋``."""
    return np.arange(1, max(1, math.floor(min(100.0, math.sqrt(m)))) + 1)


def svm_C(lam: float, n: int) -> float:
    """LIBSVM's C for ``(1/n) Σ hinge + (λ/2)||w||²``: ``C = 1/(n λ)``."""
    return 1.0 / (n * lam)


def hinge_rank_loss(y, scores) -> np.ndarray:
    """R̂_h of seed 000 Sec. 6.1 (Fig. 5): the mean hinge ``max(0, 1 − f_i + f_j)`` over pairs.

    ``scores`` is ``(n,)`` or ``(L, n)`` (a λ grid); returns ``()`` or ``(L,)`` float64. Sums
    through ``jaxrank.pairwise.value_and_grad`` with ``jaxrank.losses.hinge()`` (sorted windows,
    no pair matrix).
    """
    pos = np.asarray(y) == 1
    s = np.atleast_2d(np.asarray(scores))
    n_pairs = float(pos.sum()) * float((~pos).sum())
    loss = losses.hinge()
    out = [float(pairwise.value_and_grad(row[pos], row[~pos], loss)[0]) / n_pairs for row in s]
    return np.asarray(out) if np.ndim(scores) == 2 else np.asarray(out[0])


def _auc(y, scores) -> np.ndarray:
    return np.asarray(metrics.auc(y, np.asarray(scores, dtype=np.float64)), dtype=np.float64)


def _status_names(model) -> list[str]:
    return [jaxrank.Status(int(s)).name for s in np.atleast_1d(np.asarray(model.info.status))]


# ---------------------------------------------------------------------------- methods


def _svc_search(X, y, lams, gamma, Xva, yva, class_weight=None):
    from sklearn.svm import SVC

    if np.any(np.diff(lams) <= 0):
        raise ValueError("the λ grid must be ascending.")
    val, best, best_auc = [], None, -np.inf
    for lam in lams:
        clf = SVC(C=svm_C(float(lam), y.size), kernel="rbf", gamma=gamma,
                  class_weight=class_weight, cache_size=1000)  # fmt: skip
        clf.fit(X, y)
        a = float(_auc(yva, clf.decision_function(Xva)))
        val.append(a)
        if a >= best_auc:  # ties: the later (larger) λ of the ascending grid, as pick_best
            best, best_auc = clf, a
    return np.asarray(val), best


def run_method(name, data, *, lams, key, seed: int) -> dict:
    """Search one method's parameter on (train → validation), score the test rows at the best.

    Returns the record of one method on one trial (and, for the rankers, the fitted grid model
    under the private key ``"_model"``, for Fig. 5).
    """
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["val"], data["test"]
    m, m_pos = ytr.size, int(np.sum(ytr == 1))
    gamma = 1.0 / jaxrank.kernels.sigma2_heuristic(Xtr)
    rec: dict = {}
    model = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        if name == "knn":
            from sklearn.neighbors import KNeighborsClassifier

            grid = knn_k_grid(m)
            val, fits = [], []
            for k in grid:
                clf = KNeighborsClassifier(n_neighbors=int(k)).fit(Xtr, ytr)
                val.append(float(_auc(yva, clf.predict_proba(Xva)[:, 1])))
                fits.append(clf)
            val = np.asarray(val)
            i = pick_best(grid, val)
            best = fits[i]
            param = ("k", int(grid[i]))
        elif name in ("svm", "svm-w", "svm-rus", "svm-smote"):
            X, y, cw = Xtr, ytr, None
            if name == "svm-w":
                cw = {1: m / (2 * m_pos), -1: m / (2 * (m - m_pos))}
            elif name == "svm-rus":
                from imblearn.under_sampling import RandomUnderSampler

                X, y = RandomUnderSampler(random_state=seed).fit_resample(Xtr, ytr)
            elif name == "svm-smote":
                from imblearn.over_sampling import SMOTE

                X, y = SMOTE(k_neighbors=SMOTE_K, random_state=seed).fit_resample(Xtr, ytr)
            grid = np.asarray(lams)
            val, best = _svc_search(X, y, grid, gamma, Xva, yva, cw)
            i = pick_best(grid, val)
            rec["n_fit_rows"] = int(y.size)
            rec["n_support"] = int(best.n_support_.sum())
            param = ("log2_lam", float(np.log2(grid[i])))
        elif name in RANKERS:
            grid = np.asarray(lams)
            opts = dict(dtype=DTYPE, **GRID_PATH)
            if name == "rank-svm":
                model = jaxrank.fit_ranksvm(Xtr, ytr, grid, **opts)
            elif name == "rank-rnd":
                model = jaxrank.fit(Xtr, ytr, grid, basis="random", key=key, **opts)
            else:
                model = jaxrank.fit_rankrc(Xtr, ytr, grid, **opts)
            val = _auc(yva, model.decision_function(Xva)).reshape(-1)
            i = pick_best(grid, val)
            best = model.select(i)
            statuses = _status_names(model)
            rec["n_basis"] = model.n_basis
            rec["status"] = statuses[i]
            rec["grid_statuses"] = statuses
            rec["newton_iterations"] = int(np.asarray(model.info.iterations).sum())
            param = ("log2_lam", float(np.log2(grid[i])))
        else:
            raise ValueError(f"unknown method {name!r}; use one of {METHODS}.")
        select_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        if name == "knn":
            test_scores = best.predict_proba(Xte)[:, 1]
        elif name in RANKERS:
            test_scores = np.asarray(jax.block_until_ready(best.decision_function(Xte)))
        else:
            test_scores = best.decision_function(Xte)
        test_auc = float(_auc(yte, test_scores))
        test_s = time.perf_counter() - t0
    rec.update(
        {
            "param": param[0],
            "value": param[1],
            "grid": np.asarray(grid, dtype=np.float64).tolist(),
            "val_auc_grid": np.asarray(val).tolist(),
            "val_auc": float(val[i]),
            "test_auc": test_auc,
            "select_s": select_s,
            "test_s": test_s,
            "warnings": sorted({f"{w.category.__name__}: {w.message}"[:200] for w in caught}),
        }
    )
    if model is not None:
        rec["_model"] = model
    return rec


# ---------------------------------------------------------------------------- one trial


def draw_trial(cell_index: int, overlap: str, rho: float, trial: int, cfg: dict, seed: int):
    """Centres, standardised (train, validation, test) sets, Bayes test AUC and the methods' key."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), cell_index), trial)
    kc, ktr, kva, kte, kfit = jax.random.split(key, 5)
    centers = datasets.rare_class_centers(OVERLAPS[overlap], key=kc)
    Xtr, ytr = datasets.make_rare_class(cfg["m_train"], rho, None, centers=centers, key=ktr)
    Xva, yva = datasets.make_rare_class(cfg["m_val"], rho, None, centers=centers, key=kva)
    Xte, yte = datasets.make_rare_class(cfg["m_test"], rho, None, centers=centers, key=kte)
    bayes = float(_auc(yte, datasets.bayes_scores(Xte, centers)))
    Xtr_s, Xva_s, Xte_s = standardise(Xtr, Xva, Xte)
    data = {"train": (Xtr_s, ytr), "val": (Xva_s, yva), "test": (Xte_s, yte)}
    return data, bayes, kfit


def fig5_record(data: dict, recs: dict, lams) -> dict:
    """Train and test R̂_h along the λ grid of each ranker fitted on one trial."""
    (Xtr, ytr), (Xte, yte) = data["train"], data["test"]
    out = {}
    for name in RANKERS:
        if name not in recs:
            continue
        model = recs[name]["_model"]
        out[name] = {
            "train_loss": hinge_rank_loss(ytr, model.decision_function(Xtr)).tolist(),
            "test_loss": hinge_rank_loss(yte, model.decision_function(Xte)).tolist(),
            "chosen_log2_lam": recs[name]["value"],
        }
    return {"log2_lam": np.log2(np.asarray(lams)).tolist(), "methods": out}


def plot_fig5(fig5: dict, path: Path) -> Path:
    """Fig. 5 of seed 000 for one cell: train (dashed) and test (solid) R̂_h against log2 λ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    x = fig5["log2_lam"]
    colours = {"rank-svm": "tab:blue", "rank-rnd": "tab:green", "rank-rc": "tab:red"}
    for name, r in fig5["methods"].items():
        c = colours.get(name)
        ax.plot(x, r["test_loss"], "-o", ms=3, color=c, label=f"{PAPER_NAMES[name]} test")
        ax.plot(x, r["train_loss"], "--", color=c, label=f"{PAPER_NAMES[name]} train")
        ax.axvline(r["chosen_log2_lam"], color=c, lw=0.6, ls=":")
    ax.set(
        xlabel="log2 λ",
        ylabel="hinge ranking loss R̂_h",
        title=f"Fig. 5 (seed 000): {fig5['cell']}, trial {fig5['trial']}; dotted: chosen λ",
    )
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- summaries


def summarise_cell(cell: dict, methods) -> dict:
    """Mean ± s.e. of the test AUC over trials per method (and of the Bayes AUC)."""
    out = {}
    for name in methods:
        rs = [t["methods"][name] for t in cell["trials"]]
        mean, se = mean_se([r["test_auc"] for r in rs])
        out[name] = {
            "runs": len(rs),
            "test_auc_mean": mean,
            "test_auc_se": se,
            "value_median": float(np.median([r["value"] for r in rs])),
            "select_s_median": float(np.median([r["select_s"] for r in rs])),
            "test_s_median": float(np.median([r["test_s"] for r in rs])),
            "warned_runs": sum(bool(r["warnings"]) for r in rs),
        }
    mean, se = mean_se([t["bayes_test_auc"] for t in cell["trials"]])
    out["bayes"] = {"runs": len(cell["trials"]), "test_auc_mean": mean, "test_auc_se": se}
    return out


def compare_rankrc(cells: list[dict], within: float = WITHIN) -> dict:
    """Per cell: RANK-RC (ours − paper) in points, within ``within``?, and the Bayes context."""
    per = []
    for c in cells:
        s = c["summary"]
        if "rank-rc" not in s:
            continue
        ours = 100 * s["rank-rc"]["test_auc_mean"]
        paper = PAPER_TABLE2[(c["overlap"], c["rho"])]["rank-rc"][0]
        bayes = 100 * s["bayes"]["test_auc_mean"]
        paper_bayes = PAPER_BAYES[c["overlap"]]
        per.append(
            {
                "cell": cell_label(c["overlap"], c["rho"]),
                "ours": ours,
                "paper": paper,
                "diff": ours - paper,
                "within": bool(abs(ours - paper) <= within),
                "bayes_ours": bayes,
                "bayes_paper": paper_bayes,
                "bayes_diff": bayes - paper_bayes,
                "gap_to_bayes_ours": bayes - ours,
                "gap_to_bayes_paper": paper_bayes - paper,
            }
        )
    return {
        "threshold_points": within,
        "within": sum(p["within"] for p in per),
        "cells": len(per),
        "per_cell": per,
    }


def explain(p: dict) -> str:
    """One line on a cell's RANK-RC against the paper (the issue's 'every miss explained')."""
    head = (
        f"{p['cell']}: RANK-RC {p['ours']:.1f} vs paper {p['paper']:.1f} "
        f"({p['diff']:+.1f}) — {'within' if p['within'] else 'MISS'}"
    )
    ctx = (
        f"Bayes ours {p['bayes_ours']:.1f} vs paper {p['bayes_paper']:.1f} "
        f"({p['bayes_diff']:+.1f}); distance to Bayes ours {p['gap_to_bayes_ours']:.1f} vs "
        f"paper {p['gap_to_bayes_paper']:.1f}"
    )
    if p["within"]:
        return f"{head}. {ctx}."
    why = []
    if abs(p["bayes_diff"]) >= 1.0 and np.sign(p["bayes_diff"]) == np.sign(p["diff"]):
        why.append("our generator's Bayes AUC differs from the paper's in the same direction")
    if p["diff"] > 0 and p["gap_to_bayes_ours"] < p["gap_to_bayes_paper"] - 1.0:
        why.append(
            "ours is closer to the Bayes ceiling than the paper's RANK-RC (the paper's rankers "
            "sit further below its own Bayes column)"
        )
    if p["diff"] < 0 and p["gap_to_bayes_ours"] > p["gap_to_bayes_paper"] + 1.0:
        why.append("ours is further below the Bayes ceiling than the paper's (unexplained)")
    return f"{head}. {ctx}. " + ("; ".join(why) if why else "no generator difference explains it")


def _cell_text(mean: float, se: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{100 * mean:.1f}" + ("" if math.isnan(se) else f" ± {100 * se:.1f}")


def markdown(result: dict) -> str:
    """Table 2, ours beside the paper's, then a line per cell on RANK-RC vs the paper."""
    methods = [m for m in METHODS if m in result["settings"]["methods"]]
    st = result["settings"]
    lines = [
        f"**Table 2 (seed 000 Sec. 6.1)** — test AUC (points), mean ± s.e. over "
        f"{st['trials_done']} trial(s) (paper: 10), m = {st['m_train']} / {st['m_val']} / "
        f"{st['m_test']}; each entry: ours / paper",
        "",
        "| overlap | ρ | " + " | ".join(PAPER_NAMES[m] for m in methods) + " | True Bayes |",
        "|---|---:|" + "---:|" * (len(methods) + 1),
    ]
    if st.get("trials_note") and st["trials_done"] != st.get("trials_paper", TRIALS):
        lines.insert(1, f"\n*Trials: {st['trials_note']}.*")
    for c in result["cells"]:
        s = c["summary"]
        paper = PAPER_TABLE2[(c["overlap"], c["rho"])]
        row = [c["overlap"], f"{round(100 * c['rho'])}%"]
        for m in methods:
            pm, ps = paper[m]
            row.append(
                f"{_cell_text(s[m]['test_auc_mean'], s[m]['test_auc_se'])} / {pm:.1f} ± {ps:.1f}"
            )
        b = s["bayes"]
        row.append(f"{_cell_text(b['test_auc_mean'], b['test_auc_se'])} / "
                   f"{PAPER_BAYES[c['overlap']]:.1f}")  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    cmp = result.get("rankrc_vs_paper") or compare_rankrc(result["cells"])
    if cmp["cells"]:
        lines += [
            "",
            f"**RANK-RC within {cmp['threshold_points']:g} AUC points of the paper: "
            f"{cmp['within']} of {cmp['cells']} cells.**",
            "",
        ]
        lines += [f"- {explain(p)}" for p in cmp["per_cell"]]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one cell, 1 trial")
    ap.add_argument("--trials", type=int, default=None, help=f"trials per cell ({TRIALS})")
    ap.add_argument("--cells", nargs="+", default=None, help="e.g. medium-10 low-40 (all 12)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start a trial round only if it should end within this")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--save", action="store_true", help="also copy JSON + PNG to bench/results/")
    args = ap.parse_args(argv)

    cfg = dict(cells=CELLS, trials=TRIALS, m_train=M_TRAIN, m_val=M_VAL, m_test=M_TEST,
               lams=LAM_GRID)  # fmt: skip
    if args.quick:
        cfg.update(QUICK)
    if args.trials is not None:
        cfg["trials"] = args.trials
    if args.cells:
        cfg["cells"] = tuple(parse_cell(c) for c in args.cells)
    out = args.out or C.OUT_DIR / ("table2_quick.json" if args.quick else "table2.json")
    png = out.with_name(out.stem + "_fig5.png")
    methods = [m for m in METHODS if m in args.methods]
    fig5_cell = FIG5_CELL if FIG5_CELL in cfg["cells"] else cfg["cells"][0]

    env = C.env_info()
    print(f"jaxrank Table 2 on {env['platform']} ({env['cpu_count']} CPUs); "
          f"{len(cfg['cells'])} cell(s) x {cfg['trials']} trial(s)", flush=True)  # fmt: skip
    t_start = time.perf_counter()
    cells = [
        {"overlap": ov, "t": OVERLAPS[ov], "rho": rho, "trials": []} for ov, rho in cfg["cells"]
    ]
    fig5 = None
    stopped = None
    last_round = 0.0
    for trial in range(cfg["trials"]):
        elapsed = (time.perf_counter() - t_start) / 60
        if trial and args.max_minutes is not None and elapsed + last_round > args.max_minutes:
            stopped = (
                f"stopped after {trial} trial(s): {elapsed:.1f} min spent + {last_round:.1f} min "
                f"for the last round > --max-minutes {args.max_minutes:g}"
            )
            print(stopped, flush=True)
            break
        t_round = time.perf_counter()
        for cell in cells:
            ov, rho = cell["overlap"], cell["rho"]
            ci = CELLS.index((ov, rho))
            data, bayes, kfit = draw_trial(ci, ov, rho, trial, cfg, args.seed)
            recs = {}
            t0 = time.perf_counter()
            for j, name in enumerate(methods):
                recs[name] = run_method(name, data, lams=cfg["lams"],
                                        key=jax.random.fold_in(kfit, j),
                                        seed=args.seed * 1_000_003 + 1000 * ci + trial)  # fmt: skip
            if fig5 is None and (ov, rho) == fig5_cell:
                fig5 = {"cell": cell_label(ov, rho), "trial": trial,
                        **fig5_record(data, recs, cfg["lams"])}  # fmt: skip
            for r in recs.values():
                r.pop("_model", None)
            ytr = data["train"][1]
            cell["trials"].append(
                {
                    "trial": trial,
                    "m_pos": int(np.sum(ytr == 1)),
                    "bayes_test_auc": bayes,
                    "methods": recs,
                }
            )
            aucs = " ".join(
                f"{n}={100 * r['test_auc']:.1f}[{r['select_s']:.0f}s]" for n, r in recs.items()
            )
            print(f"  trial {trial} {cell_label(ov, rho):9s} bayes={100 * bayes:.1f} {aucs} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
        last_round = (time.perf_counter() - t_round) / 60
    trials_done = min(len(c["trials"]) for c in cells)
    for c in cells:
        c["summary"] = summarise_cell(c, methods)
        c["paper"] = {m: list(v) for m, v in PAPER_TABLE2[(c["overlap"], c["rho"])].items()}
        c["paper_bayes"] = PAPER_BAYES[c["overlap"]]
    note = (
        f"the paper's {TRIALS} trials"
        if trials_done == TRIALS
        else f"{trials_done} trial(s) per cell instead of the paper's {TRIALS}"
        + (f" ({stopped})" if stopped else " (--trials / --quick)")
    )
    result = {
        "benchmark": "table2",
        "env": env,
        "settings": {
            "quick": args.quick,
            "cells": [cell_label(*c) for c in cfg["cells"]],
            "methods": methods,
            "trials": cfg["trials"],
            "trials_done": trials_done,
            "trials_paper": TRIALS,
            "trials_note": note,
            "seed": args.seed,
            "m_train": cfg["m_train"],
            "m_val": cfg["m_val"],
            "m_test": cfg["m_test"],
            "d": 5,
            "sigma": 0.5,
            "lam_grid": np.asarray(cfg["lams"]).tolist(),
            "knn_k_grid": knn_k_grid(cfg["m_train"]).tolist(),
            "svm_C": "C = 1/(n λ), n the rows the SVC is fitted on; gamma = 1/σ²",
            "kernel": "gaussian, σ² = mean squared pairwise distance of the training rows",
            "rankers": {"dtype": DTYPE, "eps": 0.5, "tol": 1e-6, **GRID_PATH},
            "smote_k": SMOTE_K,
            "selection": "validation AUC on an independent draw of m_val rows; ties to the "
            "larger λ / k; the training-rows model at that value scored on the test rows",
            "max_minutes": args.max_minutes,
        },
        "cells": cells,
        "fig5": fig5,
        "seconds": None,
    }
    result["rankrc_vs_paper"] = compare_rankrc(cells)
    if fig5 is not None:
        result["fig5"]["png"] = plot_fig5(fig5, png).name
    result["seconds"] = time.perf_counter() - t_start
    path = C.write_json(out, result)
    print()
    print(markdown(result))
    print(f"\nwrote {path} and {png.name} ({result['seconds']:.0f} s; {note})")
    if args.save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        for f in (path, png):
            if f.exists():
                shutil.copy2(f, RESULTS_DIR / f.name)
        print(f"saved to {RESULTS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
