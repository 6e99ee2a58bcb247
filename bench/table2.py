"""Seed 000, Sec. 6.1: Table 2 (test AUC on the simulated rare-class data) and Fig. 5, one command.

Results beside the paper's, and RANK-RC's distance to them per cell: RESULTS.md §2. The paper's
protocol (seed 000 Sec. 6, 6.1), followed here; the JSON settings spell it out too:

* **Data**: ``jaxrank.datasets`` rare-class generator (d = 5, σ = 0.5), overlap high / medium /
  low = t 0.9 / 0.75 / 0.6 × ρ = 10-40 %: 12 cells. Per cell and trial new centres and 1,000
  training, 1,000 validation, 10,000 test rows, standardised on the training rows; 10 trials.
  Keys derive from the cell's index in :data:`CELLS` and the trial (:func:`draw_trial`), so a
  cell draws the same data whichever cells run.
* **Kernel / parameters**: Gaussian, σ² = mean squared pairwise distance of the training rows
  for every SVM (RUS and SMOTE too) and ranker; γ is not searched. λ over ``log2 λ = −20, −18,
  …, 10``, KNN's k over ``1 … ⌊min(100, √m)⌋``, each by **AUC on the validation set** (ties to
  the larger value), the training-rows model at that value scored on the test rows. SVMs solve
  eq. (2)/(3) ``(1/n) Σ ω_i hinge + (λ/2)||w||²``: ``SVC(C = 1/(n λ))``, n the rows fitted.
* **Methods**: KNN (rare fraction of the neighbours), SVM, SVM-W (ω± = m/(2m±)), SVM-RUS
  (majority cut to m+), SVM-SMT (SMOTE, 5 neighbours, rare grown to m−), RANK-SVM, RANK-RND
  (|R| = m+ uniform rows), RANK-RC: ε = 0.5, tol 1e-6, float32, the λ grid in one warm-started
  call. True Bayes: the test AUC of the generator's exact log likelihood ratio.
* **Fig. 5**: the hinge ranking loss R̂_h (:func:`hinge_rank_loss`) on training and test rows
  against λ for the three rankers, first trial of :data:`FIG5_CELL` (the paper's four cells are
  unnamed): ``<stem>_fig5.png``.

``select_s`` is a method's whole search, ``test_s`` the scoring of the test rows.
``--max-minutes``: trials run trial-major and a round starts only if the time spent plus the
last round's fits: fewer, complete, trials per cell (``settings.trials_note``).
``--trials 2 --cells medium-10 low-40`` runs part of the table.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import datasets, losses, metrics, pairwise

NAME = "table2"
DTYPE = "float32"
OVERLAPS = {"high": 0.9, "medium": 0.75, "low": 0.6}
RHOS = (0.1, 0.2, 0.3, 0.4)
CELLS = tuple((ov, rho) for ov in OVERLAPS for rho in RHOS)  # the rows of Table 2, in order
TRIALS = 10
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
GRID_PATH = dict(path="warm", chains=4)
WITHIN = 2.0  # AUC points: the issue's "RANK-RC within 2 points of the paper"
FIG5_CELL = ("medium", 0.1)
SMOTE_K = 5
FULL = dict(cells=CELLS, trials=TRIALS, m_train=1000, m_val=1000, m_test=10_000, lams=LAM_GRID)
QUICK = dict(
    cells=(FIG5_CELL,), trials=1, m_train=200, m_val=200, m_test=2000,
    lams=2.0 ** np.array([-12.0, -8.0, -4.0, 0.0]),
)  # fmt: skip

METHODS = ("knn", "svm", "svm-w", "svm-rus", "svm-smote", "rank-svm", "rank-rnd", "rank-rc")
_NAMES = "KNN SVM SVM-W SVM-RUS SVM-SMT RANK-SVM RANK-RND RANK-RC"
PAPER_NAMES = dict(zip(METHODS, _NAMES.split(), strict=True))
RANKERS = {"rank-svm": jaxrank.fit_ranksvm, "rank-rnd": jaxrank.fit, "rank-rc": jaxrank.fit_rankrc}


def cell_label(overlap: str, rho: float) -> str:
    """``"medium-10"`` for (medium, ρ = 0.1): the ``--cells`` spelling."""
    return f"{overlap}-{round(100 * rho)}"


def parse_cell(text: str) -> tuple[str, float]:
    """Inverse of :func:`cell_label`; raises ``ValueError`` on a cell not in Table 2."""
    labels = {cell_label(*c): c for c in CELLS}
    if text not in labels:
        raise ValueError(f"unknown cell {text!r}; use one of: {' '.join(labels)}")
    return labels[text]


# Seed 000, Table 2 ("Comparison of Test AUC Results for Simulated Datasets"): mean ± s.e. over
# 10 trials, per (overlap, ρ), in the order of METHODS (KNN, SVM, …, RANK-RC).
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
PAPER_TABLE2: dict[tuple[str, float], dict[str, tuple[float, float]]] = {
    parse_cell(label): dict(zip(METHODS, zip(v[::2], v[1::2], strict=True), strict=True))
    for label, v in ((k, [float(s) for s in t.split()]) for k, t in _P.items())
}
"""Seed 000 Table 2: ``{(overlap, ρ): {method: (mean, s.e.)}}`` in AUC points."""
PAPER_BAYES = {"high": 66.8, "medium": 69.5, "low": 74.4}
"""Seed 000 Table 2, "True Bayes" column: one value per overlap level."""

standardise, pick_best, mean_se = DH.standardise, DH.pick_best, DH.mean_se
knn_k_grid = DH.knn_k_grid  # the paper's KNN grid (seed 000 Sec. 6)


def svm_C(lam: float, n: int) -> float:
    """LIBSVM's C for ``(1/n) Σ hinge + (λ/2)||w||²``: ``C = 1/(n λ)``."""
    return 1.0 / (n * lam)


def hinge_rank_loss(y, scores) -> np.ndarray:
    """R̂_h of seed 000 Sec. 6.1 (Fig. 5) of ``(n,)`` or ``(L, n)`` scores (a λ grid), summed by
    ``jaxrank.pairwise.value_and_grad`` with ``losses.hinge()`` (sorted windows, no pair matrix)."""
    pos = np.asarray(y) == 1
    n_pairs = float(pos.sum()) * float((~pos).sum())
    out = [float(pairwise.value_and_grad(row[pos], row[~pos], losses.hinge())[0]) / n_pairs
           for row in np.atleast_2d(np.asarray(scores))]  # fmt: skip
    return np.asarray(out) if np.ndim(scores) == 2 else np.asarray(out[0])


def _auc(y, scores) -> np.ndarray:
    return np.asarray(metrics.auc(y, np.asarray(scores, dtype=np.float64)), dtype=np.float64)


def _svm_rows(name: str, X, y, seed: int):
    """``(X, y, class_weight)`` an SVM is fitted with: resampled (RUS, SMOTE) or weighted (W)."""
    from imblearn.over_sampling import SMOTE
    from imblearn.under_sampling import RandomUnderSampler

    m, m_pos = y.size, int(np.sum(y == 1))
    if name in ("svm", "svm-w"):
        return X, y, {1: m / (2 * m_pos), -1: m / (2 * (m - m_pos))} if name == "svm-w" else None
    if name == "svm-rus":
        return *RandomUnderSampler(random_state=seed).fit_resample(X, y), None
    return *SMOTE(k_neighbors=SMOTE_K, random_state=seed).fit_resample(X, y), None


def run_method(name, data, *, lams, key, seed: int) -> dict:
    """Search one method's parameter on (train → validation), score the test rows at the best;
    a ranker's fitted grid model rides along under the private key ``"_model"`` (Fig. 5)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; use one of {METHODS}.")
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["val"], data["test"]
    rec, model, grid = {}, None, np.asarray(lams)
    with C.caught_warnings() as caught:
        t0 = time.perf_counter()
        if name in RANKERS:
            extra = dict(basis="random", key=key) if name == "rank-rnd" else {}
            model = RANKERS[name](Xtr, ytr, grid, dtype=DTYPE, **GRID_PATH, **extra)
            score = lambda M, X: np.asarray(jax.block_until_ready(M.decision_function(X)))
            val = _auc(yva, model.decision_function(Xva)).reshape(-1)
            i = pick_best(grid, val)
            best, statuses = model.select(i), DH.status_names(model)
            rec.update(n_basis=model.n_basis, status=statuses[i], grid_statuses=statuses,
                       newton_iterations=int(np.asarray(model.info.iterations).sum()))  # fmt: skip
        else:
            from sklearn.neighbors import KNeighborsClassifier
            from sklearn.svm import SVC

            if name == "knn":
                grid = knn_k_grid(ytr.size)
                fits = [KNeighborsClassifier(n_neighbors=int(k)).fit(Xtr, ytr) for k in grid]
                score = lambda M, X: M.predict_proba(X)[:, 1]
            else:
                X, y, cw = _svm_rows(name, Xtr, ytr, seed)
                kw = dict(kernel="rbf", gamma=1 / jaxrank.kernels.sigma2_heuristic(Xtr),
                          class_weight=cw, cache_size=1000)  # fmt: skip
                fits = [SVC(C=svm_C(float(lam), y.size), **kw).fit(X, y) for lam in grid]
                score = lambda M, X: M.decision_function(X)
            val = np.asarray([float(_auc(yva, score(f, Xva))) for f in fits])
            i = pick_best(grid, val)
            best = fits[i]
            if name != "knn":
                rec.update(n_fit_rows=int(y.size), n_support=int(best.n_support_.sum()))
        select_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        test_auc = float(_auc(yte, score(best, Xte)))
        test_s = time.perf_counter() - t0
    param = ("k", int(grid[i])) if name == "knn" else ("log2_lam", float(np.log2(grid[i])))
    rec.update(
        param=param[0], value=param[1], grid=np.asarray(grid, dtype=np.float64).tolist(),
        val_auc_grid=np.asarray(val).tolist(), val_auc=float(val[i]), test_auc=test_auc,
        select_s=select_s, test_s=test_s, warnings=C.warning_list(caught, 200),
    )  # fmt: skip
    return {**rec, "_model": model} if model is not None else rec


def draw_trial(cell_index: int, overlap: str, rho: float, trial: int, cfg: dict, seed: int):
    """Centres, standardised (train, validation, test) sets, Bayes test AUC and the methods' key:
    ``jax.random.split(fold_in(fold_in(key(seed), cell_index), trial), 5)``, in that order."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), cell_index), trial)
    kc, *keys, kfit = jax.random.split(key, 5)
    centers = datasets.rare_class_centers(OVERLAPS[overlap], key=kc)
    sets = [datasets.make_rare_class(cfg[f"m_{s}"], rho, None, centers=centers, key=k)
            for s, k in zip(("train", "val", "test"), keys, strict=True)]  # fmt: skip
    bayes = float(_auc(sets[2][1], datasets.bayes_scores(sets[2][0], centers)))
    Xs = standardise(*(X for X, _ in sets))
    data = {s: (X, y) for s, X, (_, y) in zip(("train", "val", "test"), Xs, sets, strict=True)}
    return data, bayes, kfit


def fig5_record(data: dict, recs: dict, lams) -> dict:
    """Train and test R̂_h along the λ grid of each ranker fitted on one trial."""
    out = {}
    for name in (n for n in RANKERS if n in recs):
        f = recs[name]["_model"].decision_function
        out[name] = {f"{s}_loss": hinge_rank_loss(data[s][1], f(data[s][0])).tolist()
                     for s in ("train", "test")}  # fmt: skip
        out[name]["chosen_log2_lam"] = recs[name]["value"]
    return {"log2_lam": np.log2(np.asarray(lams)).tolist(), "methods": out}


def plot_fig5(fig5: dict, path: Path) -> Path:
    """Fig. 5 of seed 000 for one cell: train (dashed) and test (solid) R̂_h against log2 λ."""
    fig, ax = C.pyplot().subplots(figsize=(6, 4.2))
    x = fig5["log2_lam"]
    colours = {"rank-svm": "tab:blue", "rank-rnd": "tab:green", "rank-rc": "tab:red"}
    for name, r in fig5["methods"].items():
        c = colours.get(name)
        ax.plot(x, r["test_loss"], "-o", ms=3, color=c, label=f"{PAPER_NAMES[name]} test")
        ax.plot(x, r["train_loss"], "--", color=c, label=f"{PAPER_NAMES[name]} train")
        ax.axvline(r["chosen_log2_lam"], color=c, lw=0.6, ls=":")
    title = f"Fig. 5 (seed 000): {fig5['cell']}, trial {fig5['trial']}; dotted: chosen λ"
    ax.set(xlabel="log2 λ", ylabel="hinge ranking loss R̂_h", title=title)
    ax.legend(fontsize=7, ncol=2)
    return C.save_figure(fig, path)


def summarise_cell(cell: dict, methods) -> dict:
    """Mean ± s.e. of the test AUC over trials per method (and of the Bayes AUC)."""
    out = {}
    for name in methods:
        rs = [t["methods"][name] for t in cell["trials"]]
        mean, se = mean_se([r["test_auc"] for r in rs])
        med = {f"{k}_median": float(np.median([r[k] for r in rs]))
               for k in ("value", "select_s", "test_s")}  # fmt: skip
        out[name] = {"runs": len(rs), "test_auc_mean": mean, "test_auc_se": se, **med,
                     "warned_runs": sum(bool(r["warnings"]) for r in rs)}  # fmt: skip
    mean, se = mean_se([t["bayes_test_auc"] for t in cell["trials"]])
    out["bayes"] = {"runs": len(cell["trials"]), "test_auc_mean": mean, "test_auc_se": se}
    return out


def compare_rankrc(cells: list[dict], within: float = WITHIN) -> dict:
    """Per cell: RANK-RC (ours − paper) in points, within ``within``?, and the Bayes context."""
    per = []
    for c in (c for c in cells if "rank-rc" in c["summary"]):
        ours, bayes = (100 * c["summary"][k]["test_auc_mean"] for k in ("rank-rc", "bayes"))
        paper = PAPER_TABLE2[(c["overlap"], c["rho"])]["rank-rc"][0]
        paper_bayes = PAPER_BAYES[c["overlap"]]
        per.append({
            "cell": cell_label(c["overlap"], c["rho"]), "ours": ours, "paper": paper,
            "diff": ours - paper, "within": bool(abs(ours - paper) <= within),
            "bayes_ours": bayes, "bayes_paper": paper_bayes, "bayes_diff": bayes - paper_bayes,
            "gap_to_bayes_ours": bayes - ours, "gap_to_bayes_paper": paper_bayes - paper,
        })  # fmt: skip
    return {"threshold_points": within, "within": sum(p["within"] for p in per),
            "cells": len(per), "per_cell": per}  # fmt: skip


def explain(p: dict) -> str:
    """One line on a cell's RANK-RC against the paper (the issue's 'every miss explained')."""
    head = (f"{p['cell']}: RANK-RC {p['ours']:.1f} vs paper {p['paper']:.1f} "
            f"({p['diff']:+.1f}) — {'within' if p['within'] else 'MISS'}")  # fmt: skip
    ctx = (f"Bayes ours {p['bayes_ours']:.1f} vs paper {p['bayes_paper']:.1f} "
           f"({p['bayes_diff']:+.1f}); distance to Bayes ours {p['gap_to_bayes_ours']:.1f} vs "
           f"paper {p['gap_to_bayes_paper']:.1f}")  # fmt: skip
    if p["within"]:
        return f"{head}. {ctx}."
    why = []
    if abs(p["bayes_diff"]) >= 1.0 and np.sign(p["bayes_diff"]) == np.sign(p["diff"]):
        why.append("our generator's Bayes AUC differs from the paper's in the same direction")
    if p["diff"] > 0 and p["gap_to_bayes_ours"] < p["gap_to_bayes_paper"] - 1.0:
        why.append("ours is closer to the Bayes ceiling than the paper's RANK-RC (the paper's "
                   "rankers sit further below its own Bayes column)")  # fmt: skip
    if p["diff"] < 0 and p["gap_to_bayes_ours"] > p["gap_to_bayes_paper"] + 1.0:
        why.append("ours is further below the Bayes ceiling than the paper's (unexplained)")
    return f"{head}. {ctx}. " + ("; ".join(why) if why else "no generator difference explains it")


def markdown(result: dict) -> str:
    """Table 2, ours beside the paper's, then a line per cell on RANK-RC vs the paper."""
    methods = [m for m in METHODS if m in result["settings"]["methods"]]
    st = result["settings"]
    cell = lambda x: C.fmt_pm(x["test_auc_mean"], x["test_auc_se"])
    rows = []
    for c in result["cells"]:
        s, paper = c["summary"], PAPER_TABLE2[(c["overlap"], c["rho"])]
        b = cell(s["bayes"])
        rows.append([c["overlap"], f"{round(100 * c['rho'])}%",
                     *(f"{cell(s[m])} / "
                       f"{paper[m][0]:.1f} ± {paper[m][1]:.1f}" for m in methods),
                     f"{b} / {PAPER_BAYES[c['overlap']]:.1f}"])  # fmt: skip
    lines = [
        f"**Table 2 (seed 000 Sec. 6.1)** — test AUC (points), mean ± s.e. over "
        f"{st['trials_done']} trial(s) (paper: 10), m = {st['m_train']} / {st['m_val']} / "
        f"{st['m_test']}; each entry: ours / paper",
        "",
        *C.md_table(["overlap", "ρ", *(PAPER_NAMES[m] for m in methods), "True Bayes"], rows,
                    "l" + "r" * (len(methods) + 2)),
    ]  # fmt: skip
    if st.get("trials_note") and st["trials_done"] != st.get("trials_paper", TRIALS):
        lines.insert(1, f"\n*Trials: {st['trials_note']}.*")
    cmp = result.get("rankrc_vs_paper") or compare_rankrc(result["cells"])
    if cmp["cells"]:
        lines += ["", f"**RANK-RC within {cmp['threshold_points']:g} AUC points of the paper: "
                  f"{cmp['within']} of {cmp['cells']} cells.**", ""]  # fmt: skip
        lines += [f"- {explain(p)}" for p in cmp["per_cell"]]
    return "\n".join(lines)


def run_trials(cfg: dict, methods, seed: int, max_minutes: float | None):
    """Every cell of trial 0, then of trial 1, … while ``max_minutes`` allows another round."""
    t_start = time.perf_counter()
    cells = [{"overlap": ov, "t": OVERLAPS[ov], "rho": rho, "trials": []}
             for ov, rho in cfg["cells"]]  # fmt: skip
    fig5_cell = FIG5_CELL if FIG5_CELL in cfg["cells"] else cfg["cells"][0]
    fig5 = stopped = None
    last_round = 0.0
    for trial in range(cfg["trials"]):
        elapsed = (time.perf_counter() - t_start) / 60
        if trial and max_minutes is not None and elapsed + last_round > max_minutes:
            stopped = (
                f"stopped after {trial} trial(s): {elapsed:.1f} min spent + "
                f"{last_round:.1f} min for the last round > --max-minutes {max_minutes:g}"
            )
            print(stopped, flush=True)
            break
        t_round = time.perf_counter()
        for cell in cells:
            ov, rho = cell["overlap"], cell["rho"]
            ci = CELLS.index((ov, rho))
            data, bayes, kfit = draw_trial(ci, ov, rho, trial, cfg, seed)
            recs = {name: run_method(name, data, lams=cfg["lams"], key=jax.random.fold_in(kfit, j),
                                     seed=seed * 1_000_003 + 1000 * ci + trial)
                    for j, name in enumerate(methods)}  # fmt: skip
            if fig5 is None and (ov, rho) == fig5_cell:
                fig5 = {"cell": cell_label(ov, rho), "trial": trial,
                        **fig5_record(data, recs, cfg["lams"])}  # fmt: skip
            for r in recs.values():
                r.pop("_model", None)
            cell["trials"].append({"trial": trial, "m_pos": int(np.sum(data["train"][1] == 1)),
                                   "bayes_test_auc": bayes, "methods": recs})  # fmt: skip
            aucs = " ".join(f"{n}={100 * r['test_auc']:.1f}" for n, r in recs.items())
            print(
                f"  trial {trial} {cell_label(ov, rho)} bayes={100 * bayes:.1f} {aucs}", flush=True
            )
        last_round = (time.perf_counter() - t_round) / 60
    return cells, fig5, stopped


def main(argv=None) -> int:
    ap = C.parser(NAME, __doc__, "tiny sizes, one cell, 1 trial", seed=0)
    ap.add_argument("--trials", type=int, default=None, help=f"trials per cell ({TRIALS})")
    ap.add_argument("--cells", nargs="+", default=None, help="e.g. medium-10 low-40 (all 12)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start a trial round only if it should end within this")  # fmt: skip
    args = ap.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.trials is not None:
        cfg["trials"] = args.trials
    if args.cells:
        cfg["cells"] = tuple(parse_cell(c) for c in args.cells)
    png = args.out.with_name(args.out.stem + "_fig5.png")
    methods = [m for m in METHODS if m in args.methods]
    env = C.header(NAME, f"{len(cfg['cells'])} cell(s) x {cfg['trials']} trial(s)")
    t_start = time.perf_counter()
    cells, fig5, stopped = run_trials(cfg, methods, args.seed, args.max_minutes)
    trials_done = min(len(c["trials"]) for c in cells)
    for c in cells:
        c["summary"] = summarise_cell(c, methods)
        c["paper"] = {m: list(v) for m, v in PAPER_TABLE2[(c["overlap"], c["rho"])].items()}
        c["paper_bayes"] = PAPER_BAYES[c["overlap"]]
    note = (f"the paper's {TRIALS} trials" if trials_done == TRIALS
            else f"{trials_done} trial(s) per cell instead of the paper's {TRIALS}"
            + (f" ({stopped})" if stopped else " (--trials / --quick)"))  # fmt: skip
    settings = {
        "quick": args.quick, "cells": [cell_label(*c) for c in cfg["cells"]], "methods": methods,
        "trials": cfg["trials"], "trials_done": trials_done, "trials_paper": TRIALS,
        "trials_note": note, "seed": args.seed,
        **{k: cfg[k] for k in ("m_train", "m_val", "m_test")}, "d": 5, "sigma": 0.5,
        "lam_grid": np.asarray(cfg["lams"]).tolist(),
        "knn_k_grid": knn_k_grid(cfg["m_train"]).tolist(),
        "svm_C": "C = 1/(n λ), n the rows the SVC is fitted on; gamma = 1/σ²",
        "kernel": "gaussian, σ² = mean squared pairwise distance of the training rows",
        "rankers": {"dtype": DTYPE, "eps": 0.5, "tol": 1e-6, **GRID_PATH}, "smote_k": SMOTE_K,
        "selection": "validation AUC on an independent draw of m_val rows; ties to the larger "
        "λ / k; the training-rows model at that value scored on the test rows",
        "max_minutes": args.max_minutes,
    }  # fmt: skip
    result = {"benchmark": NAME, "env": env, "settings": settings, "cells": cells, "fig5": fig5,
              "seconds": None, "rankrc_vs_paper": compare_rankrc(cells)}  # fmt: skip
    if fig5 is not None:
        result["fig5"]["png"] = plot_fig5(fig5, png).name
    result["seconds"] = time.perf_counter() - t_start
    path = C.write_json(args.out, result)
    print("\n" + markdown(result))
    print(f"\nwrote {path} and {png.name} ({result['seconds']:.0f} s; {note})")
    if args.save:
        C.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        for f in (f for f in (path, png) if f.exists()):
            shutil.copy2(f, C.RESULTS_DIR / f.name)
        print(f"saved to {C.RESULTS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
